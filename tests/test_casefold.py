"""Case-insensitive destinations: paths that fold together, written as git writes them.

The collision model (decide/collisions.py) is checked on names; then both writers are run
on a case-insensitive, case-preserving FUSE mount (scripts/latencyfs.py ``casefold``) next
to git itself on the same mount: the files on disk and their spelling, the index, git's
warning, the exit code and ``git status`` afterwards."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import clone_no_checkout, git, make_repo, run_cli, snapshot, write_tree_files
from killhelp import fuse_unavailable, latencyfs_module

from pcheckout.decide.collisions import Step, clashing, plan, warning
from pcheckout.git.tree import Entry

#: README/readme, a directory spelled twice (A/x meets a/x, a/y goes into A), a file that
#: a directory replaces (F, then f/g), and a path nothing meets. Spellings that meet differ
#: in size, so ``git status`` sees the lost one modified by its size alone: with equal sizes
#: a reused inode number and a timestamp within one clock tick leave the stat data equal and
#: the answer to the moment the files were written (git's checkout too).
FILES = {
    b"README": b"upper case\n",
    b"readme": b"lower\n",
    b"A/x": b"AX upper\n",
    b"a/x": b"ax\n",
    b"a/y": b"ay\n",
    b"F": b"file\n",
    b"f/g": b"fg\n",
    b"zz": b"zz\n",
}


def _entries(paths: list[bytes]) -> list[Entry]:
    return [Entry(p, 0o100644, "0" * 40, 1) for p in sorted(paths)]


def test_model_replays_gits_sequential_checkout() -> None:
    entries = _entries(list(FILES))
    found = plan(entries, range(len(entries)), ignore_case=True)
    assert found is not None
    assert found.collided == [b"A/x", b"a/x", b"README", b"readme"]  # fspathcmp, stable
    assert found.lost == [b"A/x", b"F", b"README"]
    by_path = {entries[i].path: r for i, r in found.rounds.items()}
    assert by_path == {b"a/x": 2, b"f/g": 2, b"readme": 2}
    assert found.steps == [
        Step(1, "mkdir", b"A"),
        Step(2, "unlink", b"A/x"),
        Step(2, "unlink", b"F"),
        Step(2, "mkdir", b"f"),
        Step(2, "unlink", b"README"),
    ]
    assert found.involved == 7  # zz is no one's business
    assert warning(found.collided).splitlines()[-4:] == ["  'A/x'", "  'a/x'", "  'README'",
                                                        "  'readme'"]  # fmt: skip


def test_model_chains_and_directories_replaced() -> None:
    entries = _entries([b"README", b"Readme", b"readme", b"A/sub/x", b"a"])
    found = plan(entries, range(len(entries)), ignore_case=True)
    assert found is not None
    # A/sub/x is written, then the file a removes the directory A with it
    assert found.lost == [b"A/sub/x", b"README", b"Readme"]
    assert {entries[i].path: r for i, r in found.rounds.items()} == {
        b"a": 2,
        b"Readme": 2,
        b"readme": 3,
    }
    assert [s for s in found.steps if s.op == "rmtree"] == [Step(2, "rmtree", b"A")]
    # git marks a file that found a directory alone: no entry wrote the directory
    assert found.collided == [b"a", b"README", b"Readme", b"readme"]


def test_model_without_ignorecase_marks_by_stat_only() -> None:
    entries = _entries([b"A/x", b"a/x", b"B", b"b"])
    found = plan(entries, range(len(entries)), ignore_case=False)
    assert found is not None
    assert found.collided == [b"A/x", b"B", b"a/x", b"b"]  # strcmp order


def test_model_of_a_switch_starts_from_the_kept_files() -> None:
    """A switch's new paths meet the files of the entries it keeps: each replaces what it
    finds, before the first round (round 1), a directory spelled otherwise is used."""
    from pcheckout.decide.collisions import plan_switch

    kept = [b"A/x", b"F", b"readme", b"zz"]
    found = plan_switch(kept, _entries([b"README", b"a/y", b"f/g"]), True)
    assert found is not None
    assert found.steps == [
        Step(1, "unlink", b"readme"),
        Step(1, "unlink", b"F"),
        Step(1, "mkdir", b"f"),
    ]
    assert found.rounds == {} and found.lost == []
    assert plan_switch([b"zz"], _entries([b"README"]), True) is None


def test_nothing_folds_nothing_to_do() -> None:
    paths = [b"a/b", b"a/c", b"B/x", b"c"]
    assert clashing(paths) == set()
    assert plan(_entries(paths), range(4), ignore_case=True) is None
    assert clashing([b"Doc/a", b"doc/b"]) == {b"doc"}


def _clashing_by_definition(paths: list[bytes]) -> set[bytes]:
    names = set(paths)
    for p in paths:
        parts = p.split(b"/")
        names.update(b"/".join(parts[:k]) for k in range(1, len(parts)))
    spellings: dict[bytes, set[bytes]] = {}
    for n in names:
        spellings.setdefault(n.lower(), set()).add(n)
    return {k for k, v in spellings.items() if len(v) > 1}


@pytest.mark.parametrize(
    "paths",
    [
        [b"a/b", b"c"],
        [b"a/B", b"a/c", b"x.S", b"y.s"],  # capitals that fold onto nothing
        [b"x.S", b"x.s"],  # a capitalised file onto a plain one
        [b"X.s", b"x.S"],  # two capitalised spellings
        [b"Doc/a", b"doc/b"],  # a capitalised directory onto a plain one
        [b"D/x", b"E/D", b"e/d/y"],  # a file onto a directory, deeper
        [b"q/A", b"q/a/z"],  # a capitalised file onto a plain directory
        [b"\xc9/a", b"\xe9/a", b"M\xc9", b"m\xc9"],  # only ASCII folds
        [b"a" * 200 + b"B", b"a" * 201],
    ],
)
def test_clashing_is_every_name_spelled_two_ways(paths: list[bytes]) -> None:
    assert clashing(sorted(paths)) == _clashing_by_definition(paths)


# -- on a case-insensitive mount, against git ----------------------------------------------

lfs = latencyfs_module()


@pytest.fixture
def mnt(tmp_path: Path) -> Iterator[Path]:
    """A case-insensitive, case-preserving mount (0 ms)."""
    if lfs is None:
        pytest.skip(f"a case-insensitive mount needs FUSE: {fuse_unavailable()}")
    with lfs.mounted(tmp_path / "backing", tmp_path / "mnt", latency_ms=0.0, casefold=True) as m:
        yield m


def _index(repo: Path) -> tuple[bytes, list[bytes]]:
    """``ls-files -s -t`` and each entry's size in the index."""
    staged = git(repo, "ls-files", "-s", "-t")
    debug = git(repo, "ls-files", "--debug").splitlines()
    sizes = [line.split(b"size: ")[1].split()[0] for line in debug if b"size: " in line]
    return staged, sizes


