"""index.lock held for a run: git's message for a held or stale lock, a dead
pcheckout's lock taken over, never two holders."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import git, make_repo

from pcheckout.errors import IndexLockError, unable_to_lock_message
from pcheckout.git import lock as lock_mod
from pcheckout.git.index import read_index
from pcheckout.git.lock import IndexLock

#: A process that takes the lock, says "held", and waits (stdin) or dies.
HOLDER = r"""
import sys
from pcheckout.git.lock import IndexLock
lk = IndexLock.acquire(sys.argv[1])
print("held", flush=True)
sys.stdin.read()
lk.rollback()
"""

#: Contenders for a dead lock: each says whether it got it, holding it until stdin closes.
CONTENDER = r"""
import sys
from pcheckout.errors import IndexLockError
from pcheckout.git.lock import IndexLock
try:
    lk = IndexLock.acquire(sys.argv[1])
except IndexLockError:
    print("busy", flush=True)
    sys.exit(0)
print("won", flush=True)
sys.stdin.read()
lk.rollback()
"""


#: Takes the lock (and commits AT == "commit*") and SIGKILLs itself at one step:
#: right after the link that makes the lock, after the new index is written beside
#: it, after the rename of that index over the index.
KILLED_AT = r"""
import os, signal, sys
from pcheckout.git.lock import IndexLock
at, index = sys.argv[1], sys.argv[2]
real = {"link": os.link, "rename": os.rename, "unlink": os.unlink}

def die_after(name):
    def call(*args, **kw):
        real[name](*args, **kw)
        os.kill(os.getpid(), signal.SIGKILL)
    return call

def die_before(name):
    def call(*args, **kw):
        os.kill(os.getpid(), signal.SIGKILL)
    return call

if at == "created":
    os.link = die_after("link")
    IndexLock.acquire(index)
lk = IndexLock.acquire(index)
if at == "commit-written":
    os.rename = die_before("rename")
if at == "commit-renamed":
    renamed = []
    def rename(a, b):
        real["rename"](a, b)
        renamed.append(b)
    def unlink(path, *args, **kw):
        if renamed:
            os.kill(os.getpid(), signal.SIGKILL)
        real["unlink"](path, *args, **kw)
    os.rename, os.unlink = rename, unlink
