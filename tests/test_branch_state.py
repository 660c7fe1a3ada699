"""What git checkout clears once HEAD has moved (an unfinished merge's, cherry-pick's or
revert's state, a merge's autostash), and a conflicted index, by both writers beside git's
own checkout on twin repositories."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import git, make_repo, run_cli, snapshot_difference

pytestmark = pytest.mark.usefixtures("writer")

STATE = (
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "AUTO_MERGE",
    "SQUASH_MSG",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "MERGE_AUTOSTASH",
    "sequencer",
)


def _twins(tmp_path: Path, setup: Callable[[Path], object]) -> tuple[Path, Path]:
    """Clones of main (c1, c2: a, f) and side (from c1: s), each set up alike."""
    src = make_repo(tmp_path, {b"a": b"1\n", b"f": b"f\n"})
    git(src, "checkout", "-q", "-b", "side")
    (src / "s").write_bytes(b"s\n")
    git(src, "add", "s")
    git(src, "commit", "-q", "-m", "side")
    git(src, "checkout", "-q", "main")
    (src / "a").write_bytes(b"2\n")
    git(src, "commit", "-q", "-am", "c2")
    for name in ("ours", "theirs"):
        repo = tmp_path / name
        git(tmp_path, "clone", "-q", str(src), name)
        git(repo, "branch", "-q", "side", "origin/side")
        setup(repo)
    return tmp_path / "ours", tmp_path / "theirs"


def _same(ours: Path, theirs: Path, *words: str) -> subprocess.CompletedProcess[str]:
    want = subprocess.run(["git", "checkout", *words], cwd=theirs, capture_output=True, text=True)
    proc = run_cli("checkout", *words, cwd=ours)
    assert proc.returncode == want.returncode, (proc.stderr, want.stderr)
    # (git's writer names git's refusal as such)
    prefix = r"^(pcheckout: error: (git checkout refused: )?|error: )"
    said = [re.sub(prefix, "", line) for line in proc.stderr.splitlines()]
    assert said == [re.sub(r"^error: ", "", line) for line in want.stderr.splitlines()]
    for name in STATE:
        assert (ours / ".git" / name).exists() == (theirs / ".git" / name).exists(), name
    assert not snapshot_difference(ours, theirs)
    for args in (("ls-files", "-s"), ("status", "--porcelain"), ("for-each-ref",)):
        assert git(ours, *args) == git(theirs, *args), args
    return proc


def _merge(repo: Path) -> None:
    git(repo, "merge", "-q", "--no-commit", "--no-ff", "side")


@pytest.mark.parametrize("words", [[], ["main"], ["-f", "side~1"]], ids=["HEAD", "main", "force"])
def test_a_merge_not_committed(tmp_path: Path, words: list[str]) -> None:
    """MERGE_HEAD and the rest go, as after git checkout: a commit is no merge then."""
    ours, theirs = _twins(tmp_path, _merge)
    _same(ours, theirs, *words)
    assert not (ours / ".git" / "MERGE_HEAD").exists()


def _conflict(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "x", "main~1")
    (repo / "a").write_bytes(b"mine\n")
    git(repo, "commit", "-q", "-am", "mine")
    subprocess.run(["git", "merge", "-q", "main"], cwd=repo, capture_output=True)


@pytest.mark.parametrize("words", [["side"], [], ["-f", "side"], ["-f"]])
def test_a_conflicted_index(tmp_path: Path, words: list[str]) -> None:
    """Unmerged entries: git refuses ("you need to resolve your current index first");
    with --force it resets them to REV and drops the merge."""
    ours, theirs = _twins(tmp_path, _conflict)
    proc = _same(ours, theirs, *words)
    assert proc.returncode == (0 if "-f" in words else 1)


def _revert(repo: Path) -> None:
    git(repo, "revert", "--no-commit", "main")


def _cherry_picks(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "x", "main~1")
    (repo / "a").write_bytes(b"mine\n")
    git(repo, "commit", "-q", "-am", "mine")
    subprocess.run(["git", "cherry-pick", "main", "side"], cwd=repo, capture_output=True)


@pytest.mark.parametrize(
    ("setup", "words"), [(_revert, []), (_cherry_picks, ["-f", "side"])], ids=["revert", "pick"]
)
def test_a_revert_or_cherry_pick_cancelled(
    tmp_path: Path, setup: Callable[[Path], None], words: list[str]
) -> None:
    """git's warning ("cancelling a revert in progress"), the pseudo-ref gone; a sequence
    of picks keeps its sequencer state, as git's."""
    ours, theirs = _twins(tmp_path, setup)
    proc = _same(ours, theirs, *words)
    assert proc.stderr.startswith("warning: cancelling a ") or "warning: cancelling" in (
        proc.stderr
    )


def test_a_merge_autostash_kept_in_the_stash(tmp_path: Path) -> None:
    def setup(repo: Path) -> None:
        (repo / "f").write_bytes(b"dirty\n")
        git(repo, "merge", "-q", "--autostash", "--no-commit", "--no-ff", "side")

    ours, theirs = _twins(tmp_path, setup)
    proc = _same(ours, theirs)
    assert "Autostash exists; creating a new stash entry." in proc.stderr
    assert git(ours, "stash", "list") == git(theirs, "stash", "list") != b""
