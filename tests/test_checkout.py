"""pcheckout checkout vs git checkout: the results must be indistinguishable."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import (
    assert_index_matches_lstat,
    assert_same_as_git,
    clone_no_checkout,
    clone_with_git,
    git,
    make_repo,
    run_cli,
    snapshot,
    write_tree_files,
)

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.errors import NotARepositoryError, UnknownRevisionError, UntrackedInTheWayError

pytestmark = pytest.mark.usefixtures("writer")

ODD_NAMES: dict[bytes, bytes | tuple[str, bytes]] = {
    b"plain.txt": b"hello\n",
    b"empty": b"",
    b"new\nline": b"newline in name\n",
    b"tab\there": b"tab\n",
    b"back\\slash": b"backslash\n",
    b"sp ace/in dir/f i l e": b"spaces\n",
    b"\xff\xfe-not-utf8": b"latin\n",
    "ünïcödé/ß.txt".encode(): b"utf8\n",
    b"run.sh": ("x", b"#!/bin/sh\necho hi\n"),
    b"bin/tool": ("x", b"\x7fELF"),
    b"link-to-file": ("l", b"plain.txt"),
    b"link-to-dir": ("l", b"sp ace"),
    b"dangling": ("l", b"does/not/exist"),
    b"absolute": ("l", b"/etc/hostname"),
    b"weird-target": ("l", b"a\nb\\c\xff"),
    b"/".join([b"d%d" % i for i in range(30)]) + b"/deep.txt": b"thirty deep\n",
    b"-dash": b"starts with a dash\n",
    b".hidden": b"dotfile\n",
    b"a-b": b"sorts before a/\n",
    b"a/b": b"sorts after a-b\n",
    b"a.txt": b"x\n",
}


def _pcheckout(work: Path, rev: str = "HEAD", **kw: object) -> object:
    return checkout(CheckoutOptions(directory=work, rev=rev, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("workers", [1, 3, 16])
def test_odd_names_modes_symlinks(tmp_path: Path, workers: int, writer: str) -> None:
    src = make_repo(tmp_path, ODD_NAMES)
    theirs = clone_with_git(src, tmp_path / "theirs")
    ours = clone_no_checkout(src, tmp_path / "ours")
    result = _pcheckout(ours, workers=workers)
    assert result.files == len(ODD_NAMES)  # type: ignore[attr-defined]
    assert result.plan.writer == writer  # type: ignore[attr-defined]
    assert_same_as_git(ours, theirs)


def test_many_files_across_directories(tmp_path: Path) -> None:
    files: dict[bytes, bytes | tuple[str, bytes]] = {}
    for d in range(40):
        for f in range(25):
            files[b"dir%02d/sub%d/file%03d.c" % (d, f % 3, f)] = b"/* %d %d */\n" % (d, f) * (f + 1)
    src = make_repo(tmp_path, files)
    theirs = clone_with_git(src, tmp_path / "theirs")
    ours = clone_no_checkout(src, tmp_path / "ours")
    _pcheckout(ours, workers=8)
    assert_same_as_git(ours, theirs)


def test_blob_larger_than_read_buffer_streams(tmp_path: Path) -> None:
    from pcheckout.git import catfile

    big = os.urandom(1024) * (2 * catfile.SMALL_BLOB // 1024 + 7)  # > SMALL_BLOB, > READ_BUFFER
    src = make_repo(tmp_path, {b"big.bin": big, b"small": b"s"})
    theirs = clone_with_git(src, tmp_path / "theirs")
    ours = clone_no_checkout(src, tmp_path / "ours")
    _pcheckout(ours, workers=2)
    assert_same_as_git(ours, theirs)


def test_gitlink_becomes_empty_directory(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"x\n"})
    sub_commit = git(src, "rev-parse", "HEAD").decode().strip()
    git(src, "update-index", "--add", "--cacheinfo", f"160000,{sub_commit},vendor/sub")
    git(src, "commit", "-q", "-m", "gitlink")
    theirs = clone_with_git(src, tmp_path / "theirs")
    ours = clone_no_checkout(src, tmp_path / "ours")
    _pcheckout(ours)
    assert (ours / "vendor" / "sub").is_dir()
    assert_same_as_git(ours, theirs)


def test_core_filemode_false_and_symlinks_false(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"x.sh": ("x", b"#!/bin/sh\n"), b"l": ("l", b"x.sh")})
    cfg = {"core.fileMode": "false", "core.symlinks": "false"}
    theirs = clone_with_git(src, tmp_path / "theirs", config=cfg)
    ours = clone_no_checkout(src, tmp_path / "ours", config=cfg)
    _pcheckout(ours)
    assert not (ours / "l").is_symlink()
    assert_same_as_git(ours, theirs)


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_index_version_honoured(tmp_path: Path, version: str) -> None:
    from pcheckout.git.index import read_index

    src = make_repo(tmp_path, {b"a/b/c": b"1", b"a/b/d": b"2", b"e": b"3"})
    theirs = clone_with_git(src, tmp_path / "theirs", config={"index.version": version})
    ours = clone_no_checkout(src, tmp_path / "ours", config={"index.version": version})
    _pcheckout(ours)
    # git writes v3 only when an entry needs extended flags, else v2: so do we
    assert (
        read_index(ours / ".git" / "index").version == read_index(theirs / ".git" / "index").version
    )
    assert_same_as_git(ours, theirs)


def test_rev_branch_tag_and_detached_head(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"one\n"})
    git(src, "tag", "v1")
    (src / "f").write_bytes(b"two\n")
    git(src, "commit", "-qam", "two")
    git(src, "branch", "side", "v1")
    for rev in ["v1", "side", "main", "HEAD~1"]:
        theirs = clone_no_checkout(src, tmp_path / f"theirs-{rev}")
        git(theirs, "checkout", "-q", "-f", rev)
        if rev == "side":
            git(theirs, "checkout", "-q", "side")
        ours = clone_no_checkout(src, tmp_path / f"ours-{rev}")
        _pcheckout(ours, rev=rev)
        assert_same_as_git(ours, theirs)
        # the reflog speaks git's language so `git checkout -` works
        assert b"checkout: moving from" in git(ours, "reflog", "-1", "--format=%gs")


def test_branch_wins_over_a_tag_of_the_same_name(tmp_path: Path) -> None:
    # git checkout warns "refname 'same' is ambiguous" and takes the branch (rev-parse would
    # take the tag): the tree written must be the branch's, the one HEAD then names.
    src = make_repo(tmp_path, {b"f": b"tag\n"})
    git(src, "tag", "same")
    (src / "f").write_bytes(b"branch\n")
    git(src, "commit", "-qam", "branch")
    git(src, "branch", "same")
    (src / "f").write_bytes(b"main\n")
    git(src, "commit", "-qam", "main")
    theirs = clone_no_checkout(src, tmp_path / "theirs")
    git(theirs, "branch", "-q", "same", "origin/same")
    git(theirs, "checkout", "-q", "-f", "same")
    ours = clone_no_checkout(src, tmp_path / "ours")
    git(ours, "branch", "-q", "same", "origin/same")
    _pcheckout(ours, rev="same")
    assert (ours / "f").read_bytes() == b"branch\n"
    assert git(ours, "symbolic-ref", "HEAD").strip() == b"refs/heads/same"
    assert_same_as_git(ours, theirs)


@pytest.mark.parametrize("rev", ["main~1", "main^{commit}", "@", "v1", "main@{0}"])
def test_revision_syntax_is_not_taken_for_a_branch(tmp_path: Path, rev: str) -> None:
    src = make_repo(tmp_path, {b"f": b"one\n"})
    git(src, "tag", "v1")
    (src / "f").write_bytes(b"two\n")
    git(src, "commit", "-qam", "two")
    theirs = clone_no_checkout(src, tmp_path / "theirs")
    git(theirs, "checkout", "-q", "-f", rev)
    ours = clone_no_checkout(src, tmp_path / "ours")
    _pcheckout(ours, rev=rev)
    assert_same_as_git(ours, theirs)


def test_remote_branch_guess_creates_tracking_branch(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"one\n"})
    git(src, "checkout", "-q", "-b", "feature")
    (src / "g").write_bytes(b"g\n")
    git(src, "add", "g")
    git(src, "commit", "-qm", "feature")
    git(src, "checkout", "-q", "main")
    ours = clone_no_checkout(src, tmp_path / "ours")
    _pcheckout(ours, rev="feature")
    assert git(ours, "symbolic-ref", "HEAD").strip() == b"refs/heads/feature"
    assert git(ours, "config", "branch.feature.remote").strip() == b"origin"
    assert (ours / "g").read_bytes() == b"g\n"


def test_worktree_add_no_checkout(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"a/f": b"1\n", b"g": b"2\n"})
    git(src, "branch", "wt")
    git(src, "worktree", "add", "-q", "--no-checkout", str(tmp_path / "wt"), "wt")
    _pcheckout(tmp_path / "wt")
    assert (tmp_path / "wt" / "a" / "f").read_bytes() == b"1\n"
    assert git(tmp_path / "wt", "status", "--porcelain") == b""
    assert git(src, "status", "--porcelain") == b""  # the main worktree's index is untouched


def test_errors(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"x"})
    with pytest.raises(NotARepositoryError):
        _pcheckout(tmp_path / "nowhere")
    (tmp_path / "plain").mkdir()
    with pytest.raises(NotARepositoryError):
        _pcheckout(tmp_path / "plain")
    ours = clone_no_checkout(src, tmp_path / "ours")
    with pytest.raises(UnknownRevisionError, match="no-such-rev"):
        _pcheckout(ours, rev="no-such-rev")
    (ours / "f").write_bytes(b"mine")  # untracked, where the tree has a file: as git, refused
    (ours / ".git" / "index").unlink(missing_ok=True)
    with pytest.raises(UntrackedInTheWayError, match="checkout: f;"):
        _pcheckout(ours)
    assert (ours / "f").read_bytes() == b"mine"
    assert not (ours / ".git" / "index").exists()


def test_a_fresh_checkout_keeps_untracked_files_as_git_does(tmp_path: Path) -> None:
    # (a CI runner that restored node_modules/ or build/ from a cache, then checks out)
    src = make_repo(tmp_path, {b"f": b"1\n", b"build/tracked": b"2\n", b"src/x": b"3\n"})
    cache = {b"node_modules/m/index.js": b"js\n", b"build/out.o": b"o\n", b"notes": b"n\n"}
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_no_checkout(src, tmp_path / "theirs")
    for w in (ours, theirs):
        write_tree_files(w, cache)
    git(theirs, "checkout", "-q")
    result = _pcheckout(ours)
    assert result.files == 3  # type: ignore[attr-defined]
    status = git(ours, "status", "--porcelain", "--untracked-files=all")
    assert status == git(theirs, "status", "--porcelain", "--untracked-files=all")
    assert b"?? node_modules/m/index.js" in status and b"?? build/out.o" in status
    assert snapshot(ours) == snapshot(theirs)
    assert_index_matches_lstat(ours)


def test_a_dry_run_says_which_untracked_names_and_hooks_it_keeps_and_runs(
    tmp_path: Path, writer: str
) -> None:
    src = make_repo(tmp_path, {b"f": b"1\n", b"build/tracked": b"2\n"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    write_tree_files(ours, {b"node_modules/m.js": b"js\n", b"build/out.o": b"o\n", b"zz": b""})
    hook = ours / ".git" / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    result = _pcheckout(ours, dry_run=True)
    # build/ is in the tree (its untracked out.o is kept too, inside it): not named
    assert result.untracked_kept == ["node_modules", "zz"]  # type: ignore[attr-defined]
    assert result.hooks == ["post-checkout"]  # type: ignore[attr-defined]
    text = run_cli("checkout", "-n", "-C", str(ours)).stdout
    assert "would keep 2 untracked names at the top of the work tree (node_modules, zz)" in text
    assert "would run the post-checkout hook afterwards" in text
    assert sorted(os.listdir(ours)) == [".git", "build", "node_modules", "zz"]
    assert not (ours / ".git" / "index").exists()
    clean = clone_no_checkout(src, tmp_path / "clean")
    assert _pcheckout(clean, dry_run=True, hooks=False).untracked_kept == []  # type: ignore[attr-defined]


def test_a_fresh_checkout_refuses_untracked_files_in_the_way_as_git_does(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"1\n", b"d/g": b"2\n", b"e": b"3\n"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_no_checkout(src, tmp_path / "theirs")
    for w in (ours, theirs):
        write_tree_files(w, {b"d": b"a file where a directory goes\n", b"keep": b"k\n"})
    refused = subprocess.run(["git", "-C", str(theirs), "checkout", "-q"], capture_output=True)
    assert refused.returncode != 0 and b"untracked working tree files" in refused.stderr
    with pytest.raises(UntrackedInTheWayError, match="checkout: d;"):
        _pcheckout(ours)
    assert snapshot(ours) == snapshot(theirs)  # nothing written by either
    assert not (ours / ".git" / "index").exists()


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"a": b"1", b"b/c": b"22"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    result = _pcheckout(ours, dry_run=True)
    assert result.files == 2 and result.bytes == 3  # type: ignore[attr-defined]
    assert sorted(os.listdir(ours)) == [".git"]
    assert not (ours / ".git" / "index").exists()


def test_feature_manyfiles_matches_git(tmp_path: Path) -> None:
    """feature.manyFiles implies index v4 (and skipHash on git >= 2.40): as git does."""
    from pcheckout.git.index import read_index

    src = make_repo(tmp_path, {b"a/b": b"1", b"c": b"2"})
    theirs = clone_with_git(src, tmp_path / "theirs", config={"feature.manyFiles": "true"})
    ours = clone_no_checkout(src, tmp_path / "ours", config={"feature.manyFiles": "true"})
    _pcheckout(ours)
    assert (
        read_index(ours / ".git" / "index").version == read_index(theirs / ".git" / "index").version
    )
    theirs_raw = (theirs / ".git" / "index").read_bytes()
    ours_raw = (ours / ".git" / "index").read_bytes()
    assert (theirs_raw[-20:] == bytes(20)) == (ours_raw[-20:] == bytes(20))
    assert_same_as_git(ours, theirs)


def test_empty_boolean_config_is_false_like_git(tmp_path: Path) -> None:
    """`core.symlinks =` (empty) is false for git: symlinks become plain files."""
    src = make_repo(tmp_path, {b"x": b"1", b"l": ("l", b"x")})
    theirs = clone_with_git(src, tmp_path / "theirs", config={"core.symlinks": ""})
    ours = clone_no_checkout(src, tmp_path / "ours", config={"core.symlinks": ""})
    _pcheckout(ours)
    assert not (ours / "l").is_symlink()
    assert_same_as_git(ours, theirs)


def test_core_worktree_and_git_dir_environment_as_git_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = make_repo(tmp_path, {b"f": b"1\n", b"d/g": b"2\n"})
    for name in ("ours", "theirs"):
        git(tmp_path, "clone", "-q", "--bare", str(src), f"{name}.git")
        (tmp_path / f"{name}-wt").mkdir()
        git(tmp_path / f"{name}.git", "config", "core.bare", "false")
        git(tmp_path / f"{name}.git", "config", "core.worktree", f"../{name}-wt")
    git(tmp_path / "theirs.git", "checkout", "-q", "main")
    _pcheckout(tmp_path / "ours.git", rev="main")
    assert snapshot(tmp_path / "ours-wt") == snapshot(tmp_path / "theirs-wt")
    assert git(tmp_path / "ours.git", "status", "--porcelain") == b""
    # GIT_DIR and GIT_WORK_TREE, from a directory elsewhere
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    work = clone_no_checkout(src, tmp_path / "env")
    monkeypatch.setenv("GIT_DIR", str(work / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(work))
    _pcheckout(elsewhere)
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    assert_same_as_git(work, clone_with_git(src, tmp_path / "env-git"))
    assert list(elsewhere.iterdir()) == []


def test_the_garbage_collector_is_paused_for_the_run_and_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    import pcheckout.checkout as core
    from pcheckout.context import collector_paused

    seen: list[bool] = []
    decide = core.decide

    def watching(*args: object) -> object:
        seen.append(gc.isenabled())
        return decide(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(core, "decide", watching)
    src = make_repo(tmp_path, {b"a.txt": b"a\n"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    assert gc.isenabled()
    _pcheckout(ours)
    assert seen == [False] and gc.isenabled()
    with pytest.raises(UnknownRevisionError):
        _pcheckout(ours, rev="no-such-rev")
    assert gc.isenabled()  # (after a failure too)
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # (left as it was found)
    finally:
        gc.enable()
