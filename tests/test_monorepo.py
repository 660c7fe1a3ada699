"""Partial clones and sparse checkouts, pcheckout against git's own checkout: the same
files, index (``ls-files -s``, ``ls-files -t``), ``git status``; fetches counted."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import assert_index_matches_lstat, git, make_repo, snapshot
from partialhelp import blobless_clone, local_blob_count, promisor_packs, serve
from sparsehelp import git_sparse_set, skip_flags

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.git import promisor
from pcheckout.git.promisor import PromisorFetchError
from pcheckout.options import Result

FILES: dict[bytes, bytes | tuple[str, bytes]] = {
    b"top.txt": b"top\n",
    b"README": b"readme\n",
    b"docs/a.md": b"a\n",
    b"docs/sub/b.md": b"b\n",
    b"src/lib/m.py": b"m\n",
    b"src/lib/t/test_m.py": b"t\n",
    b"src/main.py": b"main\n",
    b"src/run.sh": ("x", b"#!/bin/sh\n"),
    b"src/link": ("l", b"main.py"),
    b"x/y/z/w.txt": b"w\n",
    b"x/f": b"f\n",
    **{b"bulk/d%d/f%03d" % (i % 7, i): b"bulk %d\n" % i for i in range(120)},
}


def _checkout(work: Path, rev: str = "HEAD", **kw: object) -> Result:
    return checkout(CheckoutOptions(directory=work, rev=rev, **kw))  # type: ignore[arg-type]


def assert_same_as_git_sparse(ours: Path, theirs: Path) -> None:
    """assert_same_as_git for sparse checkouts: the same files, ``ls-files -s`` and
    ``-t`` (skip-worktree bits), ``git status`` output (its sparse line included)."""
    assert snapshot(ours) == snapshot(theirs)
    assert git(ours, "ls-files", "-s", "-z") == git(theirs, "ls-files", "-s", "-z")
    assert skip_flags(ours) == skip_flags(theirs)
    assert git(ours, "status", "--porcelain", "-z") == b""
    assert git(ours, "status").replace(b"ours", b"X") == git(theirs, "status").replace(
        b"theirs", b"X"
    )
    assert git(ours, "rev-parse", "HEAD") == git(theirs, "rev-parse", "HEAD")
    rb = os.fsencode(ours)
    for path, skipped in skip_flags(ours).items():
        assert os.path.lexists(rb + b"/" + path) != skipped, path


def _pair(tmp_path: Path, files: dict[bytes, bytes | tuple[str, bytes]] | None = None,
          *, blobless: bool = False) -> tuple[Path, Path, Path]:  # fmt: skip
    src = make_repo(tmp_path, dict(files or FILES))
    if blobless:
        server = serve(src)
        return (
            server,
            blobless_clone(server, tmp_path / "ours"),
            blobless_clone(server, tmp_path / "theirs"),
        )
    for name in ("ours", "theirs"):
        git(tmp_path, "clone", "-q", "--no-checkout", str(src), name)
    return src, tmp_path / "ours", tmp_path / "theirs"


CONE_SETS = [["docs"], ["src/lib", "x/y"], ["bulk/d3", "docs/sub"], []]


@pytest.mark.parametrize("dirs", CONE_SETS, ids=lambda d: " ".join(d) or "toplevel")
@pytest.mark.parametrize("sparse_index", [False, True])
def test_cone_checkout_writes_only_the_cone(
    tmp_path: Path, dirs: list[str], sparse_index: bool, writer: str
) -> None:
    _src, ours, theirs = _pair(tmp_path)
    for w in (ours, theirs):
        extra = ["--sparse-index"] if sparse_index else []
        git(w, "sparse-checkout", "set", "--cone", *extra, *dirs)
    result = _checkout(ours)
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)
    flags = skip_flags(ours)
    assert result.files == sum(not s for s in flags.values())
    assert result.skip_worktree == sum(flags.values()) > 0
    assert git(ours, "sparse-checkout", "list") == git(theirs, "sparse-checkout", "list")
    if sparse_index:  # collapsed as git's checkout leaves it (git/sparseindex.py)
        data = (ours / ".git" / "index").read_bytes()
        assert data[-28:-20] == b"sdir\0\0\0\0"  # the last extension, empty
        assert git(ours, "ls-files", "--sparse", "-s", "-t") == git(
            theirs, "ls-files", "--sparse", "-s", "-t"
        )


def _entry_records(data: bytes) -> tuple[bytes, list[bytes]]:
    """A v2/v3 sha1 index's header and its entries' raw records (padding included), the
    stat data of entries without skip-worktree zeroed: ours and git's differ only there."""
    count = int.from_bytes(data[8:12], "big")
    off, out = 12, []
    for _ in range(count):
        flags = int.from_bytes(data[off + 60 : off + 62], "big")
        extended = bool(flags & 0x4000)
        skipped = extended and bool(int.from_bytes(data[off + 62 : off + 64], "big") & 0x4000)
        start = off + 62 + (2 if extended else 0)
        end = data.index(b"\0", start)
        size = (end - off + 8) & ~7
        rec = bytearray(data[off : off + size])
        if not skipped:
            rec[0:24] = bytes(24)
            rec[28:40] = bytes(12)
        out.append(bytes(rec))
        off += size
    return data[:12], out


