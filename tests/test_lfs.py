"""Git LFS: pcheckout's checkout leaves what git's checkout with git-lfs leaves."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from clonehelp import latency_mount
from helpers import assert_same_as_git, git, make_repo, snapshot, write_tree_files
from lfshelp import (
    LFS_CONFIG,
    lfs_clone,
    lfs_files,
    lfs_repo,
    lfs_views,
    needs_lfs,
    no_lfs_path,
    objects_dir,
)

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.errors import PcheckoutError
from pcheckout.git import lfs, lfsstage
from pcheckout.options import Result

pytestmark = [needs_lfs, pytest.mark.usefixtures("writer")]


def _ours(
    ours: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    without_lfs: bool = False,
    rev: str | None = None,
) -> Result:
    """pcheckout's checkout; ``without_lfs``: git-lfs is not on PATH (proves no filter ran)."""
    with monkeypatch.context() as m:
        if without_lfs:
            m.setenv("PATH", no_lfs_path(ours.parent))
        opts = CheckoutOptions(directory=ours, workers=3)
        if rev is not None:
            opts = CheckoutOptions(directory=ours, workers=3, rev=rev)
        return checkout(opts)


def _theirs(src: Path, theirs: Path, rev: str = "main", **kw: object) -> Path:
    lfs_clone(src, theirs, **kw)  # type: ignore[arg-type]
    git(theirs, "checkout", "-q", "-f", rev)
    return theirs


def _same(ours: Path, theirs: Path) -> None:
    assert_same_as_git(ours, theirs)
    assert lfs_views(ours) == lfs_views(theirs)


def test_objects_present_are_written_without_a_filter_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    files = lfs_files()
    src = lfs_repo(tmp_path, files)
    theirs = _theirs(src, tmp_path / "theirs")
    ours = lfs_clone(src, tmp_path / "ours")
    result = _ours(ours, monkeypatch, without_lfs=writer == "pcheckout")
    _same(ours, theirs)
    assert (ours / "big/large.bin").read_bytes() == files[b"big/large.bin"]
    assert git(ours, "cat-file", "-p", ":d0/blob00.bin").startswith(b"version https://git-lfs")
    hooks = sorted(
        p.name for p in (ours / ".git/hooks").iterdir() if not p.name.endswith(".sample")
    )
    assert hooks == sorted(
        p.name for p in (theirs / ".git/hooks").iterdir() if not p.name.endswith(".sample")
    )
    if writer == "pcheckout":
        lfs_count = sum(1 for p, v in files.items() if p.endswith(b".bin") and v)
        assert (result.lfs_files, result.lfs_local, result.lfs_missing) == (lfs_count, lfs_count, 0)


def test_lfs_not_configured_writes_the_pointers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = lfs_repo(tmp_path, lfs_files(4))
    theirs = tmp_path / "theirs"
    git(tmp_path, "clone", "-q", "--no-checkout", str(src), str(theirs))
    git(theirs, "checkout", "-q", "-f", "main")
    ours = tmp_path / "ours"
    git(tmp_path, "clone", "-q", "--no-checkout", str(src), str(ours))
    _ours(ours, monkeypatch)
    assert_same_as_git(ours, theirs)
    assert (ours / "d0/blob00.bin").read_bytes().startswith(b"version https://git-lfs")


def test_skip_smudge_takes_git_lfs_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = lfs_repo(tmp_path, lfs_files(4))
    monkeypatch.setenv("GIT_LFS_SKIP_SMUDGE", "1")
    theirs = _theirs(src, tmp_path / "theirs", objects=False)
    ours = lfs_clone(src, tmp_path / "ours", objects=False)
    result = _ours(ours, monkeypatch)
    _same(ours, theirs)
    assert (ours / "d0/blob00.bin").read_bytes().startswith(b"version https://git-lfs")
    assert result.lfs_local == 0


