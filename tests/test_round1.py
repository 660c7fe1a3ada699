"""Round 1's git processes started by the CLI before the checkout's modules are imported
(git/round1.py): each taken by the question it answers (no process run twice), a switch's
changes asked by name only where the name reads as the tree REV resolved to, and what
nobody took stopped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, git, make_repo, run_cli

from pcheckout.git import round1

FILES = {b"a": b"a\n", b"d/b": b"b\n", b"d/e/c": b"c\n"}


def _two_commits(tmp_path: Path) -> Path:
    src = make_repo(tmp_path, FILES)
    (src / "d" / "b").write_bytes(b"changed\n")
    (src / "new").write_bytes(b"new\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "two")
    git(src, "tag", "v2")
    return src


def _commands(trace: Path) -> list[list[str]]:
    """Every git process's argv (after ``git``'s own options), from its trace2 events."""
    out = []
    for line in trace.read_text().splitlines():
        ev = json.loads(line)
        if ev.get("event") == "start":
            argv = ev["argv"][1:]
            while argv and argv[0] in ("-C", "--no-pager", "-c"):
                argv = argv[2:] if argv[0] in ("-C", "-c") else argv[1:]
            out.append(argv)
    return out


def _run(tmp_path: Path, *args: str) -> list[list[str]]:
    trace = tmp_path / "trace.json"
    trace.unlink(missing_ok=True)
    proc = run_cli(*args, env={"GIT_TRACE2_EVENT": str(trace)})
    assert proc.returncode == 0, proc.stderr
    return _commands(trace)


def _count(commands: list[list[str]], verb: str) -> int:
    return sum(1 for c in commands if c and c[0] == verb)


def test_a_fresh_checkout_runs_each_question_of_round_one_once(tmp_path: Path) -> None:
    src = _two_commits(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_with_git(src, tmp_path / "theirs")
    commands = _run(tmp_path, "checkout", "-q", "-C", str(ours), "--writer", "git")
    for verb in ("version", "rev-parse", "config", "cat-file", "ls-tree"):
        assert _count(commands, verb) == 1, (verb, commands)
    assert_same_as_git(ours, theirs)


def test_a_switch_by_git_runs_each_question_of_round_one_once(tmp_path: Path) -> None:
    src = _two_commits(tmp_path)
    ours = clone_with_git(src, tmp_path / "ours", rev="HEAD~1")
    theirs = clone_with_git(src, tmp_path / "theirs", rev="v2")
    commands = _run(tmp_path, "checkout", "-q", "-C", str(ours), "--writer", "git", "v2")
    for verb in ("version", "rev-parse", "config", "diff-tree"):
        assert _count(commands, verb) == 1, (verb, commands)
    # neither tree listed whole: the names checked are those of the trees that changed
    assert _count(commands, "ls-tree") == 0, commands
    cat_files = sorted(c[1:] for c in commands if c[0] == "cat-file")
    assert cat_files == [["--batch", "--buffer"], ["--batch-check=%(objectname) %(objecttype)"]]
    diff = next(c for c in commands if c[0] == "diff-tree")
    assert diff[-2:] == ["HEAD", "v2"], diff
    # diff-tree reads no index (a diff of two trees never looks at it)
    assert _index_reads(tmp_path / "trace.json", "diff-tree") == [], commands
    assert_same_as_git(ours, theirs)


def _index_reads(trace: Path, verb: str) -> list[str]:
    """The entries counts of the indexes ``git VERB`` read, from its trace2 events."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    sids = {e["sid"] for e in events if e.get("event") == "cmd_name" and e.get("name") == verb}
    return [
        e["value"]
        for e in events
        if e["sid"] in sids and e.get("key") == "read/cache_nr" and e.get("category") == "index"
    ]


def test_a_branch_shadowed_by_a_tag_is_diffed_by_its_trees(tmp_path: Path) -> None:
    # "v2" names a tag and a branch: git checkout takes the branch, while "HEAD v2" would
    # read the tag; the changes are asked by the trees the resolution found.
    src = _two_commits(tmp_path)
    git(src, "branch", "v2-branch", "HEAD~1")
    ours = clone_with_git(src, tmp_path / "ours")
    git(ours, "branch", "v2", "origin/v2-branch")  # a local branch v2 at HEAD~1, tag v2 at HEAD
    git(ours, "checkout", "-q", "--detach", "refs/tags/v2")
    theirs = clone_with_git(src, tmp_path / "theirs")
    git(theirs, "branch", "v2", "origin/v2-branch")
    git(theirs, "checkout", "-q", "--detach", "refs/tags/v2")
    commands = _run(tmp_path, "checkout", "-q", "-C", str(ours), "--writer", "git", "v2")
    diffs = [c for c in commands if c[0] == "diff-tree"]
    # the one by name, not taken; then by trees (the early listing of "v2", the tag's
    # tree, is not the target's either: gitswitch asks again)
    assert diffs[0][-2:] == ["HEAD", "v2"] and len(diffs) > 1, diffs
    assert all("HEAD" not in d for d in diffs[1:]), diffs
    git(theirs, "checkout", "-q", "v2")
    assert git(ours, "symbolic-ref", "HEAD") == b"refs/heads/v2\n"
    assert_same_as_git(ours, theirs)


def test_what_round_one_did_not_take_is_stopped(tmp_path: Path) -> None:
    src = _two_commits(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    before = set(os.listdir("/proc/self/fd"))
    round1.start("git", str(ours), "HEAD", dry_run=False, force=False, writer=None)
    assert round1.started(["git", "-C", str(ours), "--no-pager", *round1.LISTING, "HEAD"])
    procs = [s.proc for s in round1._started.values()]
    assert len(procs) == 5
    round1.discard()
    assert all(p.returncode is not None for p in procs)
    assert set(os.listdir("/proc/self/fd")) == before
    assert not round1.started(["git", "-C", str(ours), "--no-pager", *round1.LISTING, "HEAD"])


def test_a_process_taken_gives_git_s_output_and_status(tmp_path: Path) -> None:
    src = _two_commits(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    round1.start("git", str(ours), "no-such-rev", dry_run=False, force=False, writer=None)
    try:
        argv = ["git", "-C", str(ours), "--no-pager", *round1.LISTING, "no-such-rev"]
        got = round1.taken(argv, None)
        assert got is not None and got.returncode == 128 and b"no-such-rev" in got.stderr
        names = round1.target_names("no-such-rev")
        argv = ["git", "-C", str(ours), "--no-pager", *round1.RESOLVE]
        got = round1.taken(argv, round1.batch_input(names))
        assert got is not None and got.returncode == 0
        assert (
            got.stdout.split(b"\n")[0] == git(ours, "rev-parse", "HEAD^{tree}").strip() + b" tree"
        )
    finally:
        round1.discard()


def test_nothing_is_started_early_where_few_files_may_be_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # round 1's memory files would be held while the imports open theirs
    src = _two_commits(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    monkeypatch.setattr(round1.resource, "getrlimit", lambda what: (64, 64))
    round1.start("git", str(ours), "HEAD", dry_run=False, force=False, writer=None)
    assert not round1.started(["git", "-C", str(ours), "--no-pager", *round1.LISTING, "HEAD"])
    assert not round1._started