@pytest.mark.parametrize("dirs", [["docs"], ["src/lib", "x/y"]], ids=" ".join)
def test_cone_index_is_the_bytes_git_writes(tmp_path: Path, dirs: list[str]) -> None:
    """Every entry's record, skip-worktree ones byte for byte, as git's own checkout
    writes it (the stat data of the written files aside; git adds a cache tree)."""
    _src, ours, theirs = _pair(tmp_path)
    for w in (ours, theirs):
        git(w, "sparse-checkout", "set", "--cone", *dirs)
    _checkout(ours, writer="pcheckout")
    git(theirs, "checkout", "-q", "main")
    head, records = _entry_records((ours / ".git" / "index").read_bytes())
    assert head[4:8] == b"\0\0\0\3"
    assert (head, records) == _entry_records((theirs / ".git" / "index").read_bytes())
    assert sum(r[62:64] == b"\x40\0" for r in records) == sum(skip_flags(ours).values()) > 0


NON_CONE_SETS = [["*.md"], ["/src/", "!/src/lib/t/"], ["*", "!bulk/"], ["x/y", "top.txt"]]


@pytest.mark.parametrize("patterns", NON_CONE_SETS, ids=lambda p: " ".join(p))
def test_non_cone_checkout_matches_git(tmp_path: Path, patterns: list[str], writer: str) -> None:
    _src, ours, theirs = _pair(tmp_path)
    for w in (ours, theirs):
        git_sparse_set(w, patterns, cone=False)
    _checkout(ours)
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)


def test_unrecognized_cone_pattern_warns_and_matches_as_git(tmp_path: Path) -> None:
    _src, ours, theirs = _pair(tmp_path)
    for w in (ours, theirs):
        git_sparse_set(w, ["/*", "!/*/", "docs/"], cone=True)
    result = _checkout(ours)
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)
    assert result.warnings == ["unrecognized pattern: 'docs'", "disabling cone pattern matching"]


def test_dry_run_counts_only_what_is_written(tmp_path: Path) -> None:
    _src, ours, _theirs = _pair(tmp_path)
    git(ours, "sparse-checkout", "set", "--cone", "docs")
    result = _checkout(ours, dry_run=True)
    assert (result.files, result.skip_worktree) == (4, len(FILES) - 4)
    assert os.listdir(ours) == [".git"]


def test_blobless_checkout_fetches_in_batches_not_per_blob(tmp_path: Path) -> None:
    _server, ours, theirs = _pair(tmp_path, blobless=True)
    packs = len(promisor_packs(ours))
    dry = _checkout(ours, dry_run=True)
    assert dry.fetch_blobs == len({c for c in FILES.values()}) and local_blob_count(ours) == 0
    result = _checkout(ours)
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)
    assert_index_matches_lstat(ours)
    assert result.fetch_blobs == dry.fetch_blobs
    assert 1 <= result.fetches == len(promisor_packs(ours)) - packs <= 3


def test_blobless_sparse_fetches_only_the_cone(tmp_path: Path) -> None:
    _server, ours, theirs = _pair(tmp_path, blobless=True)
    for w in (ours, theirs):
        git(w, "sparse-checkout", "set", "--cone", "src/lib")
    result = _checkout(ours)
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)
    # top-level files, src's own and all of src/lib: nothing outside the cone was fetched
    assert local_blob_count(ours) == result.fetch_blobs == result.files == 7


def test_server_gone_no_index_then_a_rerun_completes(tmp_path: Path) -> None:
    server, ours, theirs = _pair(tmp_path, blobless=True)
    moved = server.with_name("away.git")
    server.rename(moved)
    gone = r"could not fetch 131 blobs from promisor remote 'origin'"
    with pytest.raises(PromisorFetchError, match=gone):
        _checkout(ours)
    assert not (ours / ".git" / "index").exists()
    moved.rename(server)
    _checkout(ours)
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)
    shutil.rmtree(theirs)