def test_damaged_object_goes_to_git_lfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """An object of the wrong size is git-lfs's to handle: git-lfs removes it and fetches
    it again (3.3 in git's delayed checkout fails that first checkout; the next one fetches
    it); pcheckout counts it missing and fetches it with the others before writing."""
    files = lfs_files(4)
    src = lfs_repo(tmp_path, files)
    oid = git(src, "lfs", "ls-files", "-l", "-I", "d0/blob00.bin").split()[0].decode()

    def damage(repo: Path) -> Path:
        obj = objects_dir(repo) / oid[:2] / oid[2:4] / oid
        obj.chmod(0o644)
        obj.write_bytes(b"short")
        return obj

    theirs = lfs_clone(src, tmp_path / "theirs")
    damage(theirs)
    first = subprocess.run(["git", "-C", str(theirs), "checkout", "-q", "-f", "main"])
    assert first.returncode != 0
    git(theirs, "checkout", "-q", "-f", "main")
    ours = lfs_clone(src, tmp_path / "ours")
    obj = damage(ours)
    if writer == "git":  # git's delayed checkout, as above
        with pytest.raises(PcheckoutError, match="smudge filter lfs failed"):
            _ours(ours, monkeypatch)
    result = _ours(ours, monkeypatch)
    _same(ours, theirs)
    assert (ours / "d0/blob00.bin").read_bytes() == files[b"d0/blob00.bin"]
    assert obj.stat().st_size == len(files[b"d0/blob00.bin"])
    if writer == "pcheckout":  # fetched again before writing, by git lfs fetch
        assert (result.lfs_local, result.lfs_fetches) == (result.lfs_files, 1)


def test_fetchexclude_goes_to_git_lfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = lfs_repo(tmp_path, lfs_files(4))
    cfg = {"lfs.fetchexclude": "d1"}
    theirs = _theirs(src, tmp_path / "theirs", objects=False, config=cfg)
    ours = lfs_clone(src, tmp_path / "ours", objects=False, config=cfg)
    result = _ours(ours, monkeypatch)
    _same(ours, theirs)
    assert (ours / "d1/blob01.bin").read_bytes().startswith(b"version https://git-lfs")
    assert result.lfs_local == 0


def test_linked_worktree_reads_the_common_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    files = lfs_files(4)
    src = lfs_repo(tmp_path, files)
    for hook in (src / ".git/hooks").iterdir():  # git-lfs installed them on its first clean
        hook.unlink()
    git(src, "branch", "a")
    git(src, "branch", "b")
    git(src, "worktree", "add", "-q", "--no-checkout", str(tmp_path / "ours"), "a")
    git(src, "worktree", "add", "-q", "--no-checkout", str(tmp_path / "theirs"), "b")
    ours = tmp_path / "ours"
    result = _ours(ours, monkeypatch, without_lfs=writer == "pcheckout")
    git(tmp_path / "theirs", "checkout", "-q", "-f", "b")  # (git-lfs installs hooks again)
    assert (ours / "big/large.bin").read_bytes() == files[b"big/large.bin"]
    assert git(ours, "status", "--porcelain") == b""
    assert lfs_views(ours)[0] == lfs_views(tmp_path / "theirs")[0]
    if writer == "pcheckout":
        assert result.lfs_local == result.lfs_files > 0


def test_lfs_storage_relative_to_the_git_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    src = lfs_repo(tmp_path, lfs_files(3))
    store = {"lfs.storage": "elsewhere"}
    theirs = lfs_clone(src, tmp_path / "theirs", objects=False, config=store)
    ours = lfs_clone(src, tmp_path / "ours", objects=False, config=store)
    for repo in (theirs, ours):
        os.rename(_copy_store(src, repo), repo / ".git" / "elsewhere")
    git(theirs, "checkout", "-q", "-f", "main")
    _ours(ours, monkeypatch, without_lfs=writer == "pcheckout")
    _same(ours, theirs)


def _copy_store(src: Path, repo: Path) -> Path:
    import shutil

    shutil.copytree(objects_dir(src), repo / "tmp-store" / "objects")
    return repo / "tmp-store"


def _with_branch_two(tmp_path: Path, files: dict[bytes, bytes]) -> Path:
    """An LFS repository of ``files`` on main, and a branch ``two`` that changes one LFS
    file and adds another (HEAD left on main)."""
    src = lfs_repo(tmp_path, files)
    git(src, "checkout", "-q", "-b", "two")
    (src / "d1/blob01.bin").write_bytes(b"changed\n" * 999)
    (src / "new.bin").write_bytes(b"new\n" * 5000)
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "two")
    git(src, "checkout", "-q", "main")
    return src