def _same(ours: Path, theirs: Path) -> None:
    assert snapshot(ours) == snapshot(theirs)  # names as spelled on disk, bytes
    assert _index(ours) == _index(theirs)
    status = git(theirs, "status", "--porcelain")
    assert status == b" M A/x\n D F\n M README\n"
    assert git(ours, "status", "--porcelain") == status


@pytest.mark.fuse
@pytest.mark.parametrize("writer", ["pcheckout", "git"])
def test_fresh_checkout_as_git_checks_out(mnt: Path, tmp_path: Path, writer: str) -> None:
    src = make_repo(tmp_path, FILES)
    theirs = clone_no_checkout(src, mnt / "theirs")
    ours = clone_no_checkout(src, mnt / "ours")
    assert git(ours, "config", "core.ignorecase") == b"true\n"  # git's own probe
    want = subprocess.run(["git", "-C", theirs, "checkout", "-q", "-f", "main"],
                          capture_output=True)  # fmt: skip
    proc = run_cli("checkout", "-C", str(ours), env={"PCHECKOUT_WRITER": writer})
    assert want.returncode == proc.returncode == 0, proc.stderr
    assert want.stderr == b""
    assert "collided" not in proc.stderr  # git's checkout says nothing
    _same(ours, theirs)
    assert sorted(p.name for p in ours.iterdir()) == [".git", "A", "f", "readme", "zz"]


@pytest.mark.fuse
@pytest.mark.parametrize("writer", ["pcheckout", "git"])
def test_clone_warns_as_git_clone(mnt: Path, tmp_path: Path, writer: str) -> None:
    src = make_repo(tmp_path, FILES)
    want = subprocess.run(["git", "clone", "-q", str(src), str(mnt / "theirs")],
                          capture_output=True, text=True)  # fmt: skip
    proc = run_cli("clone", "-q", str(src), str(mnt / "ours"), env={"PCHECKOUT_WRITER": writer})
    assert want.returncode == proc.returncode == 0, proc.stderr
    assert "warning: the following paths have collided" in want.stderr
    assert proc.stderr == want.stderr
    _same(mnt / "ours", mnt / "theirs")