ATTR_FILES: dict[bytes, bytes | tuple[str, bytes]] = {
    **FILES,
    b".gitattributes": b"*.txt eol=crlf\n",
    b"docs/.gitattributes": b"*.md ident\n",
    b"docs/c.md": b"$Id$\n",
}


@pytest.mark.parametrize("local_top", [False, True], ids=["none-local", "top-local"])
def test_dry_run_in_a_blobless_clone_fetches_nothing(tmp_path: Path, local_top: bool) -> None:
    """A dry run fetches no blob, not even a .gitattributes: it counts them among the
    blobs a run fetches and says for how many paths the conversion is unknown (the paths
    below a .gitattributes that is not local); the run then fetches what it said."""
    _server, ours, theirs = _pair(tmp_path, ATTR_FILES, blobless=True)
    if local_top:  # git fetches this one blob lazily; docs/.gitattributes stays missing
        git(ours, "cat-file", "-p", "HEAD:.gitattributes")
    before = (len(promisor_packs(ours)), local_blob_count(ours))
    dry = _checkout(ours, dry_run=True)
    assert (len(promisor_packs(ours)), local_blob_count(ours)) == before
    assert os.listdir(ours) == [".git"]
    blobs = len({c for c in ATTR_FILES.values()})
    assert dry.fetch_blobs == blobs - before[1]
    docs = sum(1 for p in ATTR_FILES if p.startswith(b"docs/"))  # all regular files
    # everything is below the top-level .gitattributes; with it local, only docs/ is unknown
    assert dry.conversion_unknown == (docs if local_top else len(ATTR_FILES) - 1)
    assert dry.converted == (sum(1 for p in ATTR_FILES if p.endswith(b".txt")) if local_top else 0)
    result = _checkout(ours)
    assert result.fetch_blobs == dry.fetch_blobs and result.conversion_unknown == 0
    assert result.converted == sum(1 for p in ATTR_FILES if p.endswith((b".txt", b".md")))
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)


def test_sparse_dry_run_counts_an_out_of_pattern_gitattributes(tmp_path: Path) -> None:
    """Non-cone patterns can leave a .gitattributes out while files below it are in: a
    dry run fetches it neither, and counts it, as the run fetches it (check-attr reads it)."""
    _server, ours, theirs = _pair(tmp_path, ATTR_FILES, blobless=True)
    for w in (ours, theirs):
        git(w, "sparse-checkout", "set", "--no-cone", "*.md")
    before = len(promisor_packs(ours))
    dry = _checkout(ours, dry_run=True)
    assert len(promisor_packs(ours)) == before and local_blob_count(ours) == 0
    md = [p for p in ATTR_FILES if p.endswith(b".md")]
    assert dry.files == len(md) and dry.conversion_unknown == len(md)
    assert dry.fetch_blobs == len({ATTR_FILES[p] for p in md}) + 2  # both .gitattributes
    result = _checkout(ours)
    assert result.fetch_blobs == dry.fetch_blobs
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)


# --- switching inside a sparse checkout ----------------------------------------------------