def test_switch_writes_only_changed_lfs_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    files = lfs_files(4)
    src = _with_branch_two(tmp_path, files)
    theirs = _theirs(src, tmp_path / "theirs")
    git(theirs, "checkout", "-q", "two")
    ours = lfs_clone(src, tmp_path / "ours")
    _ours(ours, monkeypatch)
    before = {p: os.stat(ours / p).st_ino for p in ("d0/blob00.bin", "d1/blob01.bin")}
    result = _ours(ours, monkeypatch, rev="two")  # (its local-change check runs git-lfs)
    _same(ours, theirs)
    assert os.stat(ours / "d0/blob00.bin").st_ino == before["d0/blob00.bin"]
    if writer == "pcheckout":
        assert result.lfs_local == 2


def test_sparse_cone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str) -> None:
    src = lfs_repo(tmp_path, lfs_files(6))
    theirs = lfs_clone(src, tmp_path / "theirs")
    ours = lfs_clone(src, tmp_path / "ours")
    for repo in (theirs, ours):
        git(repo, "sparse-checkout", "set", "--cone", "d1", "big")
    git(theirs, "checkout", "-q", "-f", "main")
    _ours(ours, monkeypatch, without_lfs=writer == "pcheckout")
    assert snapshot(ours) == snapshot(theirs)
    assert git(ours, "ls-files", "-s", "-t") == git(theirs, "ls-files", "-s", "-t")
    assert git(ours, "status", "--porcelain") == b""
    assert lfs_views(ours) == lfs_views(theirs)
    assert not (ours / "d0").exists()


def test_configured_custom_smudge_is_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = lfs_repo(tmp_path, lfs_files(2))
    custom = {"filter.lfs.process": "git-lfs filter-process --skip"}
    theirs = _theirs(src, tmp_path / "theirs", config=custom, objects=False)
    ours = lfs_clone(src, tmp_path / "ours", config=custom, objects=False)
    result = _ours(ours, monkeypatch)
    _same(ours, theirs)
    assert (ours / "d0/blob00.bin").read_bytes().startswith(b"version https://git-lfs")
    assert result.lfs_local == 0


def test_standard_config_keys() -> None:
    assert LFS_CONFIG["filter.lfs.process"] == "git-lfs filter-process"


