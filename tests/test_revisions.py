"""REV read as ``git checkout REV`` reads it, by both writers: every case runs git's own
checkout on a twin repository and compares the exit code, git's lines on stderr (its
``error:``/``fatal:`` line is pcheckout's ``pcheckout: error:`` line), HEAD, the reflogs
and the work tree."""

from __future__ import annotations

import os
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


@pytest.mark.parametrize(
    ("rev", "code"),
    [
        ("nope", 1),  # error: pathspec 'nope' did not match any file(s) known to git
        ("main~9", 1),
        ("v1..main", 1),
        ("v1^{tree}", 128),  # fatal: Cannot switch branch to a non-commit 'v1^{tree}'
        ("HEAD:a", 128),  # fatal: reference is not a tree: HEAD:a
        (":/c2", 0),  # a commit found by its message
        ("@{-9}", 1),
    ],
)
def test_revisions_git_reads_or_refuses(tmp_path: Path, rev: str, code: int) -> None:
    ours, theirs = _twins(tmp_path, _history(tmp_path))
    assert _same(ours, theirs, rev).returncode == code


def test_a_tree_or_blob_by_its_id(tmp_path: Path) -> None:
    ours, theirs = _twins(tmp_path, _history(tmp_path))
    for name in ("main^{tree}", "main:a"):
        oid = git(ours, "rev-parse", name).decode().strip()
        assert _same(ours, theirs, oid).returncode == 128


def test_a_name_both_tag_and_branch_warns_and_takes_the_branch(tmp_path: Path) -> None:
    src = _history(tmp_path)
    git(src, "tag", "side", "main")  # the tag is at c2, the branch at c1
    ours, theirs = _twins(tmp_path, src)
    for repo in (ours, theirs):
        git(repo, "branch", "side", "origin/side")
    proc = _same(ours, theirs, "side")
    assert proc.stderr.splitlines()[0] == "warning: refname 'side' is ambiguous."
    assert git(ours, "symbolic-ref", "HEAD") == b"refs/heads/side\n"


def _remote_branch(tmp_path: Path) -> tuple[Path, Path]:
    src = _history(tmp_path)
    git(src, "branch", "feat", "main~1")
    return _twins(tmp_path, src)


@pytest.mark.parametrize(
    "config",
    [{}, {"branch.autoSetupMerge": "false"}, {"checkout.guess": "false"}],
    ids=["tracking", "autosetupmerge-false", "guess-false"],
)
def test_a_remote_branch_guessed(tmp_path: Path, config: dict[str, str]) -> None:
    """The new branch's reflog names the remote-tracking ref ("branch: Created from
    refs/remotes/origin/feat"); its upstream follows branch.autoSetupMerge; checkout.guess
    off: git's pathspec error."""
    ours, theirs = _remote_branch(tmp_path)
    for repo in (ours, theirs):
        for key, value in config.items():
            git(repo, "config", key, value)
    proc = _same(ours, theirs, "feat")
    assert proc.returncode == (1 if config.get("checkout.guess") else 0)


def test_a_branch_of_two_remotes(tmp_path: Path) -> None:
    """git dies (128) unless checkout.defaultRemote names one of them."""
    ours, theirs = _remote_branch(tmp_path)
    for repo in (ours, theirs):
        git(repo, "remote", "add", "other", str(tmp_path / "src"))
        git(repo, "fetch", "-q", "other")
    proc = run_cli("checkout", "feat", cwd=ours)
    want = subprocess.run(["git", "checkout", "feat"], cwd=theirs, capture_output=True, text=True)
    assert proc.returncode == want.returncode == 128
    assert "'feat' matched multiple (2) remote tracking branches" in proc.stderr
    assert "fatal: 'feat' matched multiple (2) remote tracking branches" in want.stderr
    assert_same_as_git(ours, theirs)
    for repo in (ours, theirs):
        git(repo, "config", "checkout.defaultRemote", "other")
    _same(ours, theirs, "feat")
    assert git(ours, "config", "branch.feat.remote") == b"other\n"


def test_a_remote_branch_that_is_also_a_file(tmp_path: Path) -> None:
    ours, theirs = _remote_branch(tmp_path)
    for repo in (ours, theirs):
        (repo / "feat").write_bytes(b"untracked\n")
    proc = run_cli("checkout", "feat", cwd=ours)
    want = subprocess.run(["git", "checkout", "feat"], cwd=theirs, capture_output=True, text=True)
    assert proc.returncode == want.returncode == 128
    assert "'feat' could be both a local file and a tracking branch" in proc.stderr
    assert git(ours, "for-each-ref") == git(theirs, "for-each-ref")


def test_dash_names_the_commit_a_detached_head_left(tmp_path: Path) -> None:
    """``-`` after a detached HEAD: git's advice names the full commit id it read."""
    ours, theirs = _twins(tmp_path, _history(tmp_path))
    for repo in (ours, theirs):
        git(repo, "checkout", "-q", "v1")
        git(repo, "checkout", "-q", "main")
    proc = _same(ours, theirs, "-")
    v1 = git(ours, "rev-parse", "v1^{commit}").decode().strip()
    assert f"Note: switching to '{v1}'." in proc.stderr


