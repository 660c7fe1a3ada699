"""A switch's local-change check against git's own (read-cache.c ie_match_stat, unpack-trees.c
verify_uptodate): ``core.symlinks=false`` (a symlink checked out as a plain file),
``core.fileMode`` (the x bit), a deleted file; both writers, git's result on the same repo."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import (
    assert_same_as_git,
    clone_no_checkout,
    git,
    make_repo,
    run_cli,
    write_tree_files,
)

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.errors import DestinationError
from pcheckout.git.index import read_index

pytestmark = pytest.mark.usefixtures("writer")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    src = make_repo(
        tmp_path,
        {
            b"a.txt": b"a\n",
            b"same.txt": b"same\n",
            b"link": ("l", b"a.txt"),
            b"still": ("l", b"same.txt"),
            b"run.sh": ("x", b"#!/bin/sh\n"),
        },
    )
    git(src, "tag", "v1")
    (src / "link").unlink()
    write_tree_files(src, {b"a.txt": b"b\n", b"link": ("l", b"same.txt"), b"run.sh": b"echo\n"})
    git(src, "add", "-A")
    git(src, "commit", "-qm", "two")
    git(src, "tag", "v2")
    return src


def _pair(tmp_path: Path, repo: Path, config: dict[str, str]) -> tuple[Path, Path]:
    """Two clones at v1, checked out by git under ``config``."""
    out = []
    for name in ("ours", "theirs"):
        w = clone_no_checkout(repo, tmp_path / name, config)
        git(w, "checkout", "-q", "v1")
        out.append(w)
    return out[0], out[1]


def _git_switch(work: Path, rev: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(work), "checkout", "-q", rev], capture_output=True)


def test_symlinks_false_a_link_written_as_a_file_is_no_local_change(
    tmp_path: Path, repo: Path
) -> None:
    ours, theirs = _pair(tmp_path, repo, {"core.symlinks": "false"})
    assert (ours / "link").read_bytes() == b"a.txt" and not (ours / "link").is_symlink()
    assert _git_switch(theirs, "v2").returncode == 0
    checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert_same_as_git(ours, theirs)
    assert (ours / "link").read_bytes() == b"same.txt"


def test_symlinks_false_an_edited_link_file_is_refused_like_git(tmp_path: Path, repo: Path) -> None:
    ours, theirs = _pair(tmp_path, repo, {"core.symlinks": "false"})
    for w in (ours, theirs):
        (w / "link").write_bytes(b"elsewhere")
    assert b"link" in _git_switch(theirs, "v2").stderr
    with pytest.raises(DestinationError, match="link"):
        checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert (ours / "link").read_bytes() == b"elsewhere"


@pytest.mark.parametrize("file_mode", ["true", "false"])
def test_x_bit_changes_follow_core_filemode(tmp_path: Path, repo: Path, file_mode: str) -> None:
    ours, theirs = _pair(tmp_path, repo, {"core.fileMode": file_mode})
    for w in (ours, theirs):
        (w / "a.txt").chmod(0o755)  # a file the switch changes
        (w / "run.sh").chmod(0o644)
    refused = _git_switch(theirs, "v2")
    if file_mode == "true":
        assert b"a.txt" in refused.stderr and b"run.sh" in refused.stderr
        with pytest.raises(DestinationError, match=r"a\.txt.*run\.sh"):
            checkout(CheckoutOptions(directory=ours, rev="v2"))
        assert git(ours, "rev-parse", "HEAD") == git(ours, "rev-parse", "v1")
        return
    assert refused.returncode == 0
    checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert_same_as_git(ours, theirs)


def test_a_deleted_file_the_switch_changes_is_written_like_git(tmp_path: Path, repo: Path) -> None:
    ours, theirs = _pair(tmp_path, repo, {})
    for w in (ours, theirs):
        (w / "a.txt").unlink()
    assert _git_switch(theirs, "v2").returncode == 0
    checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert_same_as_git(ours, theirs)


def test_a_racily_clean_kept_file_edited_in_the_index_second_stays_modified_as_in_git(
    tmp_path: Path, repo: Path
) -> None:
    # A same-size edit within the second the index was written: its stat data (seconds)
    # still matches the entry.  git's checkout writes such an entry with size 0, so the
    # next status (the index is now from a later second) still sees the change.
    ours, theirs = _pair(tmp_path, repo, {})
    for w in (ours, theirs):
        index = w / ".git" / "index"
        entry = next(
            e for e in read_index(index).entries if e.path == b"same.txt"
        )  # (its recorded times)
        (w / "same.txt").write_bytes(b"SAME\n")
        seconds = entry.mtime_s + entry.mtime_ns / 1e9
        os.utime(w / "same.txt", (seconds, seconds))
        os.utime(index, (seconds, seconds))
    assert _git_switch(theirs, "v2").returncode == 0
    checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert git(theirs, "status", "--porcelain") == b" M same.txt\n"
    assert git(ours, "status", "--porcelain") == git(theirs, "status", "--porcelain")


def _racy(work: Path, path: str) -> None:
    """The index file dated in ``path``'s second: every entry written with it is racily
    clean, and content decides."""
    st = os.stat(work / path)
    os.utime(work / ".git" / "index", ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize(
    "config, attributes",
    [
        ({"core.autocrlf": "true"}, b""),
        ({"core.autocrlf": "input"}, b""),
        ({}, b"* text=auto\n"),
        ({"core.autocrlf": "true"}, b"*.txt text=auto\n"),
    ],
)
def test_a_crlf_blob_racily_clean_is_no_local_change_as_in_git(
    tmp_path: Path, config: dict[str, str], attributes: bytes
) -> None:
    # text=auto never converts a path whose indexed blob has a CR (convert.c
    # has_crlf_in_index): the CRLF file matches its blob.  Hashed without the index it
    # cleaned to LF, and the switch refused it as a local change.
    src = make_repo(tmp_path, {b"crlf.txt": b"a\r\nb\r\n", b"kept.txt": b"k\r\nl\r\n"})
    if attributes:
        write_tree_files(src, {b".gitattributes": attributes})
        git(src, "add", ".gitattributes")
        git(src, "commit", "-qm", "attributes")
    git(src, "tag", "v1")
    write_tree_files(src, {b"crlf.txt": b"a\r\nc\r\n"})
    git(src, "-c", "core.autocrlf=false", "commit", "-qam", "two")
    git(src, "tag", "v2")
    assert git(src, "cat-file", "blob", "v2:crlf.txt") == b"a\r\nc\r\n"
    ours, theirs = (clone_no_checkout(src, tmp_path / n, config) for n in ("ours", "theirs"))
    for w in (ours, theirs):
        git(w, "checkout", "-q", "v1")
        _racy(w, "kept.txt")
    assert _git_switch(theirs, "v2").returncode == 0
    checkout(CheckoutOptions(directory=ours, rev="v2"))
    assert_same_as_git(ours, theirs)


def _conflicted(work: Path) -> None:
    """A merge left unmerged: a.txt in conflict (stages 1-3), new.txt added by both."""
    git(work, "checkout", "-q", "-b", "side")
    write_tree_files(work, {b"a.txt": b"side\n", b"new.txt": b"side\n"})
    git(work, "add", "-A")
    git(work, "commit", "-qm", "side")
    git(work, "checkout", "-q", "-")
    write_tree_files(work, {b"a.txt": b"here\n", b"new.txt": b"here\n"})
    git(work, "add", "-A")
    git(work, "commit", "-qm", "here")
    assert subprocess.run(["git", "-C", str(work), "merge", "-q", "side"]).returncode == 1


@pytest.mark.parametrize("force", [False, True], ids=["refused", "forced"])
def test_an_unmerged_index_as_git_checkout_treats_it(
    tmp_path: Path, repo: Path, force: bool
) -> None:
    # git refuses ("you need to resolve your current index first"); with --force it resets
    # the conflicted paths to the target's entries (oneway_merge), and so does pcheckout.
    ours, theirs = _pair(tmp_path, repo, {})
    for w in (ours, theirs):
        git(w, "checkout", "-q", "-b", "work")
        _conflicted(w)
    args = ["git", "-C", str(theirs), "checkout", "-q", *(["-f"] if force else []), "v2"]
    proc = subprocess.run(args, capture_output=True)
    assert proc.returncode == (0 if force else 1), proc.stderr
    if force:
        checkout(CheckoutOptions(directory=ours, rev="v2", force=True))
        assert_same_as_git(ours, theirs)
    else:
        with pytest.raises(DestinationError, match="you need to resolve your current index first"):
            checkout(CheckoutOptions(directory=ours, rev="v2"))
        assert git(ours, "ls-files", "-s") == git(theirs, "ls-files", "-s")


@pytest.mark.parametrize("path", ["same.txt", "a.txt"], ids=["kept", "changed"])
def test_force_over_an_assume_unchanged_file_edited_as_git(
    tmp_path: Path, repo: Path, path: str
) -> None:
    # git checkout -f looks at an assume-unchanged file by its stat data
    # (verify_uptodate_1, oneway_merge): a kept one edited is restored; one the switch
    # changes stops it, "Entry 'a.txt' not uptodate. Cannot merge." (exit 128).  The
    # engine's refresh skipped them: it kept the edit, or overwrote it.
    ours, theirs = _pair(tmp_path, repo, {})
    for w in (ours, theirs):
        git(w, "update-index", "--assume-unchanged", path)
        (w / path).write_bytes(b"edited\n")
    proc = subprocess.run(
        ["git", "-C", str(theirs), "checkout", "-q", "-f", "v2"], capture_output=True
    )
    if path == "a.txt":
        assert proc.returncode == 128 and b"Entry 'a.txt' not uptodate" in proc.stderr
        err = run_cli("checkout", "-C", str(ours), "-f", "v2")
        assert err.returncode == 128 and "Entry 'a.txt' not uptodate. Cannot merge." in err.stderr
        assert (ours / path).read_bytes() == b"edited\n"
        assert git(ours, "rev-parse", "HEAD") == git(theirs, "rev-parse", "HEAD")
    else:
        assert proc.returncode == 0, proc.stderr
        checkout(CheckoutOptions(directory=ours, rev="v2", force=True))
        assert_same_as_git(ours, theirs)
        # the entry written again keeps its bit (keep_entry: the old entry, its flags)
        assert git(ours, "ls-files", "-v") == git(theirs, "ls-files", "-v")


def test_force_writes_a_touched_file_again_as_git(tmp_path: Path, repo: Path) -> None:
    # git checkout -f writes again a kept file whose stat data changed, its content the
    # same (no refresh first): the index then has its new file's stat data.
    ours, theirs = _pair(tmp_path, repo, {})
    for w in (ours, theirs):
        os.utime(w / "same.txt", (1e9, 1e9))
    git(theirs, "checkout", "-q", "-f", "v2")
    checkout(CheckoutOptions(directory=ours, rev="v2", force=True))
    assert_same_as_git(ours, theirs)
    assert (ours / "same.txt").stat().st_mtime > 1e9