def _two_commits(tmp_path: Path) -> Path:
    """main: FILES; "next": directories moved across the cone's edge, files added,
    changed and deleted on both sides of it."""
    src = make_repo(tmp_path, dict(FILES))
    git(src, "checkout", "-q", "-b", "next")
    (src / "docs" / "a.md").unlink()
    (src / "docs" / "new").mkdir()
    for name in os.listdir(src / "bulk" / "d3"):  # bulk/d3 moves into the cone
        (src / "bulk" / "d3" / name).rename(src / "docs" / "new" / name)
    shutil.move(src / "docs" / "sub", src / "attic")  # docs/sub leaves it
    (src / "src" / "lib" / "m.py").write_bytes(b"changed\n")
    (src / "docs" / "added.md").write_bytes(b"added\n")
    (src / "bulk" / "d1" / "f001").write_bytes(b"changed outside\n")
    (src / "top.txt").write_bytes(b"top changed\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "two")
    git(src, "checkout", "-q", "main")
    return src


@pytest.mark.parametrize("sparse_index", [False, True])
@pytest.mark.parametrize(("start", "to"), [("main", "next"), ("next", "main")])
def test_switch_across_the_cone_edge_matches_git(
    tmp_path: Path, sparse_index: bool, start: str, to: str, writer: str
) -> None:
    src = _two_commits(tmp_path)
    for name in ("ours", "theirs"):
        git(tmp_path, "clone", "-q", "--no-checkout", str(src), name)
        w = tmp_path / name
        git(w, "checkout", "-q", "-b", "next", "origin/next")
        git(w, "checkout", "-q", start)
        git(w, "sparse-checkout", "set", "--cone", *(["--sparse-index"] if sparse_index else []),
            "docs", "src/lib")  # fmt: skip
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    result = _checkout(ours, to)
    git(theirs, "checkout", "-q", to)
    assert_same_as_git_sparse(ours, theirs)
    assert result.mode == "switch" and result.plan.writer == writer
    if writer == "pcheckout":  # git's checkout does not say
        assert result.skip_worktree == sum(skip_flags(ours).values())


def test_switch_refuses_local_changes_in_the_cone_only(tmp_path: Path) -> None:
    src = _two_commits(tmp_path)
    git(tmp_path, "clone", "-q", str(src), "ours")
    ours = tmp_path / "ours"
    git(ours, "branch", "-q", "next", "origin/next")
    git(ours, "sparse-checkout", "set", "--cone", "src/lib")
    (ours / "src" / "lib" / "m.py").write_bytes(b"local\n")
    from pcheckout.errors import LocalChangesError

    with pytest.raises(LocalChangesError, match="src/lib/m.py") as info:
        _checkout(ours, "next")
    assert "bulk" not in str(info.value)


def test_patterns_changed_by_hand_move_entries_as_git_does(tmp_path: Path, writer: str) -> None:
    src = _two_commits(tmp_path)
    for name in ("ours", "theirs"):
        git(tmp_path, "clone", "-q", str(src), name)
        git(tmp_path / name, "sparse-checkout", "set", "--cone", "docs")
        git(tmp_path / name, "branch", "-q", "next", "origin/next")
        info = tmp_path / name / ".git" / "info" / "sparse-checkout"
        info.write_text("/*\n!/*/\n/src/\n")  # docs leaves, src enters: no reapply yet
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _checkout(ours, "next")
    git(theirs, "checkout", "-q", "next")
    assert_same_as_git_sparse(ours, theirs)


def test_blobless_switch_fetches_only_what_it_writes(tmp_path: Path) -> None:
    src = _two_commits(tmp_path)
    server = serve(src)
    for name in ("ours", "theirs"):
        w = blobless_clone(server, tmp_path / name)
        git(w, "sparse-checkout", "set", "--cone", "docs")
        git(w, "checkout", "-q", "main")
        git(w, "branch", "-q", "next", "origin/next")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    before = local_blob_count(ours)
    result = _checkout(ours, "next")
    git(theirs, "checkout", "-q", "next")
    assert_same_as_git_sparse(ours, theirs)
    assert result.fetches == 1
    assert (
        local_blob_count(ours) - before == result.fetch_blobs == local_blob_count(theirs) - before
    )


def test_export_from_a_blobless_clone_fetches_in_batches(tmp_path: Path) -> None:
    from pcheckout.export import ExportOptions, export

    src = make_repo(tmp_path, dict(FILES))
    server = serve(src)
    work = blobless_clone(server, tmp_path / "work")
    dry = export(ExportOptions(repository=work, rev="HEAD", destination=tmp_path / "out",
                               dry_run=True))  # fmt: skip
    assert dry.fetch_blobs == 131 and local_blob_count(work) == 0
    packs = len(promisor_packs(work))
    result = export(ExportOptions(repository=work, rev="HEAD", destination=tmp_path / "out"))
    assert 1 <= result.fetches == len(promisor_packs(work)) - packs <= 3
    git(src, "checkout", "-q", "main")
    assert snapshot(tmp_path / "out") == snapshot(src)


@pytest.mark.parametrize("server_gone", [False, True])
def test_staged_fetch_leaves_the_packs_git_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server_gone: bool
) -> None:
    """Where the destination is latency-bound the fetches write into a local staging
    directory and the packs are moved in afterwards: same files, index and status as
    git, and the blobs are in the repository itself."""
    from pcheckout.write import partial as partial_mod  # checkout imports it when writing

    real = partial_mod.write_selected
    monkeypatch.setattr(partial_mod, "write_selected",
                        lambda *a, **k: real(*a, **{**k, "latency_bound": True}))  # fmt: skip
    server, ours, theirs = _pair(tmp_path, blobless=True)
    if server_gone:
        moved = server.with_name("away.git")
        server.rename(moved)
        with pytest.raises(PromisorFetchError):
            _checkout(ours)
        moved.rename(server)
    packs = len(promisor_packs(ours))
    result = _checkout(ours)
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)
    assert len(promisor_packs(ours)) == packs + result.fetches
    assert local_blob_count(ours) == 131  # in the repository, not in a scratch directory
    git(ours, "fsck", "--connectivity-only")


