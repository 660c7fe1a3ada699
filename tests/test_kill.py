"""Two runs at once, SIGKILL at any moment, forked writers that die with their
parent: the re-run of the same command always ends as git's checkout does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import GIT_ENV, assert_same_as_git, clone_with_git, git, make_repo, run_cli
from killhelp import (
    HANG_S,
    count_written,
    fuse_unavailable,
    kill_after,
    latencyfs_module,
    leftovers,
    start_cli,
)

from pcheckout.checkout import IN_PROGRESS
from pcheckout.errors import unable_to_lock_message

#: 3,000 files in 60 directories, a few executables and symlinks: long enough
#: to kill part way on tmpfs, short enough for a fast suite.
FILES: dict[bytes, bytes | tuple[str, bytes]] = {
    **{b"d%02d/f%05d" % (i % 60, i): b"x%d\n" % i * (50 + i % 300) for i in range(3000)},
    **{b"bin/run%d" % i: ("x", b"#!/bin/sh\necho %d\n" % i) for i in range(5)},
    **{b"links/l%d" % i: ("l", b"../d00/f%05d" % (i * 60)) for i in range(5)},
}


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = Path(
        __import__("tempfile").mkdtemp(
            prefix="pcheckout-kill-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
        )
    )
    mp = pytest.MonkeyPatch()
    for k, v in GIT_ENV.items():
        mp.setenv(k, v)
    try:
        yield make_repo(base, FILES)
    finally:
        mp.undo()
        __import__("shutil").rmtree(base, ignore_errors=True)


def _fresh(src: Path, name: str) -> Path:
    dest = src.parent / name
    git(src.parent, "clone", "-q", "--no-checkout", str(src), str(dest))
    return dest


@pytest.fixture(scope="module")
def theirs(src: Path) -> Path:
    return clone_with_git(src, src.parent / "theirs")


# -- two runs at once -----------------------------------------------------------------------
def test_two_checkouts_started_together_one_wins_the_other_harms_nothing(
    src: Path, theirs: Path
) -> None:
    overlapped = 0
    for round_ in range(4):
        ours = _fresh(src, f"together-{round_}")
        barrier = src.parent / f"go-{round_}"
        procs = [start_cli(["checkout", "-C", str(ours), "-q"], barrier) for _ in range(2)]
        time.sleep(0.3)  # both interpreters up and waiting
        barrier.touch()
        outs = [p.communicate(timeout=HANG_S) for p in procs]
        codes = sorted(p.returncode for p in procs)
        lock = os.fsencode(ours / ".git" / "index.lock")
        if codes == [0, 128]:
            overlapped += 1
            loser = outs[[p.returncode for p in procs].index(128)]
            assert loser[1] == f"pcheckout: error: {unable_to_lock_message(lock)}\n"
        else:  # one finished before the other began: the second is a no-op switch
            assert codes == [0, 0], outs
        assert not (ours / ".git" / "index.lock").exists()
        assert not (ours / ".git" / IN_PROGRESS).exists()
        assert_same_as_git(ours, theirs)
    assert overlapped, "the two runs never overlapped"


def test_a_checkout_while_git_holds_the_lock_fails_at_once_and_writes_nothing(
    src: Path,
) -> None:
    ours = _fresh(src, "git-holds")
    lock = ours / ".git" / "index.lock"
    lock.touch()  # git holds its lock empty until it commits; a crashed git leaves it so
    proc = run_cli("checkout", "-C", str(ours))
    assert proc.returncode == 128
    assert proc.stderr == f"pcheckout: error: {unable_to_lock_message(os.fsencode(lock))}\n"
    assert sorted(os.listdir(ours)) == [".git"]
    assert not (ours / ".git" / IN_PROGRESS).exists()
    assert lock.read_bytes() == b""
    lock.unlink()  # what the message tells the user to do
    proc = run_cli("checkout", "-C", str(ours))
    assert proc.returncode == 0, proc.stderr


def test_a_switch_holds_the_lock_too(src: Path, theirs: Path) -> None:
    ours = clone_with_git(src, src.parent / "switch-lock")
    lock = ours / ".git" / "index.lock"
    lock.touch()
    proc = run_cli("checkout", "-C", str(ours), "-f", "HEAD")
    assert proc.returncode == 128, proc.stderr
    lock.unlink()
    (ours / "d00" / "f00000").write_bytes(b"changed\n")
    proc = run_cli("checkout", "-C", str(ours), "-f", "HEAD")  # refresh runs under our lock
    assert proc.returncode == 0, proc.stderr
    assert_same_as_git(ours, theirs)


# -- SIGKILL ---------------------------------------------------------------------------------
def _kill_and_rerun(src: Path, theirs: Path, ours: Path, n: int, extra: list[str]) -> None:
    proc = start_cli(["checkout", "-C", str(ours), "-q", *extra])
    kill_after(proc, ours, n)
    assert leftovers(ours) == [], "a cat-file or writer outlived its killed parent"
    again = run_cli("checkout", "-C", str(ours), "-q", *extra)
    assert again.returncode == 0, again.stderr
    assert not (ours / ".git" / "index.lock").exists()
    assert not (ours / ".git" / IN_PROGRESS).exists()
    assert_same_as_git(ours, theirs)


@pytest.mark.parametrize(
    ("writers", "n"),
    [
        ("processes", 0),
        ("processes", 1),
        ("processes", 700),
        ("processes", 2500),
        ("processes", len(FILES)),
        ("threads", 1),
        ("threads", 1500),
        ("threads", 2990),
    ],
)
def test_sigkill_after_the_nth_write_then_rerun_equals_git(
    src: Path, theirs: Path, n: int, writers: str
) -> None:
    # On tmpfs the policy forks a writer per CPU (CPU-bound); more workers than
    # CPUs are threads.
    cpus = len(os.sched_getaffinity(0))
    n_workers = 2 if writers == "processes" else cpus + 1
    if writers == "processes" and cpus < 2:
        pytest.skip("one CPU: the policy never forks writers")
    extra = ["-j", str(n_workers), "--no-adapt"]
    ours = _fresh(src, f"kill-{writers}-{n}")
    _kill_and_rerun(src, theirs, ours, n, extra)


def test_sigkill_after_the_index_is_written(src: Path, theirs: Path) -> None:
    # Between the index rename and the marker's removal: the re-run is a resume
    # that proves every entry and writes nothing.
    ours = _fresh(src, "kill-late")
    proc = start_cli(["checkout", "-C", str(ours), "-q"])
    index = ours / ".git" / "index"
    deadline = time.monotonic() + HANG_S
    while proc.poll() is None and not index.exists():
        assert time.monotonic() < deadline
        time.sleep(0.0002)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    again = run_cli("checkout", "-C", str(ours), "-q")
    assert again.returncode == 0, again.stderr
    assert_same_as_git(ours, theirs)


def test_killed_twice_then_rerun(src: Path, theirs: Path) -> None:
    ours = _fresh(src, "kill-twice")
    for n in (500, 1800):
        proc = start_cli(["checkout", "-C", str(ours), "-q"])
        kill_after(proc, ours, n)
    assert count_written(ours) < len(FILES) + 1
    again = run_cli("checkout", "-C", str(ours), "-q")
    assert again.returncode == 0, again.stderr
    assert_same_as_git(ours, theirs)


# -- on the latency filesystem -------------------------------------------------------------
@pytest.fixture
def lfs_mount(src: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A fresh 0.2 ms latency mount per test.  (One mount for all of them made a
    later ``git clone`` onto it fail with EBADF on close after three killed
    runs: a latencyfs fault under killed clients, not yet found.)"""
    lfs = latencyfs_module()
    if lfs is None:
        pytest.skip(f"latencyfs needs FUSE: {fuse_unavailable()}")
    name = request.node.name.replace("[", "-").replace("]", "")
    backing, mnt = src.parent / f"{name}-backing", src.parent / f"{name}-mnt"
    # (param: the kernel's attribute timeout; 0: every lstat asks the daemon)
    lfs.mount(backing, mnt, latency_ms=0.2, cache_seconds=getattr(request, "param", 3.0))
    try:
        yield mnt
    finally:
        lfs.umount(mnt)


