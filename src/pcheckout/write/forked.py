"""Writers in forked processes, for destinations where writing is CPU-bound.

On tmpfs or a local disk a checkout is CPU work: git inflating, and Python
asking, writing and stat-ing each file.  Threads share one interpreter lock,
so in one process the Python side of every worker runs one at a time (two
threads on tmpfs, 5069 files: 178 ms of Python CPU in a 217 ms engine run).
Here each of ``processes`` children gets one contiguous share of the entries
(neighbours share directories) and runs the ordinary engine on it with one
thread and its own cat-file: one interpreter lock per core.

A child reports progress through a shared memory page and, at the end, its
packed stat data (or its error) through a pipe; the parent assembles the
same :class:`Outcome` the threaded engine returns.  The parent forks only
while no other thread runs in the process, counted as the kernel counts them
(Python's threads and others: faulthandler's watchdog, a C library's): a fork
copies only the calling thread, so a lock held by another thread would stay
locked in the child forever, and Python 3.12+ warns of exactly that.  Where
another thread runs, the caller writes with threads instead (:func:`available`).
The parent reaps every child on every path: an interrupt or an error stops
them all, and their cat-file processes with them.  SIGINT and SIGTERM are
blocked across each fork, so a child is recorded before a signal can stop the
parent, and a child's signal handlers can never unwind into the parent's code
(a child ends only in ``os._exit``).

Each child writes one message to its pipe, then exits; the parent reads to EOF
(a struct for the fixed parts, no pickle for the bulk)::

    b"S" | files, bytes, restarts (3 x int64, native order)
         | per entry of its share: b"\0" (not written) or b"\1" + STAT_SIZE bytes (pack_stat)
    b"E" | pickle of (exception class, message, attributes)   (_pickle_error)

An empty message means the child died without a word (killed).
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
import pickle
import selectors
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import FrameType
from typing import NamedTuple, NoReturn

from pcheckout.errors import PcheckoutError
from pcheckout.fdio import write_all
from pcheckout.fs.files import STAT_SIZE
from pcheckout.git.catfile import Spawn
from pcheckout.git.runner import Git
from pcheckout.git.tree import Entry
from pcheckout.write.engine import Engine, EngineOptions, Outcome

#: Fewer entries per process than this and a fork (~1 ms for a Python process
#: of ~30 MiB) and a second cat-file start cost more than a share saves.
MIN_ENTRIES_PER_PROCESS = 500
#: Below this many entries to write, no fork at all (two shares at least).
MIN_ENTRIES = 2 * MIN_ENTRIES_PER_PROCESS
#: How long to wait for threads Python has joined but the kernel still lists:
#: a joined thread takes a moment more to exit (right after a ThreadPoolExecutor
#: of two, 18 of 200 rounds still showed one, for at most 4 ms, on the dev VM
#: under load 3).  A thread still there after this is one Python does not know
#: (faulthandler's watchdog, a C library's): then threads write instead.
THREAD_EXIT_WAIT_S = 0.02
#: How long children get to stop on SIGTERM (their cat-file processes too)
#: before they are killed.
STOP_GRACE_S = 2.0

_PROGRESS = struct.Struct("=qq")  # files, bytes written so far, per child
_HEADER = struct.Struct("=qqq")  # files, bytes, cat-file restarts
#: The result message (the module docstring draws it).
_DONE, _FAILED = b"S", b"E"
_NO_STAT, _STAT = b"\0", b"\1"
#: Blocked across a fork: the signals the CLI turns into an interrupt.
_STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


#: prctl(2) option: the signal a process gets when its parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def death_signal_setter() -> Callable[[], None]:
    """A call that makes the calling (forked) process get SIGKILL the moment
    the thread that forked it dies: ``prctl(PR_SET_PDEATHSIG)`` on Linux; at once if
    the process that made the call (the parent) is already gone when a child makes it.

    A writer that outlived a SIGKILLed parent would go on writing files that
    the re-run is writing too.  Loaded before forking, so each child only
    calls it.  The signal follows the *thread* that forked, not the process:
    :func:`run` forks from the thread that then waits for every child."""
    # ctypes costs 1.6 ms to import and load (measured): only forked runs pay it.
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - not glibc/musl Linux
        return lambda: None

    parent = os.getpid()

    def set_death_signal() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # A parent that died between the fork and the prctl sent no signal: the child,
        # reparented, sees another parent (prctl(2)'s own advice), and dies as asked.
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return set_death_signal


def available() -> bool:
    """Whether writers may be forked here: Linux (``fork`` is what makes a
    child cheap: the entry list is shared, not sent) and no other thread
    running in this process."""
    if not sys.platform.startswith("linux"):
        return False
    deadline = time.monotonic() + THREAD_EXIT_WAIT_S
    while _threads() > 1:
        if threading.active_count() > 1 or time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


def _threads() -> int:
    """Threads in this process as the kernel counts them (CPython 3.12+ counts the same
    for its fork warning), Python's alone where /proc cannot say."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


