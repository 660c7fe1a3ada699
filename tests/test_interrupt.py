"""An interrupted run (SIGKILL, SIGINT, SIGTERM; a switch or a fresh checkout; either
writer) is finished by the command its message prints, to exactly git's result; another
REV after an interruption ends exactly at that REV, nothing of the first left behind;
a file changed by the user after the interruption is a local change, as git protects
one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import (
    assert_same_as_git,
    clone_with_git,
    git,
    make_repo,
    run_cli,
    snapshot,
    write_tree_files,
)
from killhelp import HANG_S, leftovers

from pcheckout.decide.export import EXPORT_MARKER
from pcheckout.session import IN_PROGRESS

#: ``python -c STOPPER WHAT N SIG ARGS...``: the CLI, stopped by signal SIG when it writes
#: the N-th work-tree file (WHAT "write"), removes the N-th path (WHAT "delete") or writes
#: the N-th piece of the new index (WHAT "index": pieces of 256 bytes); KILL kills its whole
#: process group (git's and the writers' processes too).
STOPPER = r"""
import os, signal, sys, threading, time
what, n, sig = sys.argv[1], int(sys.argv[2]), sys.argv[3]
count = [0]
lock = threading.Lock()

def stop():
    with lock:
        count[0] += 1
        if count[0] != n:
            return
    if sig == "KILL":
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), getattr(signal, "SIG" + sig))
    time.sleep(0.5)

def in_work_tree(name):
    return b"/.git/" not in name and not name.startswith(b"pipe:")

import pcheckout.fdio as fdio
import pcheckout.git.index as index
if what == "index":
    index.INDEX_PIECE, index._ROWS_PER_LOOK = 256, 1