@pytest.mark.fuse
@pytest.mark.parametrize("n", [300, 2900])
def test_sigkill_on_the_latency_filesystem_then_rerun_equals_git(
    src: Path, theirs: Path, lfs_mount: Path, n: int
) -> None:
    ours = lfs_mount / f"kill-{n}"
    # --shared: the objects stay on tmpfs (alternates); only the work tree is on FUSE.
    git(src.parent, "clone", "-q", "--shared", "--no-checkout", str(src), str(ours))
    _kill_and_rerun(src, theirs, ours, n, [])


@pytest.mark.fuse
@pytest.mark.parametrize("lfs_mount", [3.0, 0.0], ids=["cached", "uncached"], indirect=True)
def test_kept_files_changed_after_the_kill_are_written_again_on_the_latency_filesystem(
    src: Path, theirs: Path, lfs_mount: Path
) -> None:
    # There the re-run proves the recorded entries: those the kernel answers from its
    # caches first (cached: the files were written a moment ago), else while it writes
    # the others (uncached: every lstat a round trip).  What changed since the kill must
    # still be found and written, with the unrecorded ones or in a second round.
    for attempt in range(3):
        ours = lfs_mount / f"kill-changed-{attempt}"
        git(src.parent, "clone", "-q", "--shared", "--no-checkout", str(src), str(ours))
        proc = start_cli(["checkout", "-C", str(ours), "-q"])
        # (counting the files through the uncached mount is slow: the kill can land after
        # the run's end, the marker gone; its changed files are then the user's, kept)
        if kill_after(proc, ours, 1500) and (ours / ".git" / IN_PROGRESS).exists():
            break
    else:
        pytest.skip("the checkout finished before the kill three times")
    on_disk = sorted(p for p in (ours / "d01").iterdir() if p.is_file())
    assert len(on_disk) >= 4
    same_size, chmod, gone, short = on_disk[:4]
    same_size.write_bytes(b"X" * len(same_size.read_bytes()))
    chmod.chmod(0o755)
    gone.unlink()
    os.truncate(short, 1)
    (ours / "bin").mkdir(exist_ok=True)
    again = run_cli("checkout", "-C", str(ours), "-q")
    assert again.returncode == 0, again.stderr
    assert_same_as_git(ours, theirs)


