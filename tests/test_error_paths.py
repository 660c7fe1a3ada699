"""Where git's checkout fails, by both writers, beside git on a twin repository: the exit
code (128 where git dies), git's words, and what is left (work tree, index, HEAD)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import git, make_repo, run_cli, snapshot_difference

pytestmark = pytest.mark.usefixtures("writer")


def _twins(tmp_path: Path) -> tuple[Path, Path]:
    """Clones of main (a, d/b) with a branch 'side' (a changed, side.txt added)."""
    src = make_repo(tmp_path, {b"a": b"1\n", b"d/b": b"x\n"})
    git(src, "checkout", "-q", "-b", "side")
    (src / "a").write_bytes(b"2\n")
    (src / "side.txt").write_bytes(b"s\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "side")
    git(src, "checkout", "-q", "main")
    for name in ("ours", "theirs"):
        git(tmp_path, "clone", "-q", str(src), name)
        git(tmp_path / name, "branch", "-q", "side", "origin/side")
    return tmp_path / "ours", tmp_path / "theirs"


def _run(ours: Path, theirs: Path, rev: str) -> tuple[subprocess.CompletedProcess[str], str]:
    want = subprocess.run(["git", "checkout", rev], cwd=theirs, capture_output=True, text=True)
    proc = run_cli("checkout", rev, cwd=ours)
    assert proc.returncode == want.returncode, (proc.stderr, want.stderr)
    return proc, want.stderr.replace(str(theirs), str(ours))


def _left_alike(ours: Path, theirs: Path) -> None:
    assert not snapshot_difference(ours, theirs)
    for args in (("ls-files", "-s"), ("status", "--porcelain"), ("rev-parse", "HEAD")):
        assert git(ours, *args) == git(theirs, *args), args


@pytest.mark.parametrize("rev", ["side", "origin/side"])
def test_head_locked(tmp_path: Path, rev: str) -> None:
    """HEAD.lock held: git writes the work tree and the index, then dies (128) moving HEAD."""
    ours, theirs = _twins(tmp_path)
    for repo in (ours, theirs):
        (repo / ".git" / "HEAD.lock").write_bytes(b"")
    proc, said = _run(ours, theirs, rev)
    assert proc.returncode == 128
    lines = [line for line in said.splitlines() if line]
    head = lines[0].removeprefix("error: ").removeprefix("fatal: ")
    assert head.startswith(("Unable to create", "update_ref failed")) and head in proc.stderr
    assert lines[-1].removeprefix("fatal: ") in proc.stderr
    _left_alike(ours, theirs)
    assert git(ours, "symbolic-ref", "HEAD") == b"refs/heads/main\n"
    for repo in (ours, theirs):  # the lock gone, the same command finishes as git's does
        (repo / ".git" / "HEAD.lock").unlink()
    proc, _ = _run(ours, theirs, rev)
    assert proc.returncode == 0, proc.stderr
    _left_alike(ours, theirs)


def test_a_corrupt_loose_blob(tmp_path: Path) -> None:
    """git dies on it (128): so does pcheckout, by either writer."""
    ours, theirs = _twins(tmp_path)
    for repo in (ours, theirs):  # the same commit in each (dates fixed): its blob loose
        git(repo, "checkout", "-q", "-b", "local")
        (repo / "new.txt").write_bytes(b"new\n")
        git(repo, "add", "new.txt")
        git(repo, "commit", "-q", "-m", "local")
        git(repo, "checkout", "-q", "main")
        blob = git(repo, "rev-parse", "local:new.txt").decode().strip()
        path = repo / ".git" / "objects" / blob[:2] / blob[2:]
        os.chmod(path, 0o644)
        path.write_bytes(b"garbage")
    proc, said = _run(ours, theirs, "local")
    assert proc.returncode == 128 and "is corrupt" in said
    assert git(ours, "symbolic-ref", "HEAD") == b"refs/heads/main\n"


def test_a_branch_naming_a_missing_object(tmp_path: Path) -> None:
    ours, theirs = _twins(tmp_path)
    for repo in (ours, theirs):
        (repo / ".git" / "refs" / "heads" / "bad").write_text("1" * 40 + "\n")
    proc, said = _run(ours, theirs, "bad")
    assert proc.returncode == 128
    assert said.strip() == "fatal: reference is not a tree: bad"
    assert proc.stderr.strip() == "pcheckout: error: reference is not a tree: bad"