lk.commit(b"new index")
"""


def _env() -> dict[str, str]:
    src = str(Path(lock_mod.__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _holder(index: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(index)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "held\n"
    return proc


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path, {b"a": b"a\n"})


def test_message_is_gits_own(repo: Path) -> None:
    lock = repo / ".git" / "index.lock"
    lock.touch()
    proc = subprocess.run(  # (a command that takes the lock whatever the index holds)
        ["git", "-C", str(repo), "update-index", "--force-write-index"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 128
    gits = proc.stderr.removeprefix("fatal: ").strip()
    assert unable_to_lock_message(os.fsencode(lock)) == " ".join(gits.split())
    assert "\n" not in unable_to_lock_message(os.fsencode(lock))


def test_commit_renames_the_lock_over_the_index(repo: Path) -> None:
    index = repo / ".git" / "index"
    data = index.read_bytes()
    lk = IndexLock.acquire(index)
    held = (repo / ".git" / "index.lock").read_bytes()
    assert held.startswith(lock_mod.RECORD_PREFIX) and held.endswith(b" %d\n" % os.getpid())
    index.unlink()
    lk.commit(data)
    assert not lk.held
    assert not (repo / ".git" / "index.lock").exists()
    assert index.read_bytes() == data
    read_index(index)
    git(repo, "diff-files", "--quiet")


def test_commit_of_an_index_shorter_than_the_record(repo: Path) -> None:
    index = repo / ".git" / "index"
    with IndexLock.acquire(index) as lk:
        lk.commit(b"x" * 10)
    assert index.read_bytes() == b"x" * 10


def test_rollback_and_context_exit_remove_the_lock(repo: Path) -> None:
    index = repo / ".git" / "index"
    before = index.read_bytes()
    with pytest.raises(KeyboardInterrupt), IndexLock.acquire(index):
        raise KeyboardInterrupt
    assert not (repo / ".git" / "index.lock").exists()
    assert index.read_bytes() == before


@pytest.mark.parametrize("content", [b"", b"DIRC\0\0\0\2", b"pcheckout-lock 1 elsewhere/x b 1\n"])
def test_a_lock_not_provably_ours_is_gits_error(repo: Path, content: bytes) -> None:
    # git's own lock (empty while held, or a crashed git's half-written index),
    # or one left by a pcheckout on another machine sharing the mount.
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(content)
    with pytest.raises(IndexLockError) as info:
        IndexLock.acquire(repo / ".git" / "index")
    assert str(info.value) == unable_to_lock_message(os.fsencode(lock))
    assert info.value.exit_code == 128
    assert lock.read_bytes() == content


def test_a_live_holder_is_never_disturbed(repo: Path) -> None:
    index = repo / ".git" / "index"
    holder = _holder(index)
    try:
        held = (repo / ".git" / "index.lock").read_bytes()
        for _ in range(3):
            with pytest.raises(IndexLockError):
                IndexLock.acquire(index)
        # (--force-write-index: git takes the lock whatever the index holds; --refresh asked
        # for it only where an entry was racily clean, and exited 0 otherwise)
        proc = subprocess.run(
            ["git", "-C", str(repo), "update-index", "--force-write-index"],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 128 and "index.lock': File exists." in proc.stderr
        assert (repo / ".git" / "index.lock").read_bytes() == held
    finally:
        holder.communicate("")
    assert not (repo / ".git" / "index.lock").exists()


def test_a_second_acquire_in_the_same_process_fails_and_keeps_the_first(repo: Path) -> None:
    # POSIX record locks belong to the process and drop when any descriptor of
    # the file closes; the lock uses open-file-description locks instead.
    index = repo / ".git" / "index"
    with IndexLock.acquire(index):
        with pytest.raises(IndexLockError):
            IndexLock.acquire(index)
        proc = subprocess.run(
            [sys.executable, "-c", CONTENDER, str(index)],
            input="",
            capture_output=True,
            text=True,
            env=_env(),
        )
        assert proc.stdout == "busy\n", proc.stderr


def test_a_killed_pcheckouts_lock_is_taken_over(repo: Path) -> None:
    index = repo / ".git" / "index"
    holder = _holder(index)
    holder.send_signal(signal.SIGKILL)
    holder.communicate()
    assert (repo / ".git" / "index.lock").exists()
    with IndexLock.acquire(index) as lk:
        assert lk.took_over
        held = (repo / ".git" / "index.lock").read_bytes()
        assert held.endswith(b" %d\n" % os.getpid())
    assert not (repo / ".git" / "index.lock").exists()


def test_contenders_for_a_dead_lock_exactly_one_wins(repo: Path) -> None:
    index = repo / ".git" / "index"
    for _round in range(5):
        holder = _holder(index)
        holder.send_signal(signal.SIGKILL)
        holder.communicate()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CONTENDER, str(index)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=_env(),
            )
            for _ in range(4)
        ]
        said = []
        for p in procs:
            assert p.stdout is not None
            said.append(p.stdout.readline())
        for p in procs:
            p.communicate("")
        assert sorted(said) == ["busy\n"] * 3 + ["won\n"], said
        assert not (repo / ".git" / "index.lock").exists()


def test_a_lock_committed_meanwhile_is_reported_as_held(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The holder commits between our O_EXCL failing and our look at its file.
    index = repo / ".git" / "index"
    real_open = os.open

    def open_after_commit(path: bytes, flags: int, mode: int = 0o777) -> int:
        if flags & os.O_EXCL:
            raise FileExistsError(17, "File exists")
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", open_after_commit)
    t0 = time.monotonic()
    with pytest.raises(IndexLockError):
        IndexLock.acquire(index)
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("at", ["created", "commit-written", "commit-renamed"])
def test_a_kill_at_any_step_of_the_lock_leaves_one_the_rerun_takes_over(
    repo: Path, at: str
) -> None:
    # git's lock is empty when created and holds part of an index before its rename:
    # ours holds its record from its first moment until the index is in place.
    index = repo / ".git" / "index"
    before = index.read_bytes()
    proc = subprocess.run([sys.executable, "-c", KILLED_AT, at, str(index)], env=_env())
    assert proc.returncode == -signal.SIGKILL
    lock = repo / ".git" / "index.lock"
    assert lock.read_bytes().startswith(lock_mod.RECORD_PREFIX)
    assert index.read_bytes() == (b"new index" if at == "commit-renamed" else before)
    with IndexLock.acquire(index) as lk:
        assert lk.took_over
        lk.commit(before)
    assert not lock.exists()
    assert index.read_bytes() == before
    # (a kill between the link and the unlink of the lock's first name left that
    # name: the takeover removed it)
    assert [p.name for p in (repo / ".git").iterdir() if p.name.startswith("index")] == ["index"]


@pytest.mark.parametrize("sendfile", ["kernel", "refused", "cut short"])
def test_the_scratch_index_is_a_byte_copy_with_the_index_s_mtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sendfile: str
) -> None:
    index = tmp_path / "index"
    data = os.urandom(3 * lock_mod.COPY_CHUNK + 12345)
    index.write_bytes(data)
    os.utime(index, ns=(1_000_000_000, 2_000_000_123))
    real, calls = os.sendfile, list[int]()

    def refused_or_short(out: int, src: int, offset: int, count: int) -> int:
        calls.append(offset)
        if sendfile == "refused" or len(calls) > 1:
            raise OSError(errno.EINVAL, "no sendfile here")
        return real(out, src, offset, 1_000_000)  # (a million bytes, then refused)

    if sendfile != "kernel":
        monkeypatch.setattr(os, "sendfile", refused_or_short)
    lock = IndexLock.acquire(os.fsencode(index))
    try:
        with lock_mod.scratch_index(lock, copy=True) as scratch:
            assert Path(os.fsdecode(scratch.path)).read_bytes() == data
            assert os.stat(scratch.path).st_mtime_ns == 2_000_000_123
    finally:
        lock.rollback()
    assert len(calls) == {"kernel": 0, "refused": 1, "cut short": 2}[sendfile]