real_write_all = fdio.write_all
def write_all(fd, data):
    if what in ("write", "index"):
        try:
            name = os.fsencode(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            name = b"pipe:"
        if in_work_tree(name) if what == "write" else name.endswith(b"/.git/index.pcheckout-new"):
            stop()
    return real_write_all(fd, data)
fdio.write_all = write_all

real_unlink = os.unlink
def unlink(path, *a, **k):
    if what == "delete" and in_work_tree(os.fsencode(path)):
        stop()
    return real_unlink(path, *a, **k)
os.unlink = unlink

from pcheckout.cli.main import main
sys.exit(main(sys.argv[4:]))
"""

A = {
    b"keep.txt": b"same in every commit\n",
    b"mod.txt": b"A's version\n",
    b"gone/one.txt": b"only in A\n",
    b"gone/two.txt": b"only in A too\n",
    b"tool.sh": b"#!/bin/sh\necho A\n",
    b"link": ("l", b"keep.txt"),
    **{b"many/f%03d.txt" % i: b"A %d\n" % i for i in range(40)},
}
B = {
    b"keep.txt": b"same in every commit\n",
    b"mod.txt": b"B's version, longer than A's\n",
    b"tool.sh": ("x", b"#!/bin/sh\necho B\n"),
    b"link": ("l", b"mod.txt"),
    b"new/dir/added.txt": b"only in B\n",
    **{b"many/f%03d.txt" % i: b"B %d\n" % i for i in range(40)},
    **{b"more/g%03d.txt" % i: b"B only %d\n" % i for i in range(20)},
}
C = {
    b"keep.txt": b"same in every commit\n",
    b"mod.txt": b"C's version\n",
    b"gone/one.txt": b"back in C\n",
    b"tool.sh": b"#!/bin/sh\necho C\n",
    **{b"many/f%03d.txt" % i: b"C %d\n" % i for i in range(0, 40, 2)},
}


def _commit(repo: Path, files: dict[bytes, bytes | tuple[str, bytes]], branch: str) -> None:
    git(repo, "checkout", "-q", "-b", branch, "main")
    git(repo, "rm", "-q", "-r", ".")
    write_tree_files(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", branch)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path, A)
    _commit(repo, B, "b")
    _commit(repo, C, "c")
    git(repo, "checkout", "-q", "main")
    return repo


def _stopped(
    ours: Path, args: list[str], what: str, n: int, sig: str
) -> subprocess.CompletedProcess[str]:
    """The CLI run in ``ours``, stopped at its ``n``-th write or delete."""
    cmd = [sys.executable, "-c", STOPPER, what, str(n), sig, *_command(ours, args)]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=HANG_S, start_new_session=True
    )
    assert leftovers(ours) == []
    return proc


def _command(ours: Path, args: list[str]) -> list[str]:
    """``checkout -C OURS ARGS``, or ARGS as they are if they are a command of their own."""
    return args if args[0] in ("export", "clone") else ["checkout", "-C", str(ours), *args]


def _finish_command(err: str) -> list[str]:
    """The command the interruption's message says finishes the run."""
    assert "to finish, run: pcheckout checkout " in err, err
    line = err.strip().splitlines()[-1]
    words = line.split("to finish, run: ", 1)[1].split()
    assert words[:2] == ["pcheckout", "checkout"]
    return words[2:]


WRITERS = ["pcheckout", "git"]


@pytest.mark.parametrize(
    ("what", "n", "sig"),
    [
        ("write", 1, "KILL"),
        ("write", 30, "KILL"),
        ("write", 55, "INT"),
        ("delete", 2, "KILL"),
        ("write", 10, "TERM"),
    ],
)
def test_an_interrupted_switch_is_finished_by_the_command_it_prints(
    src: Path, tmp_path: Path, what: str, n: int, sig: str
) -> None:
    ours = clone_with_git(src, tmp_path / "ours", rev="main")
    proc = _stopped(ours, ["--writer", "pcheckout", "-j", "4", "b"], what, n, sig)
    assert proc.returncode != 0, proc.stderr
    assert (ours / ".git" / IN_PROGRESS).exists()
    if sig != "KILL":
        assert proc.returncode == 128 + getattr(signal, "SIG" + sig), proc.stderr
        again = _finish_command(proc.stderr)
        assert again == ["-C", str(ours), "b"]
    again = run_cli("checkout", "-C", str(ours), "b")
    assert again.returncode == 0, again.stderr
    assert not (ours / ".git" / IN_PROGRESS).exists()
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs", rev="b"))
    assert git(ours, "reflog", "-1", "--format=%gs").startswith(b"checkout: moving from main to b")


@pytest.mark.parametrize("writer", WRITERS)
def test_another_rev_after_an_interrupted_switch_leaves_nothing_of_the_first(
    src: Path, tmp_path: Path, writer: str
) -> None:
    ours = clone_with_git(src, tmp_path / "ours", rev="main")
    proc = _stopped(ours, ["--writer", "pcheckout", "-j", "2", "b"], "write", 35, "KILL")
    assert proc.returncode != 0
    again = run_cli("checkout", "-C", str(ours), "--writer", writer, "c")
    assert again.returncode == 0, again.stderr
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs", rev="c"))
    assert not (ours / "more").exists() and not (ours / "new").exists()


def test_switching_back_after_an_interrupted_switch_restores_where_it_began(
    src: Path, tmp_path: Path
) -> None:
    ours = clone_with_git(src, tmp_path / "ours", rev="main")
    assert _stopped(ours, ["-j", "2", "b"], "write", 20, "KILL").returncode != 0
    # interrupted again, on the way to c
    assert _stopped(ours, ["-j", "2", "c"], "write", 5, "KILL").returncode != 0
    again = run_cli("checkout", "-C", str(ours), "main")
    assert again.returncode == 0, again.stderr
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs", rev="main"))


def test_a_change_made_after_the_interruption_is_a_local_change(src: Path, tmp_path: Path) -> None:
    ours = clone_with_git(src, tmp_path / "ours", rev="main")
    assert _stopped(ours, ["-j", "2", "b"], "write", 40, "KILL").returncode != 0
    (ours / "mod.txt").write_bytes(b"the user's own words\n")
    refused = run_cli("checkout", "-C", str(ours), "c")
    assert refused.returncode == 1
    assert "mod.txt" in refused.stderr and "local changes" in refused.stderr
    assert (ours / "mod.txt").read_bytes() == b"the user's own words\n"
    assert (ours / ".git" / IN_PROGRESS).exists()  # still to be finished
    forced = run_cli("checkout", "-C", str(ours), "--force", "c")
    assert forced.returncode == 0, forced.stderr
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs", rev="c"))


def test_an_untracked_file_made_after_the_interruption_is_kept(src: Path, tmp_path: Path) -> None:
    ours = clone_with_git(src, tmp_path / "ours", rev="main")
    assert _stopped(ours, ["-j", "2", "b"], "write", 30, "KILL").returncode != 0
    (ours / "notes.txt").write_bytes(b"mine\n")
    again = run_cli("checkout", "-C", str(ours), "b")
    assert again.returncode == 0, again.stderr
    assert (ours / "notes.txt").read_bytes() == b"mine\n"
    (ours / "notes.txt").unlink()
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs", rev="b"))


@pytest.mark.parametrize("writer", WRITERS)
def test_another_rev_after_an_interrupted_fresh_checkout_leaves_nothing_of_the_first(
    src: Path, tmp_path: Path, writer: str
) -> None:
    ours = tmp_path / "ours"
    git(tmp_path, "clone", "-q", "--no-checkout", str(src), str(ours))
    assert _stopped(ours, ["-j", "2", "b"], "write", 50, "KILL").returncode != 0
    assert (ours / "more").exists()
    again = run_cli("checkout", "-C", str(ours), "--writer", writer, "c")
    assert again.returncode == 0, again.stderr
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs", rev="c"))


@pytest.mark.parametrize(("n", "sig"), [(2, "INT"), (3, "KILL")])
def test_a_fresh_checkout_interrupted_while_its_index_is_written_is_finished(
    src: Path, tmp_path: Path, n: int, sig: str
) -> None:
    """The engine writes a fresh checkout's index as it encodes it, a piece at a time: an
    interruption between two pieces leaves the index unwritten, and the command printed
    finishes the checkout as git's."""
    ours = tmp_path / "ours"
    git(tmp_path, "clone", "-q", "--no-checkout", str(src), str(ours))
    stopped = _stopped(ours, ["--writer", "pcheckout", "b"], "index", n, sig)
    assert stopped.returncode != 0
    assert not (ours / ".git" / "index").exists()
    assert (ours / ".git" / IN_PROGRESS).exists()
    args = ["b"] if sig == "KILL" else _finish_command(stopped.stderr)
    again = run_cli("checkout", "-C", str(ours), *args)
    assert again.returncode == 0, again.stderr
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs", rev="b"))


@pytest.mark.parametrize("writer", ["pcheckout", "git"])
def test_an_interruption_during_the_last_clean_up_names_the_command_that_finishes(
    src: Path, tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGINT that lands after the index was written, while the writers' cat-files are
    closed, says what every other interruption of the run says (CI once saw a Ctrl-C
    there print a bare "interrupted"); the command it names then finds nothing to do."""
    from pcheckout.apply.warm import Warm
    from pcheckout.checkout import CheckoutOptions, checkout
    from pcheckout.errors import Interrupted

    ours = tmp_path / "ours"
    git(tmp_path, "clone", "-q", "--no-checkout", str(src), str(ours))
    real_close = Warm.close

    def close(self: Warm) -> None:
        real_close(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(Warm, "close", close)
    with pytest.raises(Interrupted) as caught:
        checkout(CheckoutOptions(directory=ours, rev="b", writer=writer))
    assert str(caught.value) == (
        f"interrupted by SIGINT; to finish, run: pcheckout checkout -C {ours} b"
    )
    monkeypatch.setattr(Warm, "close", real_close)
    again = run_cli("checkout", "-C", str(ours), "b")
    assert again.returncode == 0, again.stderr
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs", rev="b"))


def test_a_switch_git_refuses_leaves_no_journal(src: Path, tmp_path: Path) -> None:
    ours = clone_with_git(src, tmp_path / "ours", rev="main")
    (ours / "mod.txt").write_bytes(b"edited\n")
    refused = run_cli("checkout", "-C", str(ours), "--writer", "git", "b")
    assert refused.returncode != 0
    assert not (ours / ".git" / IN_PROGRESS).exists()


def _slow_filter(work: Path, mark: Path) -> None:
    """One path of ``many/`` written through a smudge filter that waits (once, until
    ``mark`` exists) before passing the bytes on: a switch stopped in the middle."""
    (work / ".git" / "info").mkdir(exist_ok=True)
    (work / ".git" / "info" / "attributes").write_bytes(b"many/f020.txt filter=slow\n")
    wait = f"test -e '{mark}' || {{ touch '{mark}'; sleep 60; }}; cat"
    git(work, "config", "filter.slow.smudge", f'sh -c "{wait}"')


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
@pytest.mark.parametrize("writer", WRITERS)
def test_a_switch_interrupted_while_a_writer_waits_is_finished(
    src: Path, tmp_path: Path, writer: str, sig: signal.Signals
) -> None:
    ours = clone_with_git(src, tmp_path / "ours", rev="main")
    mark = tmp_path / "mark"
    _slow_filter(ours, mark)
    cmd = [sys.executable, "-m", "pcheckout", "checkout", "-C", str(ours), "--writer", writer]
    proc = subprocess.Popen(
        [*cmd, "-j", "1", "b"], stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + HANG_S
    while not mark.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode != 0
    assert (ours / ".git" / IN_PROGRESS).exists()
    if sig == signal.SIGINT:
        assert _finish_command(err) == ["-C", str(ours), "b"]
    again = run_cli("checkout", "-C", str(ours), "b")
    assert again.returncode == 0, again.stderr
    theirs = clone_with_git(src, tmp_path / "theirs", rev="main")
    _slow_filter(theirs, mark)
    git(theirs, "checkout", "-q", "b")
    assert_same_as_git(ours, theirs)


def _archive(src: Path, rev: str, dest: Path) -> Path:
    dest.mkdir()
    archive = git(src, "archive", rev)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


@pytest.mark.parametrize(("n", "sig"), [(3, "KILL"), (30, "INT"), (12, "TERM")])
def test_an_interrupted_export_is_finished_by_the_command_it_prints(
    src: Path, tmp_path: Path, n: int, sig: str
) -> None:
    dest = tmp_path / "exported"
    args = ["export", "-C", str(src), "--writer", "pcheckout", "-j", "2", "b", str(dest)]
    proc = _stopped(dest, args, "write", n, sig)
    assert proc.returncode != 0, proc.stderr
    assert (dest / EXPORT_MARKER).exists()
    if sig != "KILL":
        err = proc.stderr.strip().splitlines()[-1]
        assert err.endswith(f"to finish, run: pcheckout export -C {src} b {dest}"), err
    again = run_cli("export", "-C", str(src), "b", str(dest))
    assert again.returncode == 0, again.stderr
    assert snapshot(dest) == snapshot(_archive(src, "b", tmp_path / "ref"))
    assert _modes_and_times(dest) == _modes_and_times(tmp_path / "ref")


def _modes_and_times(root: Path) -> dict[bytes, tuple[int, int]]:
    """Each path's permission bits and mtime (what tar -x sets besides the bytes)."""
    rb = os.fsencode(root)
    out = {}
    for dirpath, dirnames, filenames in os.walk(rb):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)[len(rb) :]] = (st.st_mode & 0o7777, st.st_mtime_ns)
    return out