def test_server_gone_mid_prefetch_then_a_rerun_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server disappears after the first round of writes: what landed is written,
    no index, one clear line; once it is back the re-run resumes and ends as git."""
    from pcheckout.write import partial

    server, ours, theirs = _pair(tmp_path, blobless=True)
    moved = server.with_name("away.git")
    real = partial.write_tree
    calls: list[int] = []

    cut = threading.Event()

    def write_then_cut(ctx: object, req: object) -> object:
        out = real(ctx, req)  # type: ignore[arg-type]
        if not calls:
            server.rename(moved)
            cut.set()
        calls.append(1)
        return out

    real_run = promisor.Fetcher._run
    fetches: list[int] = []

    def gated(self: promisor.Fetcher, remote: str, oids: list[str]) -> bool:
        fetches.append(len(oids))
        if len(fetches) > 1:  # later batches start once the server is gone
            assert cut.wait(60)
        return real_run(self, remote, oids)

    monkeypatch.setattr(promisor.Fetcher, "_run", gated)
    monkeypatch.setattr(partial, "write_tree", write_then_cut)
    from pcheckout.write import prefetch

    real_plan = prefetch.plan_fetch
    monkeypatch.setattr(partial, "plan_fetch",
                        lambda *a, **k: real_plan(*a, **{**k, "first": 16}))  # fmt: skip
    with pytest.raises(PromisorFetchError, match="from promisor remote 'origin'") as info:
        _checkout(ours)
    assert 0 < info.value.count < 131
    assert not (ours / ".git" / "index").exists()
    written = [p for p in snapshot(ours) if snapshot(ours)[p][0] != "d"]
    assert len(written) == 131 - info.value.count >= 16  # every batch that landed was written
    monkeypatch.setattr(partial, "write_tree", real)
    monkeypatch.setattr(promisor.Fetcher, "_run", real_run)
    moved.rename(server)
    result = _checkout(ours)
    assert result.mode == "resume" and result.kept == len(written)
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)


def test_blobless_sparse_checkout_and_switch_by_either_writer(tmp_path: Path, writer: str) -> None:
    """git's writer (read-tree -u, git checkout) honours the cone and prefetches itself;
    pcheckout's engine does it here: both end as git's own checkout and switch."""
    src = _two_commits(tmp_path)
    server = serve(src)
    for name in ("ours", "theirs"):
        w = blobless_clone(server, tmp_path / name)
        git(w, "sparse-checkout", "set", "--cone", "docs")
        git(w, "branch", "-q", "next", "origin/next")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    first = _checkout(ours)
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)
    assert first.fetch_blobs == first.files
    _checkout(ours, "next")
    git(theirs, "checkout", "-q", "next")
    assert_same_as_git_sparse(ours, theirs)
    assert local_blob_count(ours) == local_blob_count(theirs)


# --- staging directories of runs that died ---------------------------------------------------

#: A checkout whose staged fetch hangs once its staging directory exists (argv: work tree,
#: a file written when the fetch has begun), to be killed there.
_HANGING_STAGED_CHECKOUT = r"""
import pathlib, sys, time
from pcheckout.git import promisor
from pcheckout.write import partial
real = partial.write_selected
partial.write_selected = lambda *a, **k: real(*a, **{**k, "latency_bound": True})
def hang(self, remote, oids):
    pathlib.Path(sys.argv[2]).write_text("fetching")
    time.sleep(120)