def test_dry_run_counts_lfs_files(tmp_path: Path) -> None:
    import json

    from helpers import run_cli

    files = lfs_files(4)
    src = lfs_repo(tmp_path, files)
    ours = lfs_clone(src, tmp_path / "ours")
    oid = git(src, "lfs", "ls-files", "-l", "-I", "d0/blob00.bin").split()[0].decode()
    (objects_dir(ours) / oid[:2] / oid[2:4] / oid).unlink()
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PCHECKOUT_WRITER": "pcheckout"}
    proc = run_cli("checkout", "-C", str(ours), "--dry-run", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    lfs = json.loads(proc.stdout)["lfs"]
    sizes = [len(v) for p, v in files.items() if p.endswith(b".bin") and v]
    missing = len(files[b"d0/blob00.bin"])
    assert lfs == {
        "files": len(sizes),
        "local": len(sizes) - 1,
        "local_bytes": sum(sizes) - missing,
        "missing": 1,
        "missing_bytes": missing,
        "fetches": 0,
        "fetched_bytes": 0,
    }
    text = run_cli("checkout", "-C", str(ours), "--dry-run", env=env).stdout
    assert f"Git LFS: {len(sizes)} files" in text
    assert "1 object" in text
    assert not (ours / "d0").exists()


def _file_clone(src: Path, dest: Path) -> Path:
    """A clone whose LFS objects are behind its file:// remote (git-lfs's standalone
    file transfer), none local."""
    git(src.parent, "clone", "-q", "--no-checkout", src.as_uri(), str(dest))
    for k, v in LFS_CONFIG.items():
        git(dest, "config", k, v)
    return dest


def test_missing_objects_fetched_in_a_few_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """A few git lfs fetch processes, whatever the count of objects (lfs.FETCHERS), each
    for a list of the missing paths, while the rest is written."""
    files = lfs_files(12)
    src = lfs_repo(tmp_path, files)
    theirs = _file_clone(src, tmp_path / "theirs")
    git(theirs, "checkout", "-q", "-f", "main")
    ours = _file_clone(src, tmp_path / "ours")
    result = _ours(ours, monkeypatch)
    _same(ours, theirs)
    if writer == "git":  # git runs git-lfs, which fetches
        return
    count = sum(1 for p, v in files.items() if p.endswith(b".bin") and v)
    assert result.lfs_fetches == lfs.FETCHERS < count
    assert (result.lfs_local, result.lfs_missing) == (count, 0)
    assert result.lfs_fetched_bytes == sum(len(v) for p, v in files.items() if p.endswith(b".bin"))
    assert (ours / "big/large.bin").read_bytes() == files[b"big/large.bin"]


def test_switch_fetches_the_missing_objects_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """A switch's changed LFS files whose objects are behind the remote: fetched by one
    git lfs fetch per --include list (here one per path), not one download per file."""
    files = lfs_files(4)
    src = _with_branch_two(tmp_path, files)
    theirs = _file_clone(src, tmp_path / "theirs")
    git(theirs, "checkout", "-q", "-f", "main")
    git(theirs, "checkout", "-q", "two")
    ours = _file_clone(src, tmp_path / "ours")
    _ours(ours, monkeypatch)
    result = _ours(ours, monkeypatch, rev="two")
    _same(ours, theirs)
    if writer == "pcheckout":
        assert (result.lfs_local, result.lfs_missing, result.lfs_fetches) == (2, 0, 2)


def test_unreachable_lfs_server_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    if writer == "git":
        pytest.skip("git's writer: git-lfs reports it per file, as in git's checkout")
    src = lfs_repo(tmp_path, lfs_files(3))
    ours = _file_clone(src, tmp_path / "ours")
    git(ours, "config", "remote.origin.url", (tmp_path / "gone").as_uri())
    with pytest.raises(PcheckoutError) as info:
        _ours(ours, monkeypatch)
    message = str(info.value)
    assert "\n" not in message
    assert "cannot fetch 4 Git LFS objects from 'origin'" in message
    assert not (ours / ".git/index").exists()  # what was written meanwhile: not recorded
    assert not (ours / "d0/blob00.bin").exists()
    # the server back: the same command finishes the checkout
    git(ours, "config", "remote.origin.url", src.as_uri())
    _ours(ours, monkeypatch)
    theirs = _file_clone(src, tmp_path / "theirs")
    git(theirs, "checkout", "-q", "-f", "main")
    _same(ours, theirs)


def test_paths_that_are_patterns_fetch_the_whole_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """A path --include would read as a pattern (a comma, a glob character): one fetch of
    the commit's objects, as git lfs pull fetches them."""
    files = lfs_files(3)
    files[b"d0/a,b [x].bin"] = os.urandom(3000)
    src = lfs_repo(tmp_path, files)
    theirs = _file_clone(src, tmp_path / "theirs")
    git(theirs, "checkout", "-q", "-f", "main")
    ours = _file_clone(src, tmp_path / "ours")
    result = _ours(ours, monkeypatch)
    _same(ours, theirs)
    if writer == "pcheckout":  # (git's writer: git runs git-lfs, which fetches)
        assert (result.lfs_fetches, result.lfs_missing) == (1, 0)


def test_include_lists() -> None:
    assert lfs.include_lists([b"a/x.bin", b"b/y.bin", b"c.bin"], 2) == ["a/x.bin", "b/y.bin,c.bin"]
    assert lfs.include_lists([b"a.bin"], 4) == ["a.bin"]
    assert lfs.include_lists([], 4) == []
    for odd in (b"a,b.bin", b"a*.bin", b"a b.bin", b"[a].bin", b"\xff.bin", b"!a.bin"):
        assert lfs.include_lists([b"a.bin", odd], 4) is None
    long = [b"d/%06d.bin" % i for i in range(30000)]  # 360 KiB of names: more lists
    lists = lfs.include_lists(long, 4)
    assert lists is not None and len(lists) > 4
    assert all(len(x) <= lfs.INCLUDE_BYTES for x in lists)
    assert ",".join(lists).split(",") == [p.decode() for p in long]


def test_pcheckout_clone_fetches_lfs_objects(tmp_path: Path) -> None:
    import json

    from helpers import run_cli

    files = lfs_files(3)
    src = lfs_repo(tmp_path, files)
    theirs = _file_clone(src, tmp_path / "theirs")
    git(theirs, "checkout", "-q", "-f", "main")
    config = [arg for k, v in LFS_CONFIG.items() for arg in ("-c", f"{k}={v}")]
    env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PCHECKOUT_WRITER": "pcheckout"}
    proc = run_cli("clone", "--json", *config, src.as_uri(), str(tmp_path / "ours"), env=env)
    assert proc.returncode == 0, proc.stderr
    _same(tmp_path / "ours", theirs)
    got = json.loads(proc.stdout)["checkout"]["lfs"]
    # the missing objects in lfs.FETCHERS concurrent fetches (fewer for fewer files)
    assert (got["fetches"], got["missing"]) == (min(lfs.FETCHERS, got["files"]), 0)
    assert got["local"] == got["files"] > 0


def _hooks(repo: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (repo / ".git/hooks").iterdir() if "." not in p.name}


def test_git_lfs_hooks_installed_as_its_filter_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """git-lfs's filter installs its hooks where missing when git starts it, and git then
    runs the post-checkout it installed: after a fresh checkout, and after a switch that
    brings the first LFS file (either writer: git's runs git with core.hooksPath=/dev/null,
    which git-lfs reads too)."""
    files = lfs_files(2)
    src = lfs_repo(tmp_path, {b"plain": b"no LFS file yet\n"})
    git(src, "checkout", "-q", "-b", "lfs")
    write_tree_files(src, files)
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "lfs")
    trace = {"ours": tmp_path / "ours.trace", "theirs": tmp_path / "theirs.trace"}
    for rev in ("lfs", "main"):
        ours, theirs = tmp_path / f"ours-{rev}", tmp_path / f"theirs-{rev}"
        monkeypatch.setenv("GIT_TRACE", str(trace["theirs"]))
        _theirs(src, theirs, rev=rev)
        git(theirs, "checkout", "-q", "lfs")  # (a switch to the same commit, if fresh)
        lfs_clone(src, ours)
        monkeypatch.setenv("GIT_TRACE", str(trace["ours"]))
        _ours(ours, monkeypatch, rev=rev)
        _ours(ours, monkeypatch, rev="lfs")
        monkeypatch.delenv("GIT_TRACE")
        assert _hooks(ours) == _hooks(theirs) != {}, rev
        _same(ours, theirs)
        ran = {k: t.read_text().count("git-lfs post-checkout") for k, t in trace.items()}
        assert ran["ours"] == ran["theirs"] > 0, rev
        for t in trace.values():
            t.unlink()


