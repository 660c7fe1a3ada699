"""The parallel writer: N worker threads, each with its own cat-file process.

Work is one shared list of entries handed out in small contiguous batches
(neighbouring paths share directories, so one worker usually makes a
directory and fills it).  Each worker pipelines: it keeps up to
``catfile.REQUEST_WINDOW`` bytes of requests in flight so git inflates the
next blobs while Python creates and writes the current file.

There is no serial per-entry phase: directories are made on demand by
whichever worker first needs them (a per-directory claim, so a directory is
made exactly once and others wait only for that one mkdir), every stat is
taken by the worker that wrote the file, and nothing is checked per path in
an empty destination (``O_EXCL`` turns any surprise into an error instead).

The number of workers allowed to take new batches (``limit``) may change
while the checkout runs; the adaptive controller drives it.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from pcheckout.git.catfile import REQUEST_WINDOW, SMALL_BLOB, CatFile, Spawn

#: Refill the request window only when it has drained to half: requests go out
#: in bursts of ~50 (one write syscall each side) while git always has work.
REQUEST_LOW_WATER = REQUEST_WINDOW // 2
from pcheckout.errors import (
    CatFileError,
    MissingObjectError,
    PcheckoutError,
    WriteError,
    quote_path,
)
from pcheckout.fdio import write_all
from pcheckout.git.runner import Git
from pcheckout.git.tree import MODE_EXEC, MODE_GITLINK, MODE_SYMLINK, Entry

#: A worker whose cat-file process dies is given a fresh one this many times
#: before the checkout stops (a crash that repeats is not a fluke).
MAX_RESTARTS = 2
#: Batch bounds.  Batches are cut so each allowed worker gets several
#: (load balance at the end of the run) but not so small that the shared
#: queue lock is taken per file; 64 is ~1 ms of tmpfs work.
MIN_BATCH, MAX_BATCH, BATCHES_PER_WORKER = 1, 64, 8
#: Entries one worker may have asked for and not yet written, in batches.  The
#: request window alone (4 KiB, ~100 requests) let the first workers to start
#: claim ~100 entries each before the last had begun: on the 1 ms latency
#: mount (~6 ms per file) a 368-file switch at 8 workers had three workers
#: writing ~100 files (0.6 s) while four wrote 5.  Two batches keep git
#: inflating ahead of the writer (an answer takes microseconds, a create
#: milliseconds) and leave the rest to be stolen; where batches are large
#: (few workers, many entries: CPU-bound) the byte window still binds first.
PENDING_BATCHES = 2

#: Open files one worker holds at most: its cat-file's stdin, stdout and stderr
#: file, the same again for the plain cat-file that filtered mode uses for
#: symlinks, and the file being written (7), rounded up for the pipes that
#: exist briefly while a process starts.
FDS_PER_WORKER = 8
#: Descriptors kept free for the main thread (git commands, the index, the
#: marker) when the open-file limit caps the worker count.
FDS_RESERVED = 16

O_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(
    os, "O_CLOEXEC", 0
)


#: Stat data kept per written entry until the index is written: packed, 48
#: bytes instead of a ~580-byte os.stat_result (23 MiB per 40k files measured
#: with tracemalloc, which alone broke the 150 MB-per-100k-files RSS budget).
_STAT = struct.Struct("=qqQQIIQ")
STAT_SIZE = _STAT.size


class StatData(NamedTuple):
    ctime_ns: int
    mtime_ns: int
    dev: int
    ino: int
    uid: int
    gid: int
    size: int


def pack_stat(st: os.stat_result) -> bytes:
    return _STAT.pack(st.st_ctime_ns, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_uid,
                      st.st_gid, st.st_size)


def unpack_stat(packed: bytes) -> StatData:
    return StatData(*_STAT.unpack(packed))


@dataclass
class WorkerStats:
    files: int = 0
    bytes: int = 0
    restarts: int = 0


@dataclass(frozen=True)
class EngineOptions:
    root: bytes  # destination directory, absolute
    workers: int  # threads started (the most that may ever run)
    initial_limit: int | None = None  # how many may take work at first (default: workers)
    filters: bool = False  # cat-file --filters (attributes, eol, smudge)
    nul_requests: bool = False  # cat-file -z (git >= 2.38)
    attr_source: str | None = None  # git --attr-source=<tree> (git >= 2.40)
    symlinks: bool = True  # core.symlinks
    overwrite: bool = False  # replace what is in the way (resume, --force)


@dataclass
class Outcome:
    stats: list[bytes | None]  # pack_stat() per entry
    files: int
    bytes: int
    seconds: float
    restarts: int
    workers_used: int
    limit_history: list[tuple[float, int]] = field(default_factory=list)
    processes: bool = False  # the workers were forked processes (forked.py), not threads
    kept: int = 0  # entries a resumed run found already written (write/worktree.py)
    adapt_summary: str | None = None  # what the adaptive controller did, if it ran


class _Stop(Exception):
    """Internal: another worker failed or we were interrupted."""


class Engine:
    def __init__(
        self,
        git: Git,
        entries: Sequence[Entry],
        opts: EngineOptions,
        *,
        spawn: Spawn | None = None,
        skip: Sequence[bool] | None = None,
    ) -> None:
        self.git = git
        self.entries = entries
        self.opts = opts
        self.spawn = spawn
        self.skip = skip
        self.stats: list[bytes | None] = [None] * len(entries)
        self.worker_stats = [WorkerStats() for _ in range(max(1, opts.workers))]
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._qlock = threading.Lock()
        self._ranges: list[list[int]] = []  # per worker: [next, end) of its region
        self._all_handed_out = False
        self._limit = max(1, min(opts.initial_limit or opts.workers, opts.workers))
        self._gate = threading.Condition()
        self._batch = self._batch_size(self._limit)
        self._dir_lock = threading.Lock()
        self._dirs_made: set[bytes] = set()
        self._dirs_claimed: dict[bytes, threading.Event] = {}
        self._procs: list[CatFile] = []
        self._procs_lock = threading.Lock()
        self._live = 0
        self._done = threading.Event()
        self.limit_history: list[tuple[float, int]] = []
        self._t0 = 0.0

    # -- public ---------------------------------------------------------------
    @property
    def limit(self) -> int:
        return self._limit

    def set_limit(self, n: int) -> None:
        n = max(1, min(n, self.opts.workers))
        if n != self._limit:
            with self._gate:
                self._limit = n
                self._batch = self._batch_size(n)
                self._gate.notify_all()
            self.limit_history.append((time.monotonic() - self._t0, n))

    def progress(self) -> tuple[int, int]:
        return (sum(w.files for w in self.worker_stats), sum(w.bytes for w in self.worker_stats))

    def run(
        self,
        tick: Callable[[Engine], None] | None = None,
        interval: float = 0.1,
    ) -> Outcome:
        """Write every entry; call ``tick(self)`` every ``interval`` seconds."""
        self._t0 = time.monotonic()
        self.limit_history.append((0.0, self._limit))
        n = len(self.entries)
        threads = []
        nworkers = max(1, min(self.opts.workers, n, _fd_budget())) if n else 0
        self._split(n, nworkers)
        self._live = nworkers
        if nworkers == 0:
            self._done.set()
        for i in range(nworkers):
            t = threading.Thread(
                target=self._worker, args=(i,), name=f"pcheckout-w{i}", daemon=True
            )
            threads.append(t)
        try:
            for t in threads:
                t.start()
            while not self._done.wait(interval):
                if tick is not None and not self._stop.is_set():
                    tick(self)
            for t in threads:
                t.join()
        except BaseException as exc:
            self._fail(exc)
            self._kill_all()
            for t in threads:
                t.join(5)
            raise
        if self._error is not None:
            raise self._error
        files, nbytes = self.progress()
        return Outcome(
            stats=self.stats,
            files=files,
            bytes=nbytes,
            seconds=time.monotonic() - self._t0,
            restarts=sum(w.restarts for w in self.worker_stats),
            workers_used=nworkers,
            limit_history=self.limit_history,
        )

    # -- work distribution ----------------------------------------------------
    def _batch_size(self, limit: int) -> int:
        n = len(self.entries)
        return max(MIN_BATCH, min(MAX_BATCH, n // max(1, limit * BATCHES_PER_WORKER)))

    def _split(self, n: int, nworkers: int) -> None:
        """One contiguous region per initially allowed worker.

        Writers that share a directory serialize on it (ext4 and the VFS hold
        the parent's lock across a create, so over NFS or FUSE across a whole
        round trip): git gives each worker one contiguous chunk for that
        reason.  Measured here on the ext4 root with 5000 files: one shared
        queue handing out neighbouring batches, 2.65 s at 4-32 workers; git's
        chunking 1.3 s.  Regions keep concurrent writers far apart; an idle
        worker steals the far half of the largest region left.
        """
        self._ranges = [[0, 0] for _ in range(nworkers)]
        k = max(1, min(self._limit, nworkers))
        for j in range(k if nworkers else 0):
            self._ranges[j] = [n * j // k, n * (j + 1) // k]

    def _steal(self, wid: int) -> bool:
        """Give ``wid`` the upper half of the largest region (qlock held)."""
        victim, most = -1, 0
        for j, (a, b) in enumerate(self._ranges):
            if b - a > most:
                victim, most = j, b - a
        if most == 0:
            return False
        end = self._ranges[victim][1]
        take = most // 2 if most >= 2 * self._batch else most
        self._ranges[victim][1] = end - take
        self._ranges[wid] = [end - take, end]
        return True

    def _take(self, wid: int) -> range | None:
        """A batch of entry indexes for worker ``wid``; None when all is handed out."""
        while True:
            if self._stop.is_set():
                raise _Stop
            with self._qlock:
                if wid < self._limit:
                    r = self._ranges[wid]
                    if r[0] >= r[1]:
                        if not self._steal(wid):
                            self._all_handed_out = True
                            break
                        r = self._ranges[wid]
                    start = r[0]
                    end = min(r[1], start + self._batch)
                    r[0] = end
                    return range(start, end)
                if self._all_handed_out:
                    return None
            # Not allowed to work now: sleep until the limit changes or all work
            # is handed out (both notify), not in a polling loop.
            with self._gate:
                self._gate.wait(1.0)
        with self._gate:
            self._gate.notify_all()  # idle workers may exit now
        return None

    # -- the worker -------------------------------------------------------------
    def _worker(self, wid: int) -> None:
        cf: CatFile | None = None
        plain: CatFile | None = None  # for symlinks when the main process filters
        try:
            entries = self.entries
            skip = self.skip
            pending: deque[int] = deque()  # entries asked for, not yet answered
            sizes: deque[int] = deque()  # their request lengths (the same after a restart)
            pending_bytes = 0
            batch: range | None = None
            pos = 0
            exhausted = False
            restarts = 0
            st = self.worker_stats[wid]
            while True:
                if self._stop.is_set():
                    raise _Stop
                # Top up the requests in flight, in bursts (one write per ~50
                # requests instead of one per file, for us and for git).
                out: list[bytes] = []
                most = PENDING_BATCHES * self._batch
                while not exhausted and len(pending) < most and pending_bytes < (
                    REQUEST_WINDOW if out or pending_bytes <= REQUEST_LOW_WATER else 0
                ):
                    if batch is None or pos >= len(batch):
                        batch = self._take(wid)
                        pos = 0
                        if batch is None:
                            exhausted = True
                            break
                    i = batch[pos]
                    pos += 1
                    if skip is not None and skip[i]:
                        continue
                    e = entries[i]
                    if e.mode == MODE_GITLINK:
                        self._write_gitlink(i, e)
                        st.files += 1
                        continue
                    if e.mode == MODE_SYMLINK and self.opts.filters:
                        if plain is None:
                            plain = self._open(wid, filters=False)
                        self._symlink_via(plain, i, e, st)
                        continue
                    if cf is None:
                        cf = self._open(wid, filters=self.opts.filters)
                    line = cf.request_line(e.oid, e.path)
                    if self.opts.filters and not self.opts.nul_requests and b"\n" in e.path:
                        # Cannot be said on a newline-terminated request line (git < 2.38).
                        self._write_one_shot(i, e, st)
                        continue
                    out.append(line)
                    pending.append(i)
                    sizes.append(len(line))
                    pending_bytes += len(line)
                if out:
                    assert cf is not None
                    try:
                        cf.send(*out)
                    except CatFileError as exc:  # it died: a send is where that shows first
                        restarts = self._give_up_or_count(exc, entries[pending[0]], restarts, st)
                        cf, pending_bytes = self._restart(wid, cf, pending)
                        continue
                if not pending:
                    if exhausted:
                        break
                    continue
                i = pending.popleft()
                size = sizes.popleft()
                e = entries[i]
                try:
                    self._receive(cf, i, e, st)  # type: ignore[arg-type]
                except CatFileError as exc:
                    # Restart the process and ask again for everything unanswered
                    # (the file of entry i, if begun, was removed by _write_file).
                    restarts = self._give_up_or_count(exc, e, restarts, st)
                    pending.appendleft(i)
                    sizes.appendleft(size)
                    cf, pending_bytes = self._restart(wid, cf, pending)  # type: ignore[arg-type]
                    continue
                pending_bytes -= size
            if cf is not None:
                cf.close()
            if plain is not None:
                plain.close()
        except _Stop:
            pass
        except BaseException as exc:  # noqa: BLE001 - every failure reaches the caller
            self._fail(exc)
        finally:
            for proc in (cf, plain):
                if proc is not None:
                    proc.kill()
            with self._gate:
                self._live -= 1
                if self._live == 0:
                    self._done.set()
                self._gate.notify_all()

    def _give_up_or_count(
        self, exc: CatFileError, e: Entry, restarts: int, st: WorkerStats
    ) -> int:
        """Raise the error a user sees, or count one more restart."""
        if self._stop.is_set():
            raise _Stop from None  # killed by us (another worker failed or an interrupt)
        where = f"{e.oid} for {quote_path(e.path)}"
        if isinstance(exc, MissingObjectError):
            raise MissingObjectError(
                f"object {where} is missing from the repository", stderr=exc.stderr
            ) from None
        if restarts >= MAX_RESTARTS:
            raise CatFileError(
                f"{exc.detail} (last request: {where}; gave up after {restarts} restart"
                f"{'s' if restarts != 1 else ''})",
                stderr=exc.stderr,
            ) from None
        st.restarts += 1
        return restarts + 1

    def _restart(self, wid: int, cf: CatFile, pending: deque[int]) -> tuple[CatFile, int]:
        """A fresh process for worker ``wid``, asked again for every pending entry."""
        cf.kill()
        cf = self._open(wid, filters=self.opts.filters)
        if not pending:
            return cf, 0
        entries = self.entries
        lines = [cf.request_line(entries[j].oid, entries[j].path) for j in pending]
        # If it broke already, the next read re-raises that and counts a restart.
        with contextlib.suppress(CatFileError):
            cf.send(*lines)
        return cf, sum(len(x) for x in lines)

    def _open(self, wid: int, *, filters: bool) -> CatFile:
        cf = CatFile(
            self.git,
            filters=filters,
            nul=self.opts.nul_requests and filters,
            attr_source=self.opts.attr_source if filters else None,
            spawn=self.spawn,
            name=f"cat-file of worker {wid}",
        )
        with self._procs_lock:
            self._procs.append(cf)
        if self._stop.is_set():
            cf.kill()
            raise _Stop
        return cf

    # -- writing ----------------------------------------------------------------
    def _receive(self, cf: CatFile, i: int, e: Entry, st: WorkerStats) -> None:
        kind, size = cf.read_header(e.oid)
        if kind != b"blob":
            cf.skip(size)
            raise PcheckoutError(
                f"tree entry {e.path.decode('utf-8', 'backslashreplace')} is a {kind.decode()}, "
                "not a blob"
            )
        if cf.filters:
            if size <= SMALL_BLOB:
                parts: list[bytes] = []
                cf.read_filtered(parts.append)
                data = b"".join(parts)
                self._write_file(i, e, data, None, len(data))
                size = len(data)
            else:
                size = self._write_file(i, e, None, cf, -1)
        elif e.mode == MODE_SYMLINK:
            target = cf.read_small(size)
            self._write_symlink(i, e, target)
        elif size <= SMALL_BLOB:
            data = cf.read_small(size)
            self._write_file(i, e, data, None, size)
        else:
            self._write_file(i, e, None, cf, size)
        st.files += 1
        st.bytes += size

    def _path(self, e: Entry) -> bytes:
        return self.opts.root + b"/" + e.path

    def _write_file(
        self, i: int, e: Entry, data: bytes | None, cf: CatFile | None, size: int
    ) -> int:
        """Create and fill one file; ``size=-1`` streams converted contents."""
        parent = e.path.rpartition(b"/")[0]
        if parent and parent not in self._dirs_made:
            self._ensure_dir(parent)
        path = self.opts.root + b"/" + e.path
        mode = 0o777 if e.mode == MODE_EXEC else 0o666
        try:
            try:
                fd = os.open(path, O_CREATE, mode)
            except FileExistsError:
                if not self.opts.overwrite:
                    raise
                self._remove_in_the_way(path)
                fd = os.open(path, O_CREATE, mode)
        except OSError as exc:
            raise WriteError(e.path, exc) from None
        written = [0]

        def sink(chunk: bytes) -> None:
            write_all(fd, chunk)
            written[0] += len(chunk)

        try:
            try:
                if data is not None:
                    write_all(fd, data)
                    written[0] = len(data)
                elif size < 0:
                    assert cf is not None
                    cf.read_filtered(sink)
                else:
                    assert cf is not None
                    cf.stream_to(size, sink)
                self.stats[i] = pack_stat(os.fstat(fd))
            finally:
                os.close(fd)
        except OSError as exc:
            _unlink_quietly(path)
            raise WriteError(e.path, exc) from None
        except BaseException:
            _unlink_quietly(path)  # never leave a truncated file behind
            raise
        return written[0]

    def _write_symlink(self, i: int, e: Entry, target: bytes) -> None:
        if not self.opts.symlinks:  # core.symlinks=false: a plain file holding the target
            self._write_file(i, e, target, None, len(target))
            return
        parent = e.path.rpartition(b"/")[0]
        if parent and parent not in self._dirs_made:
            self._ensure_dir(parent)
        path = self._path(e)
        try:
            try:
                os.symlink(target, path)
            except FileExistsError:
                if not self.opts.overwrite:
                    raise
                self._remove_in_the_way(path)
                os.symlink(target, path)
            self.stats[i] = pack_stat(os.lstat(path))
        except OSError as exc:
            raise WriteError(e.path, exc) from None

    def _symlink_via(self, cf: CatFile, i: int, e: Entry, st: WorkerStats) -> None:
        cf.send(cf.request_line(e.oid))
        self._receive(cf, i, e, st)

    def _write_gitlink(self, i: int, e: Entry) -> None:
        # As git: an empty directory for a submodule that is not checked out.
        self._ensure_dir(e.path)
        try:
            self.stats[i] = pack_stat(os.lstat(self._path(e)))
        except OSError as exc:
            raise WriteError(e.path, exc) from None

    def _write_one_shot(self, i: int, e: Entry, st: WorkerStats) -> None:
        """Filtered contents for a path with a newline, on git < 2.38."""
        proc = self.git.run("cat-file", "--filters", f"--path={os.fsdecode(e.path)}", e.oid)
        if e.mode == MODE_SYMLINK:
            self._write_symlink(i, e, proc.stdout)
        else:
            self._write_file(i, e, proc.stdout, None, len(proc.stdout))
        st.files += 1
        st.bytes += len(proc.stdout)

    def _ensure_dir(self, d: bytes) -> None:
        """Make directory ``d`` (relative) exactly once, whoever asks first."""
        if d in self._dirs_made:
            return
        parent = d.rpartition(b"/")[0]
        if parent:
            self._ensure_dir(parent)
        with self._dir_lock:
            if d in self._dirs_made:
                return
            ev = self._dirs_claimed.get(d)
            owner = ev is None
            if owner:
                ev = self._dirs_claimed[d] = threading.Event()
        assert ev is not None
        if not owner:
            ev.wait()
            if d not in self._dirs_made:
                raise _Stop  # its owner failed and reported why
            return
        try:
            path = self.opts.root + b"/" + d
            try:
                os.mkdir(path, 0o777)
            except FileExistsError:
                st = os.lstat(path)
                if not stat_mod.S_ISDIR(st.st_mode):
                    if not self.opts.overwrite:
                        raise
                    self._remove_in_the_way(path)
                    os.mkdir(path, 0o777)
            self._dirs_made.add(d)
        except OSError as exc:
            raise WriteError(d, exc) from None
        finally:
            ev.set()

    def _remove_in_the_way(self, path: bytes) -> None:
        st = os.lstat(path)
        if stat_mod.S_ISDIR(st.st_mode):
            import shutil

            shutil.rmtree(path)
        else:
            os.unlink(path)

    # -- failure ----------------------------------------------------------------
    def _fail(self, exc: BaseException) -> None:
        with self._gate:
            if self._error is None:
                self._error = exc
            self._stop.set()
            self._gate.notify_all()

    def _kill_all(self) -> None:
        with self._procs_lock:
            procs = list(self._procs)
        for p in procs:
            p.kill()


def _fd_budget() -> int:
    """How many workers the open-file limit (RLIMIT_NOFILE) leaves room for.

    A low ``ulimit -n`` then means fewer workers instead of EMFILE half way
    through; at least one worker always runs (and fails clearly if even that
    does not fit).
    """
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 1 << 30
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        in_use = 3
    return max(1, (soft - in_use - FDS_RESERVED) // FDS_PER_WORKER)


def _unlink_quietly(path: bytes) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