@pytest.mark.fuse
def test_dry_run_reports_the_collisions(mnt: Path, tmp_path: Path) -> None:
    src = make_repo(tmp_path, FILES)
    ours = clone_no_checkout(src, mnt / "ours")
    proc = run_cli("checkout", "-C", str(ours), "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    import json

    got = json.loads(proc.stdout)
    assert got["collided"] == ["A/x", "a/x", "README", "readme"]
    assert got["replaced"] == ["A/x", "F", "README"]
    assert sorted(p.name for p in ours.iterdir()) == [".git"]
    text = run_cli("checkout", "-C", str(ours), "--dry-run").stdout
    assert "collide" in text


@pytest.mark.parametrize("writer", ["pcheckout", "git"])
def test_case_sensitive_destination_writes_every_path(tmp_path: Path, writer: str) -> None:
    src = make_repo(tmp_path, FILES)
    ours = clone_no_checkout(src, tmp_path / "ours", {"core.ignorecase": "true"})
    proc = run_cli("checkout", "-C", str(ours), env={"PCHECKOUT_WRITER": writer})
    assert proc.returncode == 0, proc.stderr
    assert git(ours, "status", "--porcelain") == b""
    assert (ours / "README").read_bytes() == b"upper case\n"


#: A tree and commits beside it, each a switch git's checkout makes on a destination that
#: ignores case: a name renamed in case only, a new spelling of a kept file, a directory
#: where a kept file is spelled otherwise, a new path in a directory spelled otherwise,
#: both spellings changed at once.
BASE = {b"readme": b"lower\n", b"F": b"file\n", b"A/x": b"ax\n", b"zz": b"zz\n"}
SWITCHES = {
    "renamed": {b"README": b"lower\n", b"F": b"file\n", b"A/x": b"ax\n", b"zz": b"zz\n"},
    "spelled": {**BASE, b"README": b"UPPER case\n"},
    "dir": {**BASE, b"f/g": b"fg\n"},
    "into": {**BASE, b"a/y": b"ay\n"},
    "both": {**BASE, b"README": b"new upper\n", b"readme": b"lower changed\n"},
    "collided": FILES,
}


def _switches_repo(tmp_path: Path) -> Path:
    src = make_repo(tmp_path, BASE)
    for name, files in SWITCHES.items():
        git(src, "checkout", "-q", "-b", name, "main")
        git(src, "rm", "-q", "-r", ".")
        write_tree_files(src, files)
        git(src, "add", "-A")
        git(src, "commit", "-q", "-m", name)
    git(src, "checkout", "-q", "main")
    return src


@pytest.mark.fuse
@pytest.mark.parametrize("writer", ["pcheckout", "git"])
@pytest.mark.parametrize(
    ("start", "rev"),
    [(s, r) for r in SWITCHES for s in ("main",)]
    + [("renamed", "main"), ("dir", "main"), ("collided", "main"), ("collided", "both")],
)
def test_switch_as_git_switches(
    mnt: Path, tmp_path: Path, writer: str, start: str, rev: str
) -> None:
    """git accepts a file found under another spelling of a clean tracked entry (unpack-trees.c
    check_ok_to_remove -> icase_exists), then writes in index order, each path replacing
    what it finds (entry.c checkout_entry); the engine refused ("untracked working tree
    files") or failed on its exclusive create."""
    src = _switches_repo(tmp_path)
    theirs = clone_no_checkout(src, mnt / "theirs")
    ours = clone_no_checkout(src, mnt / "ours")
    for w in (theirs, ours):
        git(w, "checkout", "-q", start)
    want = subprocess.run(["git", "-C", theirs, "checkout", "-q", rev], capture_output=True)
    proc = run_cli("checkout", "-q", "-C", str(ours), rev, env={"PCHECKOUT_WRITER": writer})
    assert (proc.returncode == 0) == (want.returncode == 0), (proc.stderr, want.stderr)
    assert snapshot(ours) == snapshot(theirs)  # names as spelled on disk, bytes
    assert _index(ours) == _index(theirs)
    assert git(ours, "status", "--porcelain") == git(theirs, "status", "--porcelain")
    assert git(ours, "rev-parse", "HEAD") == git(theirs, "rev-parse", "HEAD")


@pytest.mark.parametrize("writer", ["pcheckout", "git"])
def test_a_probe_a_killed_run_left_is_removed(tmp_path: Path, writer: str) -> None:
    # A run killed between the case probe's create and its unlink leaves the probe in the
    # work tree; the next run that writes removes it, and nothing else of the user's.
    src = make_repo(tmp_path, FILES)
    ours = clone_no_checkout(src, tmp_path / "ours")
    (ours / ".pcheckout-CaseProbe-12345").write_bytes(b"")
    (ours / ".pcheckout-CaseProbe-notapid").write_bytes(b"")  # not a probe's name
    (ours / ".pcheckout-CaseProbe-777").write_bytes(b"kept: not empty\n")
    dry = run_cli("checkout", "-C", str(ours), "--dry-run", env={"PCHECKOUT_WRITER": writer})
    assert dry.returncode == 0, dry.stderr
    assert (ours / ".pcheckout-CaseProbe-12345").exists()  # a dry run changes nothing
    proc = run_cli("checkout", "-C", str(ours), env={"PCHECKOUT_WRITER": writer})
    assert proc.returncode == 0, proc.stderr
    assert not (ours / ".pcheckout-CaseProbe-12345").exists()
    assert (ours / ".pcheckout-CaseProbe-notapid").exists()
    assert (ours / ".pcheckout-CaseProbe-777").read_bytes() == b"kept: not empty\n"
    untracked = git(ours, "status", "--porcelain").decode().splitlines()
    assert sorted(untracked) == ["?? .pcheckout-CaseProbe-777", "?? .pcheckout-CaseProbe-notapid"]
