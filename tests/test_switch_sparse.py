"""A switch over skip-worktree entries, compared with ``git checkout`` on the same repo:
bits set by ``git update-index --skip-worktree`` without a sparse checkout (git carries
them: changed paths are written and keep the bit), and files present outside a sparse
checkout's cone (git clears their bit when it reads the index, sparse-index.c
clear_skip_worktree_from_present_files); both writers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import clone_no_checkout, git, make_repo, snapshot_difference, write_tree_files

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.errors import DestinationError
from pcheckout.git.index import EXT_FLAG_SKIP_WORKTREE, read_index

pytestmark = pytest.mark.usefixtures("writer")

V1: dict[bytes, bytes | tuple[str, bytes]] = {
    b"README": b"r\n",
    b"kept": b"k\n",
    b"changed": b"c1\n",
    b"gone": b"g\n",
    b"a/x": b"1\n",
    b"b/z": b"3\n",
    b"b/y": b"2\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    src = make_repo(tmp_path, V1)
    git(src, "tag", "v1")
    (src / "gone").unlink()
    write_tree_files(src, {b"changed": b"c2\n", b"b/z": b"33\n", b"a/new": b"n\n"})
    git(src, "add", "-A")
    git(src, "commit", "-qm", "two")
    git(src, "tag", "v2")
    return src


def _pair(tmp_path: Path, repo: Path, setup: list[list[str]]) -> tuple[Path, Path]:
    """Two clones at v1 (git's checkout), each given the same ``git`` commands."""
    out = []
    for name in ("ours", "theirs"):
        w = clone_no_checkout(repo, tmp_path / name)
        git(w, "checkout", "-q", "v1")
        for args in setup:
            git(w, *args)
        out.append(w)
    return out[0], out[1]


def _git_switch(work: Path, rev: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(work), "checkout", "-q", rev], capture_output=True)


def assert_same_as_git_with_bits(ours: Path, theirs: Path, *, switched: bool = True) -> None:
    """The same files, entries with their bits (``ls-files -s -t``), HEAD and ``git
    status``, and after a switch each entry's stat data that of its file where there is
    one (not skip-worktree)."""
    diff = snapshot_difference(ours, theirs)
    assert not diff, "the trees differ:\n" + diff
    for args in (["ls-files", "-s", "-t", "-z"], ["status", "--porcelain", "-z"]):
        assert git(ours, *args) == git(theirs, *args), args
    assert git(ours, "rev-parse", "HEAD") == git(theirs, "rev-parse", "HEAD")
    if not switched:
        return
    theirs_index = {e.path: e for e in read_index(theirs / ".git" / "index").entries}
    for e in read_index(ours / ".git" / "index").entries:
        path = os.fsencode(ours) + b"/" + e.path
        if e.extended_flags & EXT_FLAG_SKIP_WORKTREE or not os.path.lexists(path):
            t = theirs_index[e.path]  # (whatever was recorded: zeros where git has them)
            assert (e.size, e.mtime_s) == (t.size, t.mtime_s) or 0 not in (t.size, t.mtime_s)
            continue
        st = os.lstat(path)
        assert (e.mtime_s, e.mtime_ns, e.size, e.ino) == (
            st.st_mtime_ns // 10**9,
            st.st_mtime_ns % 10**9,
            st.st_size,
            st.st_ino & 0xFFFFFFFF,
        ), e.path


@pytest.mark.parametrize("absent", [False, True], ids=["present", "absent"])
def test_skip_worktree_bits_without_a_sparse_checkout_are_carried_as_git(
    tmp_path: Path, repo: Path, absent: bool
) -> None:
    # git checks a skip-worktree file it changes (present: stat data alone) and writes it,
    # keeping the bit; a kept entry keeps its bit and its file; a removed one's file goes.
    # The engine took the bits for a sparse checkout's and wrote over the present files
    # ("cannot write kept: File exists"), half way through the switch.
    paths = ["kept", "changed", "gone", "b/z"]
    ours, theirs = _pair(tmp_path, repo, [["update-index", "--skip-worktree", *paths]])
    if absent:
        for w in (ours, theirs):
            for p in paths:
                (w / p).unlink()
    assert _git_switch(theirs, "v2").returncode == 0
    checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert_same_as_git_with_bits(ours, theirs)
    assert git(ours, "ls-files", "-t", "changed", "kept") == b"S changed\nS kept\n"


def test_a_changed_skip_worktree_file_is_a_local_change_as_in_git(
    tmp_path: Path, repo: Path
) -> None:
    ours, theirs = _pair(tmp_path, repo, [["update-index", "--skip-worktree", "changed"]])
    for w in (ours, theirs):
        (w / "changed").write_bytes(b"mine\n")
    refused = _git_switch(theirs, "v2")
    assert refused.returncode == 1 and b"\tchanged\n" in refused.stderr
    with pytest.raises(DestinationError, match="changed"):
        checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert_same_as_git_with_bits(ours, theirs, switched=False)


@pytest.mark.parametrize("content", [b"mine\n", b"3\n"], ids=["changed", "as-committed"])
def test_a_file_present_outside_the_cone_is_tracked_as_git_reads_it(
    tmp_path: Path, repo: Path, content: bytes
) -> None:
    # git clears the skip-worktree bit of a file present outside the cone when it reads the
    # index: b/z is then an ordinary entry, so a local change to it stops the switch, and
    # a clean one is removed as the switch leaves the cone.
    ours, theirs = _pair(tmp_path, repo, [["sparse-checkout", "set", "--cone", "a"]])
    for w in (ours, theirs):
        (w / "b").mkdir()
        (w / "b" / "z").write_bytes(content)
    code = _git_switch(theirs, "v2").returncode
    if code:
        with pytest.raises(DestinationError, match="b/z"):
            checkout(CheckoutOptions(directory=ours, rev="v2"))
    else:
        checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert code == (content == b"mine\n")
    assert_same_as_git_with_bits(ours, theirs, switched=not code)


