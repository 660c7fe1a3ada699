"""REV read as ``git checkout REV`` reads it, by both writers: every case runs git's own
checkout on a twin repository and compares the exit code, git's lines on stderr (its
``error:``/``fatal:`` line is pcheckout's ``pcheckout: error:`` line), HEAD, the reflogs
and the work tree."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from helpers import assert_same_as_git, git, make_repo, run_cli

pytestmark = pytest.mark.usefixtures("writer")

COMMIT = ("commit", "-q", "--allow-empty")


def _history(tmp_path: Path) -> Path:
    """main: c1 (tag v1, annotated; branch side), c2; a file 'a' in both."""
    src = make_repo(tmp_path, {b"a": b"1\n", b"d/b": b"x\n"})
    git(src, "tag", "-a", "-m", "t", "v1")
    git(src, "branch", "side")
    (src / "a").write_bytes(b"2\n")
    git(src, "add", "a")
    git(src, *COMMIT, "-m", "c2")
    return src


def _twins(tmp_path: Path, src: Path) -> tuple[Path, Path]:
    """Two clones of ``src``, checked out by git: pcheckout's and git's."""
    for name in ("ours", "theirs"):
        git(tmp_path, "clone", "-q", str(src), name)
    return tmp_path / "ours", tmp_path / "theirs"


def _said(text: str) -> list[str]:
    """stderr's lines, pcheckout's error prefix read as git's."""
    return [
        re.sub(r"^(pcheckout: error: |error: |fatal: )", "", line) for line in text.splitlines()
    ]


def _reflogs(repo: Path) -> list[bytes]:
    """HEAD's reflog and each branch's: old and new ids, who, when and the message."""
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/heads").split()
    fmt = "--format=%gD %H %gn %ge %gs"
    return [
        git(repo, "reflog", "show", "--date=raw", fmt, ref.decode()) for ref in [b"HEAD", *refs]
    ]


def _same(
    ours: Path, theirs: Path, *words: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``git checkout WORDS`` in theirs, ``pcheckout checkout WORDS`` in ours: the same
    exit code, lines, HEAD, reflogs, config and work tree."""
    want = subprocess.run(
        ["git", "checkout", *words], cwd=cwd or theirs, capture_output=True, text=True
    )
    proc = run_cli("checkout", *words, cwd=cwd or ours)
    assert proc.returncode == want.returncode, (proc.stderr, want.stderr)
    assert _said(proc.stderr) == _said(want.stderr.replace("/theirs", "/ours"))
    assert _reflogs(ours) == _reflogs(theirs)
    assert git(ours, "config", "--local", "-l") == git(theirs, "config", "--local", "-l")
    assert git(ours, "for-each-ref") == git(theirs, "for-each-ref")
    assert_same_as_git(ours, theirs)
    return proc


def test_the_upstream_a_branch_is_behind(tmp_path: Path) -> None:
    """git's tracking line counts what the branch lacks ("behind ... by 1 commit")."""
    ours, theirs = _twins(tmp_path, _history(tmp_path))
    for repo in (ours, theirs):
        git(repo, "branch", "-q", "old", "origin/main~1")
        git(repo, "branch", "-q", "-u", "origin/main", "old")
    proc = run_cli("checkout", "old", cwd=ours)
    want = subprocess.run(["git", "checkout", "old"], cwd=theirs, capture_output=True, text=True)
    assert proc.returncode == want.returncode == 0
    assert proc.stdout.partition("\n")[2] == want.stdout
    assert "behind 'origin/main' by 1 commit" in want.stdout