# -- forked writers die with their parent ----------------------------------------------------
#: ``python -c ORPHAN LATE``: a parent that forks a child and sleeps; the child asks for
#: its death signal at once, or ("late") only once its parent is gone (the race the
#: prctl cannot see: CI hit it, and the child lived its whole minute).
ORPHAN = r"""
import os, sys, time
from pcheckout.write import forked
die = forked.death_signal_setter()
parent = os.getpid()
pid = os.fork()
if pid == 0:
    os.close(1)  # (the test reads the parent's stdout to its end)
    if sys.argv[1] == "late":
        while os.getppid() == parent:
            time.sleep(0.001)
    die()
    time.sleep(60)
    os._exit(0)
print(pid, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("when", ["at-once", "late"])
def test_a_forked_writer_dies_with_its_parent(when: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", ORPHAN, when], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    deadline = time.monotonic() + HANG_S
    while True:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        # reparented to init (or a subreaper), it may linger as a zombie
        with open(f"/proc/{child}/stat") as f:
            if f.read().split(") ", 1)[1].startswith("Z"):
                break
        assert time.monotonic() < deadline, "the child outlived its parent"
        time.sleep(0.01)


# -- pcheckout clone -------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 1500])
def test_a_clone_killed_in_its_checkout_is_finished_by_checkout(
    src: Path, theirs: Path, n: int
) -> None:
    dest = src.parent / f"clone-kill-{n}"
    proc = start_cli(["clone", "-q", str(src), str(dest)])
    deadline = time.monotonic() + HANG_S
    while not (dest / ".git" / IN_PROGRESS).exists():  # git clone's phase is done
        assert proc.poll() is None, "the clone finished before its checkout could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.0005)
    assert kill_after(proc, dest, n)
    assert leftovers(dest) == []
    again = run_cli("checkout", "-C", str(dest), "-q")
    assert again.returncode == 0, again.stderr
    assert_same_as_git(dest, theirs)
