"""Writers in forked processes (forked.py), compared with git, with faults injected."""

from __future__ import annotations

import errno
import faulthandler
import os
import signal
import threading
import time
import warnings
from pathlib import Path

import pytest
from faultkit import (
    FILES,
    HANG_S,
    assert_finishes,
    assert_nothing_partial,
    no_children,
    standin_spawn,
)
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, git, make_repo

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.errors import GitError, MissingObjectError, PcheckoutError, WriteError
from pcheckout.write import forked


@pytest.fixture
def processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small trees are split too; the tests ask for processes (``processes=True``) whatever
    the filesystem and the CPUs are."""
    monkeypatch.setattr(forked, "MIN_ENTRIES_PER_PROCESS", 5)
    monkeypatch.setattr(forked, "MIN_ENTRIES", 10)


ODD: dict[bytes, bytes | tuple[str, bytes]] = {
    **{
        b"dir%d/sub%d/f%03d.txt" % (i % 7, i % 3, i): b"line %d\n" % i * (i % 5) for i in range(120)
    },
    b"tab\tname": b"t\n",
    b"new\nline": b"n\n",
    b"back\\slash": b"b\n",
    b"latin-\xe9": b"\xff\xfe\n",
    b"empty": b"",
    b"big.bin": bytes(range(256)) * 8192,  # 2 MiB: streamed
    b"run.sh": ("x", b"#!/bin/sh\n"),
    b"link": ("l", b"dir0/sub0/f000.txt"),
    b"dangling": ("l", b"nowhere"),
}


def test_forked_checkout_matches_git(tmp_path: Path, processes: None) -> None:
    src = make_repo(tmp_path, ODD)
    sub = git(src, "rev-parse", "HEAD").decode().strip()
    git(src, "update-index", "--add", "--cacheinfo", f"160000,{sub},mod/ule")
    git(src, "commit", "-qm", "gitlink")
    ours = clone_no_checkout(src, tmp_path / "ours")
    with warnings.catch_warnings(record=True) as caught:
        # Recorded, not raised: CPython drops the fork warning an "error" filter makes.
        warnings.simplefilter("always")
        result = checkout(CheckoutOptions(directory=ours, workers=4, processes=True))
    assert [str(w.message) for w in caught] == []
    assert result.processes and result.files == len(ODD) + 1
    assert result.plan.processes
    assert no_children() == []
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs"))


def test_forked_switch_matches_git(tmp_path: Path, processes: None) -> None:
    src = make_repo(tmp_path, ODD)
    git(src, "tag", "v1")
    for i in range(0, 120, 3):
        (src / f"dir{i % 7}" / f"sub{i % 3}" / f"f{i:03d}.txt").write_bytes(b"changed %d\n" % i)
    git(src, "commit", "-qam", "v2")
    theirs = clone_with_git(src, tmp_path / "theirs", rev="v1")
    git(theirs, "checkout", "-q", "main")
    ours = clone_with_git(src, tmp_path / "ours", rev="v1")
    result = checkout(CheckoutOptions(directory=ours, rev="main", workers=2, processes=True))
    assert result.mode == "switch" and result.processes and result.written == 40
    assert_same_as_git(ours, theirs)


def test_a_crash_in_a_child_is_retried_there(tmp_path: Path, processes: None) -> None:
    src = make_repo(tmp_path, FILES)
    ours = clone_no_checkout(src, tmp_path / "ours")
    spawn = standin_spawn(tmp_path, "die", 4, once=True)
    result = checkout(CheckoutOptions(directory=ours, workers=2, spawn=spawn, processes=True))
    assert result.processes and (tmp_path / "flag-die-4").exists()
    assert no_children() == []
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs"))


def test_an_error_in_a_child_reaches_the_user_as_itself(tmp_path: Path, processes: None) -> None:
    src = make_repo(tmp_path, FILES)
    ours = clone_no_checkout(src, tmp_path / "ours")
    spawn = standin_spawn(tmp_path, "missing", 0, once=True)
    with pytest.raises(MissingObjectError) as info:
        checkout(CheckoutOptions(directory=ours, workers=2, spawn=spawn, processes=True))
    # Whichever child asks first meets the fault: its share's first entry.
    import re

    found = re.fullmatch(
        r"object ([0-9a-f]{40}) for (\S+) is missing from the repository", str(info.value)
    )
    assert found, str(info.value)
    assert git(src, "rev-parse", f"HEAD:{found[2]}").decode().strip() == found[1]
    assert no_children() == []
    assert_nothing_partial(ours, FILES)
    assert_finishes(ours, src, tmp_path)  # the re-run resumes (in processes again)


def test_threads_when_another_thread_runs(tmp_path: Path, processes: None) -> None:
    src = make_repo(tmp_path, ODD)
    ours = clone_no_checkout(src, tmp_path / "ours")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        result = checkout(CheckoutOptions(directory=ours, workers=2, processes=True))
    finally:
        stop.set()
        other.join()
    assert result.plan.processes and not result.processes  # planned, but not safe to fork
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs"))


def test_threads_beside_a_thread_python_does_not_know(tmp_path: Path, processes: None) -> None:
    """faulthandler's watchdog is a C thread (threading does not list it): no fork beside it
    either, so no "multi-threaded, use of fork() may lead to deadlocks" (Python 3.12+)."""
    src = make_repo(tmp_path, ODD)
    ours = clone_no_checkout(src, tmp_path / "ours")
    faulthandler.dump_traceback_later(HANG_S * 30)
    try:
        assert threading.active_count() == 1
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = checkout(CheckoutOptions(directory=ours, workers=2, processes=True))
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert [str(w.message) for w in caught] == []
    assert result.plan.processes and not result.processes  # planned, but not safe to fork
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs"))


@pytest.mark.parametrize(
    "exc",
    [
        WriteError(b"a/b", OSError(errno.ENOSPC, "No space left on device")),
        GitError("git failed", stderr=b"fatal: bad object\n"),
        MissingObjectError("object x is missing"),
    ],
)
def test_errors_cross_the_pipe_with_class_message_and_attributes(exc: PcheckoutError) -> None:
    back = forked._unpickle_error(forked._pickle_error(exc))
    assert type(back) is type(exc) and str(back) == str(exc)
    assert {k: v for k, v in vars(back).items()} == vars(exc)
    assert back.exit_code == exc.exit_code


def test_other_exceptions_become_internal_errors() -> None:
    back = forked._unpickle_error(forked._pickle_error(ZeroDivisionError("x")))
    assert type(back) is PcheckoutError and "internal error" in str(back)


def test_ctrl_c_to_the_process_group_stops_every_process(
    big_repo: tuple[Path, dict[bytes, bytes]],
) -> None:
    """A terminal's Ctrl-C reaches the parent and every child at once."""
    import subprocess
    import sys

    from faultkit import our_processes

    src, files = big_repo
    for attempt in range(3):
        ours = src.parent / f"ours-group-{attempt}"
        git(src.parent, "clone", "-q", "--no-checkout", str(src), str(ours))
        cli = subprocess.Popen(
            [sys.executable, "-m", "pcheckout", "checkout", "-C", str(ours), "-j", "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + HANG_S
        while not any(n != ".git" for n in os.listdir(ours)) and cli.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.002)
        os.killpg(cli.pid, signal.SIGINT)
        _out, err = cli.communicate(timeout=HANG_S)
        if (ours / ".git" / "index").exists():
            # Finished before the signal, or it came once the index was in place (a
            # loaded machine can hold this loop back): the checkout is whole.
            assert git(ours, "status", "--porcelain") == b""
            continue
        if cli.returncode != 0:
            break
    else:
        pytest.skip("the checkout finished before the signal three times")
    assert cli.returncode == 130, err
    assert err == (
        f"pcheckout: error: interrupted by SIGINT; to finish, run: pcheckout checkout -C {ours}\n"
    )
    assert our_processes(ours) == []
    assert not (ours / ".git" / "index").exists()
    assert_nothing_partial(ours, files)


#: A cat-file that passes git's answers on slowly (16 KiB every 10 ms) and ignores the
#: terminal's signals, as does its git (a session of its own): a large blob is still
#: being written when Ctrl-C comes, and only the writer's kill() stops the stream.
TRICKLE = r"""
import ctypes, os, signal, subprocess, sys, threading, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
die = lambda: ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
git = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       preexec_fn=die, start_new_session=True)
def pump():
    while data := os.read(0, 65536):
        git.stdin.write(data)
        git.stdin.flush()
    git.stdin.close()
threading.Thread(target=pump, daemon=True).start()
while chunk := git.stdout.read1(16384):
    os.write(1, chunk)
    time.sleep(0.01)
"""
#: The run under test, in a process of its own: forked writers whose cat-files are
#: slow to kill, so that the parent's SIGTERM reaches a child in the middle of stopping.
DRIVER = r"""
import signal, subprocess, sys, time
from pathlib import Path
from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.cli.main import _on_sigterm
from pcheckout.write import forked
forked.MIN_ENTRIES_PER_PROCESS, forked.MIN_ENTRIES = 5, 10
signal.signal(signal.SIGTERM, _on_sigterm)
class SlowToKill(subprocess.Popen):
    def kill(self):
        time.sleep(0.5)
        super().kill()
def spawn(argv, **kw):
    return SlowToKill([sys.executable, "-c", sys.argv[2], *argv], **kw)
checkout(CheckoutOptions(directory=Path(sys.argv[1]), workers=2, processes=True, spawn=spawn))
"""


def test_the_parents_sigterm_after_ctrl_c_leaves_no_file_cut_short(tmp_path: Path) -> None:
    """Ctrl-C reaches the parent and the children; the parent then sends each child SIGTERM,
    which came while a child was stopping its cat-file and cut its clean-up short: the
    file its writer thread was streaming stayed on disk, partial."""
    import subprocess
    import sys

    from faultkit import our_processes

    files = {
        b"a/big": bytes(range(256)) * 8192,  # 2 MiB: streamed, ~1.3 s through TRICKLE
        **{b"b/f%02d" % i: b"%d\n" % i for i in range(20)},
        b"c/big": bytes(range(255, -1, -1)) * 8192,
        **{b"d/f%02d" % i: b"%d\n" % i for i in range(20)},
    }
    src = make_repo(tmp_path, files)
    ours = clone_no_checkout(src, tmp_path / "ours")
    run = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(ours), TRICKLE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    big = ours / "a" / "big"
    deadline = time.monotonic() + HANG_S
    while not (big.exists() and big.stat().st_size > 0):
        assert run.poll() is None and time.monotonic() < deadline, run.stderr
        time.sleep(0.002)
    os.killpg(run.pid, signal.SIGINT)
    run.communicate(timeout=HANG_S)
    assert run.returncode != 0
    assert our_processes(ours) == []
    assert_nothing_partial(ours, files)