def test_an_unborn_branch(tmp_path: Path) -> None:
    """``git checkout`` on an unborn branch dies (128); ``git checkout HEAD`` reads HEAD
    as a path (1)."""
    for name in ("ours", "theirs"):
        git(tmp_path, "init", "-q", "-b", "main", name)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for words, code in (([], 128), (["HEAD"], 1)):
        proc = run_cli("checkout", *words, cwd=ours)
        want = subprocess.run(
            ["git", "checkout", *words], cwd=theirs, capture_output=True, text=True
        )
        assert proc.returncode == want.returncode == code
        assert _said(proc.stderr) == _said(want.stderr)
    assert _said(run_cli("checkout", cwd=ours).stderr) == ["You are on a branch yet to be born"]


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


def test_a_branch_checked_out_in_another_worktree(tmp_path: Path) -> None:
    """git refuses it (128) and changes nothing; its own branch, or HEAD, is fine."""
    ours, theirs = _twins(tmp_path, _history(tmp_path))
    for repo in (ours, theirs):
        git(repo, "worktree", "add", "-q", "-b", "wtb", f"../{repo.name}-wt", "origin/side")
    proc = _same(ours, theirs, "wtb")
    assert proc.returncode == 128
    assert _said(proc.stderr) == [f"'wtb' is already checked out at '{tmp_path}/ours-wt'"]
    ours_wt, theirs_wt = tmp_path / "ours-wt", tmp_path / "theirs-wt"
    want = subprocess.run(["git", "checkout", "main"], cwd=theirs_wt, capture_output=True)
    proc = run_cli("checkout", "main", cwd=ours_wt)
    assert proc.returncode == want.returncode == 128
    assert f"'main' is already checked out at '{ours}'" in proc.stderr
    assert _same(ours_wt, theirs_wt, "v1").returncode == 0
    assert _same(ours_wt, theirs_wt, "wtb").returncode == 0


def test_a_branch_being_rebased_in_another_worktree(tmp_path: Path) -> None:
    """A work tree detached by a rebase of the branch still has it (git: 128)."""
    ours, theirs = _twins(tmp_path, _history(tmp_path))
    env = {**os.environ, "GIT_SEQUENCE_EDITOR": "sed -i '1i break'"}
    for repo in (ours, theirs):
        git(repo, "worktree", "add", "-q", "-b", "wtb", f"../{repo.name}-wt", "origin/main")
        subprocess.run(
            ["git", "rebase", "-q", "-i", "HEAD~1"],
            cwd=f"{repo}-wt",
            env=env,
            check=True,
            capture_output=True,
        )
        assert git(f"{repo}-wt", "symbolic-ref", "-q", "HEAD", check=False) == b""
    proc = _same(ours, theirs, "wtb")
    assert proc.returncode == 128
    assert _said(proc.stderr) == [f"'wtb' is already checked out at '{tmp_path}/ours-wt'"]


def test_a_remote_branch_through_a_custom_refspec(tmp_path: Path) -> None:
    """The remote 'up' fetches into refs/remotes/mirror/: the guess maps refs/heads/feat
    through it, and git's line names the remote and its branch ('up/feat')."""
    src = _history(tmp_path)
    git(src, "branch", "feat", "main~1")
    for name in ("ours", "theirs"):
        git(tmp_path, "init", "-q", "-b", "main", name)
        repo = tmp_path / name
        git(repo, "remote", "add", "up", str(src))
        git(repo, "config", "remote.up.fetch", "+refs/heads/*:refs/remotes/mirror/*")
        git(repo, "config", "--add", "remote.up.fetch", "^refs/heads/side")
        git(repo, "fetch", "-q", "up")
        git(repo, "checkout", "-q", "-b", "main", "mirror/main")
    proc = _same(tmp_path / "ours", tmp_path / "theirs", "feat")
    assert "branch 'feat' set up to track 'up/feat'." in proc.stdout
    assert git(tmp_path / "ours", "config", "branch.feat.merge") == b"refs/heads/feat\n"
    assert _same(tmp_path / "ours", tmp_path / "theirs", "side").returncode == 1  # excluded


@pytest.mark.parametrize("rev", ["side", "v1"])
def test_reflog_action_from_the_environment(tmp_path: Path, rev: str) -> None:
    """GIT_REFLOG_ACTION is HEAD's reflog message, as git checkout writes it."""
    ours, theirs = _twins(tmp_path, _history(tmp_path))
    env = {"GIT_REFLOG_ACTION": "my tool: switching"}
    want = subprocess.run(
        ["git", "checkout", rev], cwd=theirs, capture_output=True, env={**os.environ, **env}
    )
    proc = run_cli("checkout", rev, cwd=ours, env=env)
    assert proc.returncode == want.returncode == 0
    assert _reflogs(ours) == _reflogs(theirs)
    assert git(ours, "reflog", "-1", "--format=%gs") == b"my tool: switching\n"