promisor.Fetcher._run = hang
from pcheckout.checkout import CheckoutOptions, checkout
checkout(CheckoutOptions(directory=pathlib.Path(sys.argv[1])))
"""


def _staging_dirs(tmpdir: Path) -> list[str]:
    return sorted(n for n in os.listdir(tmpdir) if n.startswith(promisor.STAGING_PREFIX))


def test_a_killed_runs_staging_directory_is_removed_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL leaves the staging directory in $TMPDIR; the next staged fetch removes it,
    never one a live run holds (nor a fresh one without its lock yet)."""
    import signal
    import sys
    import tempfile

    from killhelp import HANG_S

    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    _server, ours, theirs = _pair(tmp_path, blobless=True)
    began = tmp_path / "began"
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    child = subprocess.Popen([sys.executable, "-c", _HANGING_STAGED_CHECKOUT, str(ours),
                              str(began)], env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + HANG_S
        while not began.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert began.exists()
        dead = _staging_dirs(tmpdir)
        assert len(dead) == 1
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert _staging_dirs(tmpdir) == dead  # SIGKILL: nothing could clean up
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    live = promisor.Staging(os.fsencode(ours / ".git" / "objects"))  # another run, alive
    (tmpdir / (promisor.STAGING_PREFIX + "new")).mkdir()  # made an instant ago, no lock yet
    try:
        assert live.removed_stale == [str(tmpdir / dead[0])]
        from pcheckout.write import partial as partial_mod

        real = partial_mod.write_selected
        monkeypatch.setattr(partial_mod, "write_selected",
                            lambda *a, **k: real(*a, **{**k, "latency_bound": True}))  # fmt: skip
        _checkout(ours)  # resumes the killed checkout, staged again, and cleans up after itself
        assert _staging_dirs(tmpdir) == sorted(
            [os.path.basename(live.root), promisor.STAGING_PREFIX + "new"]
        )
    finally:
        live.close()
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git_sparse(ours, theirs)


def test_a_linked_worktree_reads_its_own_patterns_as_git_does(tmp_path: Path) -> None:
    """The pattern file is per worktree (read without asking git): a linked worktree's
    cone is its own, the main worktree's patterns do not leak into it."""
    from pcheckout.git.runner import Git, discover
    from pcheckout.git.sparse import pattern_file

    src, main, _theirs = _pair(tmp_path)
    git(main, "sparse-checkout", "set", "--cone", "src")
    for name in ("ours-wt", "theirs-wt"):
        git(main, "worktree", "add", "-q", "--no-checkout", "--detach", str(tmp_path / name))
        git(tmp_path / name, "sparse-checkout", "set", "--cone", "docs")
    for w in (main, tmp_path / "ours-wt"):
        asked = git(w, "rev-parse", "--path-format=absolute", "--git-path",
                    "info/sparse-checkout").rstrip(b"\n")  # fmt: skip
        assert pattern_file(discover(Git(w)).git_dir) == os.fsencode(
            Path(os.fsdecode(asked)).resolve()
        )
    ours, theirs = tmp_path / "ours-wt", tmp_path / "theirs-wt"
    _checkout(ours)
    git(theirs, "checkout", "-q", "-f", "HEAD")
    files = [{p: v for p, v in snapshot(w).items() if p != b".git"} for w in (ours, theirs)]
    assert files[0] == files[1]  # .git is a file naming each worktree's own git dir
    assert git(ours, "ls-files", "-s", "-z") == git(theirs, "ls-files", "-s", "-z")
    assert skip_flags(ours) == skip_flags(theirs) and git(ours, "status", "--porcelain") == b""
    assert not (tmp_path / "ours-wt" / "src").exists() and (tmp_path / "ours-wt" / "docs").exists()


def test_export_dry_run_in_a_blobless_clone_fetches_nothing(tmp_path: Path) -> None:
    """export --dry-run fetches no .gitattributes either: the paths below a missing one are
    not looked up (their conversion unknown), the blobs count as to be fetched."""
    from pcheckout.export import ExportOptions, export

    src = make_repo(tmp_path, dict(ATTR_FILES))
    work = blobless_clone(serve(src), tmp_path / "work")
    packs = len(promisor_packs(work))
    dry = export(ExportOptions(repository=work, rev="HEAD", destination=tmp_path / "out",
                               dry_run=True))  # fmt: skip
    assert len(promisor_packs(work)) == packs and local_blob_count(work) == 0
    assert dry.conversion_unknown == len(ATTR_FILES) - 1 and dry.converted == 0
    result = export(ExportOptions(repository=work, rev="HEAD", destination=tmp_path / "out"))
    assert result.fetch_blobs == dry.fetch_blobs == len({c for c in ATTR_FILES.values()})
    assert result.conversion_unknown == 0 and result.converted > 0
    out = tmp_path / "theirs"
    out.mkdir()
    archived = git(src, "archive", "HEAD")
    subprocess.run(["tar", "-x", "-C", str(out)], input=archived, check=True)
    assert snapshot(tmp_path / "out") == snapshot(out)
