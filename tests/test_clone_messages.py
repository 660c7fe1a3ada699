"""What ``pcheckout clone`` says beside ``git clone``, by both writers: git clone's own lines
on stderr (the detach advice of a clone of a tag or a detached HEAD, the warning of a remote
HEAD that names no branch), nothing of the writer's, and the same clone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from clonehelp import assert_clone_same, make_server, url
from helpers import git, run_cli

pytestmark = pytest.mark.usefixtures("writer")


def _both(tmp_path: Path, *args: str) -> tuple[str, str]:
    """git clone and pcheckout clone of the same words into ``g/dst`` and ``p/dst``:
    their stderr (both exit 0), the clones compared."""
    for side in ("g", "p"):
        (tmp_path / side).mkdir(exist_ok=True)
    want = subprocess.run(
        ["git", "clone", *args, "dst"], cwd=tmp_path / "g", capture_output=True, text=True
    )
    proc = run_cli("clone", *args, "dst", cwd=tmp_path / "p")
    assert want.returncode == proc.returncode == 0, (want.stderr, proc.stderr)
    assert_clone_same(tmp_path / "p" / "dst", tmp_path / "g" / "dst")
    return proc.stderr, want.stderr


@pytest.mark.parametrize(
    ("tag", "options"), [("v1", ["--branch", "v1"]), ("v2", ["-q", "-b", "v2", "--depth", "1"])]
)
def test_a_tag_cloned_is_gits_detach_advice(tmp_path: Path, tag: str, options: list[str]) -> None:
    server = make_server(tmp_path)
    ours, theirs = _both(tmp_path, *options, url(server))
    assert ours == theirs
    commit = git(server, "rev-parse", f"{tag}^{{commit}}").decode().strip()
    assert f"Note: switching to '{commit}'." in theirs and "HEAD is now at" not in theirs


def test_the_advice_off_and_a_detached_remote_head(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    git(server, "update-ref", "--no-deref", "HEAD", "v1^{commit}")  # detached, on no branch
    ours, theirs = _both(tmp_path, url(server))
    assert ours == theirs and "Note: switching to" in theirs
    for side in ("g", "p"):
        os.rename(tmp_path / side / "dst", tmp_path / side / "first")
    ours, theirs = _both(tmp_path, "-c", "advice.detachedHead=false", url(server))
    assert ours == theirs and "Note: switching to" not in theirs


def test_a_remote_head_naming_no_branch(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    git(server, "symbolic-ref", "HEAD", "refs/heads/gone")
    ours, theirs = _both(tmp_path, url(server))
    assert ours == theirs
    assert "warning: remote HEAD refers to nonexistent ref, unable to checkout" in theirs
    assert not (tmp_path / "p" / "dst" / ".git" / "index").exists()


def test_a_sparse_clone_says_what_git_says(tmp_path: Path) -> None:
    """git's writer's read-tree -v counts "Updating index flags: 0, done.": not relayed."""
    server = make_server(tmp_path)
    ours, theirs = _both(tmp_path, "--sparse", url(server))
    assert ours == theirs