TREE: dict[bytes, bytes | tuple[str, bytes]] = {
    b"top": b"t\n",
    b"a/x": b"1\n",
    b"a/deep/y": b"2\n",
    b"b/z": b"3\n",
    b"b/sub/w": b"4\n",
    b"c/d/e": b"5\n",
    b"c/d/more/f": b"6\n",
    b"c/g": b"7\n",
    b"c/h/i": b"8\n",
    b"c-d/j": b"9\n",
    b"c.e/k": b"10\n",
    b"mod": ("x", b"#!/bin/sh\n"),
}


def _index_bytes(work: Path) -> bytes:
    return (work / ".git" / "index").read_bytes()


def _extensions(data: bytes) -> list[bytes]:
    """The signatures of an index's extensions (git ls-files knows no way to list them)."""
    from pcheckout.git.indexformat import read_header, walk_entries

    version, count = read_header(data, b"index")
    offset = walk_entries(data, version, count, "sha1", b"index").end
    found = []
    while offset + 8 <= len(data) - 20:
        found.append(data[offset : offset + 4])
        offset += 8 + int.from_bytes(data[offset + 4 : offset + 8], "big")
    return found


@pytest.mark.parametrize(
    "cone", [["c/d"], ["a", "c/h"], [], ["b/sub"], ["a", "b", "c", "c-d", "c.e"]], ids=" ".join
)
def test_a_sparse_index_is_written_as_git_writes_it(tmp_path: Path, cone: list[str]) -> None:
    # index.sparse=true in cone mode: git collapses every directory outside the cone whose
    # entries are all skip-worktree into one sparse-directory entry (sparse-index.c
    # convert_to_sparse) and says so with the sdir extension; the engine wrote them all.
    src = make_repo(tmp_path, TREE)
    head = git(src, "rev-parse", "HEAD").decode().strip()  # a gitlink outside the cone too
    git(src, "update-index", "--add", "--cacheinfo", f"160000,{head},b/sub/module")
    git(src, "commit", "-qm", "gitlink")
    git(src, "tag", "v1")
    write_tree_files(src, {b"b/z": b"33\n", b"c/d/e": b"55\n", b"c/new/n": b"n\n"})
    git(src, "add", "-A")
    git(src, "commit", "-qm", "two")
    ours, theirs = (clone_no_checkout(src, tmp_path / n) for n in ("ours", "theirs"))
    for w in (ours, theirs):
        git(w, "sparse-checkout", "set", "--cone", "--sparse-index", *cone)
    git(theirs, "checkout", "-q", "v1")
    checkout(CheckoutOptions(directory=ours, rev="v1"))
    for rev in ("v1", "main"):
        if rev == "main":
            git(theirs, "checkout", "-q", "main")
            checkout(CheckoutOptions(directory=ours, rev="main"))
        assert git(ours, "ls-files", "--sparse", "-s", "-t", "-z") == git(
            theirs, "ls-files", "--sparse", "-s", "-t", "-z"
        )
        ext = _extensions(_index_bytes(ours))
        assert ext == _extensions(_index_bytes(theirs)) and ext[-1] == b"sdir", ext
        assert_same_as_git_with_bits(ours, theirs)
        # the cache tree too, its sparse directories' leaves included
        assert (
            _index_bytes(ours).split(b"TREE", 1)[1][:-20]
            == _index_bytes(theirs).split(b"TREE", 1)[1][:-20]
        )


def test_a_sparse_index_keeps_the_fsmonitor_extension_as_git(tmp_path: Path) -> None:
    # with core.fsmonitor git's sparse index keeps FSMN (before sdir), its bitmap over the
    # collapsed entries; the hook answers one token and no change, so git's bytes are known
    src = make_repo(tmp_path, TREE)
    git(src, "tag", "v1")
    write_tree_files(src, {b"a/x": b"11\n", b"c/d/e": b"55\n", b"b/z": b"33\n"})
    git(src, "add", "-A")
    git(src, "commit", "-qm", "two")
    hook = tmp_path / "fsmonitor"
    hook.write_text("#!/bin/sh\nprintf 'the-token\\0'\n")
    hook.chmod(0o755)
    ours, theirs = (
        clone_no_checkout(src, tmp_path / n, {"core.fsmonitor": str(hook)})
        for n in ("ours", "theirs")
    )
    for w in (ours, theirs):
        git(w, "sparse-checkout", "set", "--cone", "--sparse-index", "a", "c/d")
        git(w, "checkout", "-q", "v1")
        git(w, "status", "--porcelain")  # (git adds the extension, the hook's token)
    git(theirs, "checkout", "-q", "main")
    checkout(CheckoutOptions(directory=ours, rev="main"))
    assert _extensions(_index_bytes(ours)) == _extensions(_index_bytes(theirs))
    assert _extensions(_index_bytes(ours)) == [b"TREE", b"FSMN", b"sdir"]
    fsmn = [_index_bytes(w).split(b"FSMN", 1)[1].split(b"sdir")[0] for w in (ours, theirs)]
    assert fsmn[0] == fsmn[1]