class Forking(NamedTuple):
    """How the writers are forked and followed: ``processes`` children, their cat-files
    started by ``spawn``; ``report(files, bytes)`` every ``interval`` seconds;
    ``forked()`` runs in the parent once all exist (it may start threads)."""

    processes: int
    spawn: Spawn | None = None
    report: Callable[[int, int], None] | None = None
    interval: float = 0.1
    forked: Callable[[], None] | None = None


class _Job(NamedTuple):
    """What every child is given: the whole run (each takes its share of it) and the
    shared progress page."""

    git: Git
    entries: Sequence[Entry]
    skip: Sequence[bool] | None
    opts: EngineOptions  # one worker each
    spawn: Spawn | None
    progress: mmap.mmap


class _Share(NamedTuple):
    """One child's share: ``entries[a:b]`` of the run; ``slot`` its place in the page."""

    slot: int
    a: int
    b: int


def run(
    git: Git,
    entries: Sequence[Entry],
    opts: EngineOptions,
    how: Forking,
    *,
    skip: Sequence[bool] | None = None,
) -> Outcome:
    """Write ``entries`` with ``how.processes`` forked children (one thread each)."""
    t0 = time.monotonic()
    n = len(entries)
    k = max(1, min(how.processes, n // MIN_ENTRIES_PER_PROCESS or 1))
    shares = [_Share(j, n * j // k, n * (j + 1) // k) for j in range(k)]
    progress = mmap.mmap(-1, _PROGRESS.size * k)
    one = replace(opts, workers=1, initial_limit=1)
    job = _Job(git, entries, skip, one, how.spawn, progress)
    children: list[tuple[int, int]] = []  # (pid, read end of its result pipe)
    die_with_parent = death_signal_setter()
    gc.freeze()  # keep the children's garbage collector off the shared pages
    try:
        for share in shares:
            children.append(_fork(job, share, children, die_with_parent))
        gc.unfreeze()
        if how.forked is not None:
            how.forked()
        payloads = _collect(children, progress, how.report, how.interval)
    except BaseException:
        gc.unfreeze()
        _stop(children)
        raise
    finally:
        for _pid, r in children:
            with contextlib.suppress(OSError):
                os.close(r)
        progress.close()
    out = _decode(shares, payloads)
    if how.report is not None:
        how.report(out.files, out.bytes)
    out.seconds = time.monotonic() - t0
    out.workers_used = k
    out.limit_history = [(0.0, k)]
    return out


def _fork(
    job: _Job,
    share: _Share,
    children: list[tuple[int, int]],
    die_with_parent: Callable[[], None],
) -> tuple[int, int]:
    """Fork the child writing ``share`` (signals blocked across the fork); its pid and
    the read end of its result pipe."""
    parent = os.getpid()
    r, w = os.pipe()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        pid = os.fork()
        if pid == 0:  # the child (signals still blocked): never returns
            die_with_parent()
            if os.getppid() != parent:  # it died before prctl took effect
                os._exit(1)
            _child(job, share, w, [r] + [rr for _pid, rr in children])
        os.close(w)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return pid, r


def _decode(shares: list[_Share], payloads: list[bytes]) -> Outcome:
    """The children's payloads as one outcome (stats in entry order, counts summed);
    a child's failure raised as it was raised there."""
    stats: list[bytes | None] = []
    said: list[bytes] = []
    files = nbytes = restarts = 0
    has_stat = _STAT[0]
    for share, data in zip(shares, payloads, strict=True):
        if data[:1] == _FAILED:
            raise _unpickle_error(data[1:])
        f, nb, rs = _HEADER.unpack_from(data, 1)
        files, nbytes, restarts = files + f, nbytes + nb, restarts + rs
        pos = 1 + _HEADER.size
        for _ in range(share.b - share.a):
            if data[pos] == has_stat:
                stats.append(bytes(data[pos + 1 : pos + 1 + STAT_SIZE]))
                pos += 1 + STAT_SIZE
            else:
                stats.append(None)
                pos += 1
        if pos < len(data):  # what its cat-files printed on stderr (the payload's rest)
            said.append(bytes(data[pos:]))
    return Outcome(
        stats=stats,
        files=files,
        bytes=nbytes,
        seconds=0.0,
        restarts=restarts,
        workers_used=len(shares),
        processes=True,
        git_said=said,
    )


def _child(job: _Job, share: _Share, w: int, parents_fds: list[int]) -> NoReturn:
    """Write one share and send the result; entered with SIGINT and SIGTERM blocked, which
    stay blocked except while the engine runs (its interrupt handling stops its cat-file)."""
    code = 1
    try:
        try:
            for fd in parents_fds:
                os.close(fd)
            _interrupt_once()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            out = _write_share(job, share)
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        parts = [_DONE, _HEADER.pack(out.files, out.bytes, out.restarts)]
        parts += [_NO_STAT if st is None else _STAT + st for st in out.stats]
        parts += out.git_said
        payload = b"".join(parts)
        code = 0
    except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)  # if it came in the finally
        payload = _FAILED + _pickle_error(exc)
    try:
        write_all(w, payload)
    finally:
        os._exit(code)  # no parent cleanup (atexit, finally blocks) in a child


def _write_share(job: _Job, share: _Share) -> Outcome:
    """In a child: the engine on its share, progress in its slot of the page, the
    journal flushed at each tick and at the end (what was completed, even on failure)."""
    a, b = share.a, share.b
    opts = job.opts
    if opts.conversions is not None:
        opts = replace(opts, conversions=opts.conversions[a:b])
    skip = None if job.skip is None else job.skip[a:b]
    journal = opts.journal
    if journal is not None:
        journal.base = a  # this share's positions are the listing's from here
    engine = Engine(job.git, job.entries[a:b], opts, spawn=job.spawn, skip=skip)
    at = _PROGRESS.size * share.slot

    def tick(eng: Engine) -> None:
        _PROGRESS.pack_into(job.progress, at, *eng.progress())
        if journal is not None:
            journal.flush()

    try:
        out = engine.run(tick=tick, interval=0.05)
    finally:
        if journal is not None:
            journal.flush()  # what was completed, even when the share failed
    tick(engine)
    return out


def _interrupt_once() -> None:
    """In a child: the first SIGINT or SIGTERM interrupts it as its handler says (the
    engine then kills its cat-file and joins its writer thread, which removes the file
    it had begun); any later one is ignored.  A Ctrl-C reaches the parent and every child
    at once, and the parent's ``_stop`` sends each child SIGTERM a moment later: raised in
    the middle of that clean-up, it skipped the join, and ``os._exit`` ended the writer
    thread in the middle of a file, which stayed cut short.  (A child that does not stop
    within ``STOP_GRACE_S`` is killed, as before.)"""
    fired: list[int] = []
    for signum in _STOP_SIGNALS:
        previous = signal.getsignal(signum)
        if not callable(previous):
            continue  # SIG_DFL, SIG_IGN: as before

        def handler(
            signum: int,
            frame: FrameType | None,
            previous: Callable[[int, FrameType | None], object] = previous,
        ) -> None:
            if fired:
                return
            fired.append(signum)
            previous(signum, frame)

        signal.signal(signum, handler)


def _collect(
    children: list[tuple[int, int]],
    progress: mmap.mmap,
    report: Callable[[int, int], None] | None,
    interval: float,
) -> list[bytes]:
    """Every child's payload (read as it comes, so no pipe fills), reporting
    progress every ``interval`` seconds; then reap them."""
    chunks: dict[int, list[bytes]] = {r: [] for _pid, r in children}
    with selectors.DefaultSelector() as sel:
        for _pid, r in children:
            sel.register(r, selectors.EVENT_READ)
        open_ = len(children)
        while open_:
            for key, _ev in sel.select(interval):
                data = os.read(key.fd, 1 << 16)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
                    open_ -= 1
            if report is not None:
                files = nbytes = 0
                for j in range(len(children)):
                    f, nb = _PROGRESS.unpack_from(progress, _PROGRESS.size * j)
                    files, nbytes = files + f, nbytes + nb
                report(files, nbytes)
    for pid, _r in children:
        os.waitpid(pid, 0)
    children.clear()  # reaped: nothing left for _stop
    return [b"".join(chunks[r]) or _lost() for r in chunks]


def _lost() -> bytes:
    return _FAILED + _pickle_error(PcheckoutError("a writer process died without a word"))


def _stop(children: list[tuple[int, int]]) -> None:
    """SIGTERM every child (each stops its cat-file), SIGKILL what is left
    after the grace period, reap them all."""
    for pid, _r in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    left = [pid for pid, _r in children]
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if _running(pid)]
        if left:
            time.sleep(0.01)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    children.clear()


def _running(pid: int) -> bool:
    """Reap ``pid`` if it has exited; True while it runs."""
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False


def _pickle_error(exc: BaseException) -> bytes:
    """An exception as the parent should raise it: a PcheckoutError with its
    class and attributes (built without its __init__, whose arguments vary),
    anything else as an internal error naming it."""
    if isinstance(exc, KeyboardInterrupt):
        exc = PcheckoutError("interrupted")
    if not isinstance(exc, PcheckoutError):
        exc = PcheckoutError(f"internal error in a writer process: {exc!r}")
    state = {k: v for k, v in vars(exc).items() if _picklable(v)}
    try:
        return pickle.dumps((type(exc), str(exc), state))
    except (pickle.PicklingError, TypeError, AttributeError):
        return pickle.dumps((PcheckoutError, str(exc), {}))


def _picklable(value: object) -> bool:
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - anything that does not pickle stays behind
        return False
    return True


def _unpickle_error(data: bytes) -> PcheckoutError:
    loaded: tuple[type[PcheckoutError], str, dict[str, object]]
    loaded = pickle.loads(data)  # noqa: S301 - our own child wrote it (_pickle_error)
    cls, message, state = loaded
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.__dict__.update(state)
    return exc