def test_another_rev_after_an_interrupted_export_leaves_nothing_of_the_first(
    src: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "exported"
    args = ["export", "-C", str(src), "--writer", "pcheckout", "-j", "2", "b", str(dest)]
    assert _stopped(dest, args, "write", 50, "KILL").returncode != 0
    (dest / "mine.txt").write_bytes(b"made since\n")
    again = run_cli("export", "-C", str(src), "c", str(dest))
    assert again.returncode == 0, again.stderr
    assert (dest / "mine.txt").read_bytes() == b"made since\n"
    (dest / "mine.txt").unlink()
    assert snapshot(dest) == snapshot(_archive(src, "c", tmp_path / "ref"))
    assert _modes_and_times(dest) == _modes_and_times(tmp_path / "ref")


def test_after_an_interrupted_export_another_rev_refuses_a_file_in_its_way(
    src: Path, tmp_path: Path
) -> None:
    # gone/one.txt is C's, not B's: the interrupted export of B did not write it
    dest = tmp_path / "exported"
    (dest / "gone").mkdir(parents=True)
    (dest / "gone" / "one.txt").write_bytes(b"mine, from before\n")
    args = ["export", "-C", str(src), "--writer", "pcheckout", "-j", "2", "b", str(dest)]
    assert _stopped(dest, args, "write", 20, "KILL").returncode != 0
    again = run_cli("export", "-C", str(src), "c", str(dest))
    assert again.returncode == 1
    assert "already holds what the export writes: gone/one.txt (" in again.stderr
    assert (dest / "gone" / "one.txt").read_bytes() == b"mine, from before\n"
    assert run_cli("export", "-C", str(src), "b", str(dest)).returncode == 0
    (dest / "gone" / "one.txt").unlink()
    (dest / "gone").rmdir()
    assert snapshot(dest) == snapshot(_archive(src, "b", tmp_path / "ref"))


def test_an_export_into_what_cannot_be_a_directory_is_one_line(src: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_bytes(b"x")
    proc = run_cli("export", "-C", str(src), "b", str(tmp_path / "a-file" / "below"))
    assert proc.returncode == 1
    assert (
        proc.stderr == f"pcheckout: error: cannot create {tmp_path}/a-file/below: Not a directory\n"
    )


@pytest.mark.parametrize("sig", ["INT", "KILL"])
def test_an_interrupted_clone_is_finished_by_the_command_it_prints(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: str
) -> None:
    monkeypatch.setenv("PCHECKOUT_WRITER", "pcheckout")
    dest = tmp_path / "cloned"
    proc = _stopped(dest, ["clone", "-q", str(src), str(dest)], "write", 20, sig)
    assert proc.returncode != 0, proc.stderr
    assert (dest / ".git" / IN_PROGRESS).exists()
    if sig == "INT":
        assert proc.stderr.strip().endswith(
            f"the clone is complete; to finish its checkout, run: pcheckout checkout -C {dest}"
        ), proc.stderr
    again = run_cli("checkout", "-C", str(dest))
    assert again.returncode == 0, again.stderr
    theirs = tmp_path / "theirs"
    git(tmp_path, "clone", "-q", str(src), str(theirs))
    assert_same_as_git(dest, theirs)


#: Logs each run of the hook: its name as git gives it, its arguments, GIT_DIR, GIT_PREFIX.
LOGGING_HOOK = """#!/bin/sh
echo "$0 $* [${GIT_DIR-unset}] [${GIT_PREFIX-unset}]" >> "$HOOKLOG"
"""


@pytest.mark.parametrize("n", [0, 20])
def test_an_interrupted_clones_hooks_run_once_as_git_clone_runs_them(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    """The finishing run is git clone's checkout: its post-checkout is given the null id
    as the previous HEAD, as git clone gives it, and runs once (n=0: killed before its
    first file, the work tree empty)."""
    monkeypatch.setenv("PCHECKOUT_WRITER", "pcheckout")
    hooks = tmp_path / "template" / "hooks"
    hooks.mkdir(parents=True)
    for name in ("post-checkout", "post-index-change"):
        (hooks / name).write_text(LOGGING_HOOK)
        (hooks / name).chmod(0o755)
    monkeypatch.setenv("HOOKLOG", str(tmp_path / "theirs.log"))
    theirs = tmp_path / "theirs"
    git(tmp_path, "clone", "-q", f"--template={hooks.parent}", str(src), str(theirs))
    monkeypatch.setenv("HOOKLOG", str(tmp_path / "ours.log"))
    dest = tmp_path / "ours"
    args = ["clone", "-q", f"--template={hooks.parent}", str(src), str(dest)]
    proc = _stopped(dest, args, "write", max(n, 1), "KILL")
    assert proc.returncode != 0, proc.stderr
    if n == 0:  # as if killed between the journal and the first file
        for p in dest.iterdir():
            if p.name != ".git":
                subprocess.run(["rm", "-rf", str(p)], check=True)
    assert not (tmp_path / "ours.log").exists()
    again = run_cli("checkout", "-C", str(dest))
    assert again.returncode == 0, again.stderr
    ours_log = (tmp_path / "ours.log").read_text().replace(str(dest), "<work>")
    theirs_log = (tmp_path / "theirs.log").read_text().replace(str(theirs), "<work>")
    assert ours_log == theirs_log
    assert "<work>/.git/hooks/post-checkout 0000000000000000000000000000000000000000" in ours_log
    monkeypatch.delenv("HOOKLOG")  # (git status runs post-index-change)
    assert_same_as_git(dest, theirs)


@pytest.mark.parametrize("writer", WRITERS)
def test_an_interrupted_switchs_hooks_run_once_from_where_it_began(
    src: Path, tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No hook runs in the interrupted run; the run that finishes it runs them once, from
    the HEAD the switch began at, as git's one checkout would have."""
    ours = clone_with_git(src, tmp_path / "ours", rev="main")
    theirs = clone_with_git(src, tmp_path / "theirs", rev="main")
    mark = tmp_path / "mark"
    for w in (ours, theirs):
        _slow_filter(w, mark)  # (git's writer is stopped there; cat: the same bytes)
        for name in ("post-checkout", "post-index-change"):
            (w / ".git" / "hooks" / name).write_text(LOGGING_HOOK)
            (w / ".git" / "hooks" / name).chmod(0o755)
    monkeypatch.setenv("HOOKLOG", str(tmp_path / "ours.log"))
    cmd = [sys.executable, "-m", "pcheckout", "checkout", "-C", str(ours), "--writer", writer]
    proc = subprocess.Popen([*cmd, "-j", "1", "b"], stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + HANG_S
    while not mark.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=HANG_S)
    assert not (tmp_path / "ours.log").exists()
    again = run_cli("checkout", "-C", str(ours), "b")
    assert again.returncode == 0, again.stderr
    monkeypatch.setenv("HOOKLOG", str(tmp_path / "theirs.log"))
    git(theirs, "checkout", "-q", "b")
    monkeypatch.delenv("HOOKLOG")
    ours_log = (tmp_path / "ours.log").read_text().replace(str(ours), "<work>")
    theirs_log = (tmp_path / "theirs.log").read_text().replace(str(theirs), "<work>")
    assert ours_log == theirs_log
    head = git(theirs, "rev-parse", "main").decode().strip()
    assert ours_log.count(f"post-checkout {head} ") == 1
    assert_same_as_git(ours, theirs)