def test_no_git_lfs_hooks_where_no_path_is_in_lfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """git-lfs configured, a tree with no attributes at all: git never starts git-lfs's
    filter, which installs no hook, and neither does pcheckout (which then does not look
    the paths up: no attribute can name the filter)."""
    src = make_repo(tmp_path, {b"a": b"a\n", b"d/b": b"b\n"})
    theirs = _theirs(src, tmp_path / "theirs", objects=False)
    ours = lfs_clone(src, tmp_path / "ours", objects=False)
    _ours(ours, monkeypatch)
    assert _hooks(ours) == _hooks(theirs) == {}
    _same(ours, theirs)


@pytest.mark.parametrize("said", ["nested", "info", "nowhere"])
def test_git_lfs_hooks_follow_whichever_attribute_source_says_lfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str, said: str
) -> None:
    """A fresh checkout with no filter=lfs path, then a switch that writes one: git
    starts git-lfs's filter (which installs its hooks) for it whichever source says
    filter=lfs, a nested .gitattributes or $GIT_DIR/info/attributes, and never where
    none does; nor then does git's writer look the written paths up (no check-attr)."""
    top = b"*.txt text\n"
    nested = b"*.bin filter=lfs diff=lfs merge=lfs -text\n" if said == "nested" else b"*.c ident\n"
    info = b"*.bin filter=lfs -text\n"
    src = lfs_repo(tmp_path, {b".gitattributes": top, b"a.txt": b"a\n"})
    if said == "info":
        (src / ".git" / "info").mkdir(exist_ok=True)
        (src / ".git" / "info" / "attributes").write_bytes(info)
    git(src, "checkout", "-q", "-b", "next")
    write_tree_files(src, {b"d/.gitattributes": nested, b"d/x.bin": b"not a pointer\n"})
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "next")
    trace = tmp_path / "ours.trace"
    clones = {"theirs": tmp_path / "theirs", "ours": tmp_path / "ours"}
    for repo in clones.values():
        lfs_clone(src, repo, objects=said != "nowhere")
        if said == "info":
            (repo / ".git" / "info").mkdir(exist_ok=True)
            (repo / ".git" / "info" / "attributes").write_bytes(info)
    theirs = clones["theirs"]
    git(theirs, "checkout", "-q", "-f", "main")
    assert _hooks(theirs) == {}
    git(theirs, "checkout", "-q", "next")
    monkeypatch.setenv("GIT_TRACE", str(trace))
    _ours(clones["ours"], monkeypatch, rev="main")
    assert _hooks(clones["ours"]) == {}
    _ours(clones["ours"], monkeypatch, rev="next")
    monkeypatch.delenv("GIT_TRACE")
    assert _hooks(clones["ours"]) == _hooks(theirs)
    assert (_hooks(theirs) != {}) == (said != "nowhere")
    _same(clones["ours"], theirs)
    if writer == "git" and said == "nowhere":
        assert "check-attr" not in trace.read_text()


