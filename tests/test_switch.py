"""Incremental switch in a populated working tree, compared with git checkout."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import assert_same_as_git, clone_with_git, git, write_tree_files

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.errors import DestinationError, UnknownRevisionError

pytestmark = pytest.mark.usefixtures("writer")

V1: dict[bytes, bytes | tuple[str, bytes]] = {
    b"keep.txt": b"unchanged\n",
    b"change.txt": b"old\n",
    b"delete.txt": b"bye\n",
    b"rename-me.txt": b"moving\n",
    b"mode.sh": b"#!/bin/sh\n",
    b"file-to-dir": b"was a file\n",
    b"dir-to-file/a": b"a\n",
    b"dir-to-file/b/c": b"c\n",
    b"file-to-link": b"target soon\n",
    b"link-to-file": ("l", b"keep.txt"),
    b"gone/deep/er/x": b"x\n",
    b"odd\nname": b"1\n",
    b"d/same": b"s\n",
}


def _v2(src: Path) -> None:
    for p in [
        b"change.txt",
        b"delete.txt",
        b"rename-me.txt",
        b"file-to-dir",
        b"link-to-file",
        b"file-to-link",
    ]:
        (src / p.decode()).unlink()
    git(src, "rm", "-rq", "--cached", "dir-to-file", "gone")
    import shutil

    shutil.rmtree(src / "dir-to-file")
    shutil.rmtree(src / "gone")
    write_tree_files(
        src,
        {
            b"change.txt": b"new\n",
            b"renamed.txt": b"moving\n",
            b"file-to-dir/inner": b"now a dir\n",
            b"dir-to-file": b"now a file\n",
            b"link-to-file": b"now a file\n",
            b"file-to-link": ("l", b"keep.txt"),
            b"new/dir/tree/f": b"f\n",
            b"odd\nname": b"2\n",
            b".gitattributes": b"*.crlf text eol=crlf\n",
            b"x.crlf": b"a\nb\n",
        },
    )
    (src / "mode.sh").chmod(0o755)
    git(src, "add", "-A")
    git(src, "commit", "-qm", "v2")
    git(src, "tag", "v2")


@pytest.fixture(params=["serial-stat", "parallel-stat"])
def stats(request: pytest.FixtureRequest) -> int | None:
    """Run a test with lstat in one thread (local disks) and in many (as on NFS):
    the ``stat_threads`` option to pass."""
    return 4 if request.param == "parallel-stat" else None


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    from helpers import make_repo

    src = make_repo(tmp_path, V1)
    git(src, "tag", "v1")
    sub = git(src, "rev-parse", "HEAD").decode().strip()
    git(src, "update-index", "--add", "--cacheinfo", f"160000,{sub},sub/module")
    git(src, "commit", "-qm", "gitlink")
    git(src, "tag", "v1g")
    _v2(src)
    return src


@pytest.mark.parametrize("a,b", [("v1g", "v2"), ("v2", "v1g"), ("v1", "v2"), ("v2", "v1")])
def test_switch_matches_git(
    tmp_path: Path, repo: Path, a: str, b: str, stats: int | None, writer: str
) -> None:
    theirs = clone_with_git(repo, tmp_path / "theirs", rev=a)
    git(theirs, "checkout", "-q", b)
    ours = clone_with_git(repo, tmp_path / "ours", rev=a)
    result = checkout(CheckoutOptions(directory=ours, stat_threads=stats, rev=b, workers=4))
    assert result.mode == "switch" and result.plan.writer == writer
    # exactly the paths b adds or changes against a are written
    changed = git(repo, "diff", "--no-renames", "--name-only", "-z", "--diff-filter=AMT", a, b)
    assert result.written == changed.count(b"\0") > 0  # git's writer: from diff-tree
    gone = git(repo, "diff", "--no-renames", "--name-only", "-z", "--diff-filter=D", a, b)
    assert result.deleted == gone.count(b"\0"), (writer, gone)
    assert_same_as_git(ours, theirs)


def test_head_and_reflog_follow_git_through_a_series_of_switches(
    tmp_path: Path, repo: Path
) -> None:
    git(repo, "branch", "side", "v1")
    theirs = clone_with_git(repo, tmp_path / "theirs")
    ours = clone_with_git(repo, tmp_path / "ours")
    for rev in ["v1", "side", "v2", "v1g", "main", "side"]:  # detached <-> branch, both ways
        git(theirs, "checkout", "-q", rev)
        checkout(CheckoutOptions(directory=ours, rev=rev))
        assert_same_as_git(ours, theirs)
        # git's reflog: "moving from <branch>" or from the full commit id when detached
        assert git(ours, "reflog", "-1", "--format=%gs") == git(
            theirs, "reflog", "-1", "--format=%gs"
        )


def test_untouched_entries_keep_their_stat_data(tmp_path: Path, repo: Path) -> None:
    from pcheckout.git.index import read_index

    ours = clone_with_git(repo, tmp_path / "ours", rev="v1")
    before = {e.path: e for e in read_index(ours / ".git" / "index").entries}
    checkout(CheckoutOptions(directory=ours, rev="v2"))
    after = {e.path: e for e in read_index(ours / ".git" / "index").entries}
    assert after[b"keep.txt"] == before[b"keep.txt"]
    assert after[b"d/same"] == before[b"d/same"]


def test_local_changes_refused_like_git(tmp_path: Path, repo: Path, stats: int | None) -> None:
    ours = clone_with_git(repo, tmp_path / "ours", rev="v1")
    (ours / "change.txt").write_bytes(b"my work\n")
    theirs = clone_with_git(repo, tmp_path / "theirs", rev="v1")
    (theirs / "change.txt").write_bytes(b"my work\n")
    assert (
        b"would be overwritten"
        in __import__("subprocess")
        .run(["git", "-C", str(theirs), "checkout", "v2"], capture_output=True)
        .stderr
    )
    with pytest.raises(DestinationError, match="change.txt"):
        checkout(CheckoutOptions(directory=ours, stat_threads=stats, rev="v2"))
    assert (ours / "change.txt").read_bytes() == b"my work\n"
    assert not (ours / "renamed.txt").exists()  # nothing written
    assert git(ours, "rev-parse", "HEAD") == git(ours, "rev-parse", "v1")


def test_local_changes_elsewhere_are_kept(tmp_path: Path, repo: Path, stats: int | None) -> None:
    ours = clone_with_git(repo, tmp_path / "ours", rev="v1")
    theirs = clone_with_git(repo, tmp_path / "theirs", rev="v1")
    for w in (ours, theirs):
        (w / "keep.txt").write_bytes(b"edited but untouched by the switch\n")
        (w / "untracked.txt").write_bytes(b"mine\n")
    git(theirs, "checkout", "-q", "v2")
    checkout(CheckoutOptions(directory=ours, stat_threads=stats, rev="v2"))
    assert (ours / "keep.txt").read_bytes() == b"edited but untouched by the switch\n"
    assert (ours / "untracked.txt").read_bytes() == b"mine\n"
    assert git(ours, "status", "--porcelain") == git(theirs, "status", "--porcelain")


def test_untracked_in_the_way_refused_even_with_force(
    tmp_path: Path, repo: Path, stats: int | None
) -> None:
    ours = clone_with_git(repo, tmp_path / "ours", rev="v1")
    (ours / "renamed.txt").write_bytes(b"untracked, mine\n")
    for force in (False, True):
        with pytest.raises(DestinationError, match="renamed.txt"):
            checkout(CheckoutOptions(directory=ours, stat_threads=stats, rev="v2", force=force))
        assert (ours / "renamed.txt").read_bytes() == b"untracked, mine\n"


def test_force_discards_tracked_changes(tmp_path: Path, repo: Path) -> None:
    ours = clone_with_git(repo, tmp_path / "ours", rev="v1")
    theirs = clone_with_git(repo, tmp_path / "theirs", rev="v1")
    for w in (ours, theirs):
        (w / "change.txt").write_bytes(b"my work\n")
        (w / "keep.txt").write_bytes(b"also mine\n")
    git(theirs, "checkout", "-q", "-f", "v2")
    checkout(CheckoutOptions(directory=ours, rev="v2", force=True))
    assert_same_as_git(ours, theirs)


def test_staged_change_carried_when_switch_does_not_touch_it(tmp_path: Path, repo: Path) -> None:
    ours = clone_with_git(repo, tmp_path / "ours", rev="v1")
    theirs = clone_with_git(repo, tmp_path / "theirs", rev="v1")
    for w in (ours, theirs):
        (w / "keep.txt").write_bytes(b"staged\n")
        git(w, "add", "keep.txt")
    git(theirs, "checkout", "-q", "v2")
    checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert git(ours, "diff", "--cached", "--name-only") == git(
        theirs, "diff", "--cached", "--name-only"
    )
    assert git(ours, "ls-files", "-s") == git(theirs, "ls-files", "-s")


def test_dry_run_counts_only_the_changes(tmp_path: Path, repo: Path) -> None:
    ours = clone_with_git(repo, tmp_path / "ours", rev="v1")
    result = checkout(CheckoutOptions(directory=ours, rev="v2", dry_run=True))
    assert result.mode == "switch" and result.dry_run
    assert result.files < len(V1) + 5 and result.deleted > 0
    assert git(ours, "rev-parse", "HEAD") == git(ours, "rev-parse", "v1")
    assert (ours / "delete.txt").exists()


def test_modification_with_same_size_and_racy_stat_is_found(
    tmp_path: Path, repo: Path, stats: int | None
) -> None:
    """Right after a checkout every entry is racy: content decides, as for git."""
    ours = clone_with_git(repo, tmp_path / "ours", rev="v1")
    (ours / "change.txt").write_bytes(b"OLD\n")  # same size as "old\n", same second
    with pytest.raises(DestinationError, match="change.txt"):
        checkout(CheckoutOptions(directory=ours, stat_threads=stats, rev="v2"))


def test_symlink_retargeted_locally_is_a_local_change(tmp_path: Path, repo: Path) -> None:
    ours = clone_with_git(repo, tmp_path / "ours", rev="v1")
    (ours / "link-to-file").unlink()
    (ours / "link-to-file").symlink_to("change.txt")
    with pytest.raises(DestinationError, match="link-to-file"):
        checkout(CheckoutOptions(directory=ours, rev="v2"))


def test_crlf_clean_filter_is_applied_when_hashing(tmp_path: Path) -> None:
    """A CRLF work-tree file that cleans to the indexed blob is not a local change."""
    from helpers import make_repo

    src = make_repo(tmp_path, {b".gitattributes": b"*.txt text eol=crlf\n", b"a.txt": b"x\ny\n"})
    git(src, "tag", "v1")
    (src / "a.txt").write_bytes(b"x\ny\nz\n")
    git(src, "commit", "-qam", "two")
    theirs = clone_with_git(src, tmp_path / "theirs", rev="v1")
    ours = clone_with_git(src, tmp_path / "ours", rev="v1")
    git(theirs, "checkout", "-q", "main")
    checkout(CheckoutOptions(directory=ours, rev="main"))
    assert_same_as_git(ours, theirs)


def _reflog_top(work: Path) -> bytes:
    return git(work, "reflog", "-1", "--format=%gs")


@pytest.mark.parametrize("rev", ["-", "@{-1}", "@{-2}"])
def test_previous_checkouts_as_git_reads_them(tmp_path: Path, rev: str) -> None:
    src = tmp_path / "src"
    git(tmp_path, "init", "-q", "-b", "main", "src")
    write_tree_files(src, V1)
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "v1")
    git(src, "branch", "side")
    write_tree_files(src, {b"change.txt": b"new\n"})
    git(src, "commit", "-q", "-am", "v2")
    pair = []
    for name in ("theirs", "ours"):
        w = clone_with_git(src, tmp_path / name)
        git(w, "checkout", "-q", "side")
        git(w, "checkout", "-q", "--detach", "main")
        git(w, "checkout", "-q", "main")
        pair.append(w)
    theirs, ours = pair
    git(theirs, "checkout", "-q", rev)
    checkout(CheckoutOptions(ours, rev=rev))
    assert_same_as_git(ours, theirs)
    assert _reflog_top(ours) == _reflog_top(theirs)  # names the branch (or the commit)
    head = ("symbolic-ref", "-q", "HEAD")
    assert git(ours, *head, check=False) == git(theirs, *head, check=False)


def test_no_previous_checkout(tmp_path: Path) -> None:
    src = tmp_path / "src"
    git(tmp_path, "init", "-q", "-b", "main", "src")
    write_tree_files(src, {b"a": b"1\n"})
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "v1")
    ours = clone_with_git(src, tmp_path / "ours")
    with pytest.raises(UnknownRevisionError, match="pathspec '-' did not match"):
        checkout(CheckoutOptions(ours, rev="-"))


def test_a_submodule_marked_ignore_all_moves_as_git_moves_it(tmp_path: Path, writer: str) -> None:
    # diff-tree leaves such a gitlink out unless told not to; the engine takes HEAD's side
    # of the merge from it, git's writer its counts: both must see the gitlink move.
    src = tmp_path / "src"
    git(tmp_path, "init", "-q", "-b", "main", str(src))
    gitmodules = b'[submodule "s"]\n\tpath = s\n\turl = ./s\n\tignore = all\n'
    write_tree_files(src, {b".gitmodules": gitmodules, b"a.txt": b"a\n"})
    git(src, "add", "-A")
    for k, rev in enumerate(("v1", "v2")):
        git(src, "update-index", "--add", "--cacheinfo", f"160000,{str(k + 1) * 40},s")
        git(src, "commit", "-qm", rev, "--allow-empty")  # (commit ignores it too)
        git(src, "tag", rev)
    ours, theirs = clone_with_git(src, tmp_path / "ours"), clone_with_git(src, tmp_path / "theirs")
    for repo in (ours, theirs):
        git(repo, "checkout", "-q", "v1")
    git(theirs, "checkout", "-q", "v2")
    result = checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert result.plan.writer == writer
    assert git(ours, "ls-files", "-s", "s") == git(theirs, "ls-files", "-s", "s")
    assert git(ours, "ls-files", "-s", "s").split()[1] == b"2" * 40
    assert git(ours, "ls-files", "-s", "-z") == git(theirs, "ls-files", "-s", "-z")
    assert git(ours, "status", "--porcelain", "-z", "--ignored") == b""
    assert git(ours, "rev-parse", "HEAD") == git(theirs, "rev-parse", "HEAD")
    # (not assert_same_as_git: git records no stat data for a gitlink it moves, and its
    # writer's index here is git's)