def test_partial_clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A blob:none clone: its missing pointers are fetched with the other blobs (never one
    lazy fetch each while planning) and smudged by git-lfs's filter."""
    src = lfs_repo(tmp_path, lfs_files(3))
    git(src, "config", "uploadpack.allowFilter", "true")
    clones = []
    for name in ("theirs", "ours"):
        repo = tmp_path / name
        git(tmp_path, "clone", "-q", "--no-checkout", "--filter=blob:none", src.as_uri(), str(repo))
        for k, v in LFS_CONFIG.items():
            git(repo, "config", k, v)
        clones.append(repo)
    theirs, ours = clones
    git(theirs, "checkout", "-q", "-f", "main")
    _ours(ours, monkeypatch)
    _same(ours, theirs)


def _store(repo: Path) -> dict[str, bytes]:
    """The LFS store's objects, by id."""
    store = objects_dir(repo)
    return {p.name: p.read_bytes() for p in store.rglob("*") if p.is_file()}


@pytest.mark.fuse
def test_on_a_network_mount_missing_objects_land_in_a_local_stage_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """Where the repository is on a latency-bound mount the fetches write into a local
    staging store (git/lfsstage.py): the result, the repository's store included, is git's
    and git-lfs's; the stage is gone afterwards; the file:// remote still answers."""
    files = lfs_files(6)
    src = _with_branch_two(tmp_path, files)
    theirs = _file_clone(src, tmp_path / "theirs")
    git(theirs, "checkout", "-q", "-f", "main")
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)  # (TMPDIR read again)
    kept: list[int] = []
    real_keep = lfsstage.keep

    def keep(stage: lfsstage.Stage, store: str, oids: list[str], threads: int) -> None:
        kept.append(len(oids))
        real_keep(stage, store, oids, threads)

    monkeypatch.setattr(lfsstage, "keep", keep)
    with latency_mount(tmp_path) as mnt:
        ours = _file_clone(src, mnt / "ours")
        result = _ours(ours, monkeypatch)
        _same(ours, theirs)
        assert _store(ours) == _store(theirs)
        if writer == "pcheckout":
            assert result.filesystem.latency_bound
            assert (result.lfs_missing, result.lfs_fetches) == (0, lfs.FETCHERS)
            assert kept == [7]  # every object fetched landed in the stage, then the store
        assert list(scratch.iterdir()) == []  # the stage is removed
        git(theirs, "checkout", "-q", "two")
        _ours(ours, monkeypatch, rev="two")  # a switch fetches the changed files' objects
        _same(ours, theirs)
        if writer == "pcheckout":
            assert kept == [7, 2]
        assert _store(ours) == _store(theirs)
        assert list(scratch.iterdir()) == []


def test_a_stage_includes_the_global_config_and_names_the_git_dir(tmp_path: Path) -> None:
    """The private global config keeps the user's own (git config reads through it) and
    gives lfs.storage to this git dir alone."""
    repo = lfs_repo(tmp_path, {b"f": b"1\n"})
    other = lfs_repo(tmp_path, {b"g": b"2\n"}, name="other")
    mine = tmp_path / "my.gitconfig"
    mine.write_text('[user]\n\tname = "Some \\"One\\""\n')
    env = {**os.environ, "GIT_CONFIG_GLOBAL": str(mine)}
    stage = lfsstage.make(repo / ".git", env, 1000)
    assert stage is not None
    try:

        def get(where: Path, key: str) -> bytes:
            out = subprocess.run(
                ["git", "-C", str(where), "config", key], env=stage.env, capture_output=True
            )
            return out.stdout.strip()

        assert get(repo, "lfs.storage") == stage.root.encode()
        assert get(other, "lfs.storage") == b""  # another repository (a file:// remote) not
        assert get(repo, "user.name") == get(other, "user.name") == b'Some "One"'
        assert stage.objects == os.path.join(stage.root, "objects")
    finally:
        stage.remove()
    assert not Path(stage.root).exists()
    assert lfsstage.make(tmp_path / "a*b" / ".git", env, 1000) is None  # a pattern
