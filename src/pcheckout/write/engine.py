"""The parallel writer: N worker threads, each with its own cat-file process.

Work is one shared list of entries handed out in small contiguous batches
(neighbouring paths share directories, so one worker usually makes a
directory and fills it).  Each region of the list belongs to one worker; a
worker that runs out steals the far half of the largest region left.  What
one thread does with its batches (the request pipeline, cat-file restarts)
is ``write/worker.py``; creating files and directories is ``fs/files.py``.

There is no serial per-entry phase: directories are made on demand by
whichever worker first needs them, every stat is taken by the worker that
wrote the file, and nothing is checked per path in an empty destination
(``O_EXCL`` turns any surprise into an error instead).

The number of workers allowed to take new batches (``limit``) may change
while the checkout runs; the adaptive controller drives it.  The first
failure of any worker stops the others and reaches the caller.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from pcheckout.fs.files import Abandoned, Destination
from pcheckout.git.catfile import CatFile, Prestarted, Spawn
from pcheckout.git.convert import Conversion
from pcheckout.git.odb import LooseObjects
from pcheckout.git.runner import Git
from pcheckout.git.tree import Entry
from pcheckout.write.journal import Journal
from pcheckout.write.lfsread import ReadAhead, interleaved
from pcheckout.write.worker import Stop, Worker, WorkerStats

#: Batch bounds.  Batches are cut so each allowed worker gets several
#: (load balance at the end of the run) but not so small that the shared
#: queue lock is taken per file; 64 is ~1 ms of tmpfs work.
MIN_BATCH, MAX_BATCH, BATCHES_PER_WORKER = 1, 64, 8

#: Open files one worker holds at most: its cat-file's stdin, stdout and stderr
#: file, the same again for the plain cat-file that filtered mode uses for
#: symlinks, for the side cat-file a streamed file's retry asks (fs/files.py) and
#: for the fallback cat-file of loose objects gone or damaged, the loose object
#: being read and the file being written (14), rounded up for the pipes that
#: exist briefly while a process starts.
FDS_PER_WORKER = 16
#: Descriptors of one cat-file process: stdin, stdout, the stderr file.
FDS_PER_CATFILE = 3
#: Descriptors kept free for the main thread (git commands, the index, the
#: marker) when the open-file limit caps the worker count.
FDS_RESERVED = 16


@dataclass(frozen=True)
class EngineOptions:
    root: bytes  # destination directory, absolute
    workers: int  # threads started (the most that may ever run)
    initial_limit: int | None = None  # how many may take work at first (default: workers)
    filters: bool = False  # some entries go through cat-file --filters (drivers, encodings)
    #: per entry: how it is converted (None: as stored); None: nothing converts
    conversions: Sequence[Conversion | None] | None = None
    nul_requests: bool = False  # cat-file -z (git >= 2.38)
    attr_source: str | None = None  # git --attr-source=<tree> (git >= 2.41)
    symlinks: bool = True  # core.symlinks
    overwrite: bool = False  # replace what is in the way (resume, --force)
    journal: Journal | None = None  # records each completed entry (write/journal.py)
    loose: LooseObjects | None = None  # blobs the workers read themselves (git/odb.py)
    #: threads reading the local LFS objects ahead of the writers (write/lfsread.py); 0: none
    lfs_read_ahead: int = 0


class Progress(NamedTuple):
    """Written so far, over all workers."""

    files: int
    bytes: int


@dataclass
class Outcome:
    stats: list[bytes | None]  # fs.files.pack_stat() per entry
    files: int
    bytes: int
    seconds: float
    restarts: int
    workers_used: int
    limit_history: list[tuple[float, int]] = field(default_factory=list)
    processes: bool = False  # the workers were forked processes (forked.py), not threads
    kept: int = 0  # entries a resumed run found already written (write/worktree.py)
    adapt_summary: str | None = None  # what the adaptive controller did, if it ran
    #: What the writers' git processes printed on stderr (git's own lines about the files
    #: it converted), for the user, as git's checkout prints them.
    git_said: list[builtins.bytes] = field(default_factory=list)  # (``bytes`` is a field)


class Engine:
    def __init__(
        self,
        git: Git,
        entries: Sequence[Entry],
        opts: EngineOptions,
        *,
        spawn: Spawn | None = None,
        skip: Sequence[bool] | None = None,
        prestarted: Prestarted | None = None,
    ) -> None:
        self.git = git
        self.prestarted = prestarted  # plain cat-files started ahead (git/catfile.py)
        self.entries = entries
        self.opts = opts
        self.spawn = spawn
        self.skip = skip
        self.stats: list[bytes | None] = [None] * len(entries)
        self.git_said: list[bytes] = []  # (appended by the workers' threads: list.append)
        self.worker_stats = [WorkerStats() for _ in range(max(1, opts.workers))]
        self.dest = Destination(opts.root, overwrite=opts.overwrite, symlinks=opts.symlinks)
        self.journal = opts.journal
        self.loose = opts.loose
        self.lfs_reads: ReadAhead | None = None  # started by run() (write/lfsread.py)
        #: Set on the first failure or an interrupt: every worker stops.
        self.stopping = threading.Event()
        self._error: BaseException | None = None
        self._qlock = threading.Lock()
        self._ranges: list[list[int]] = []  # per worker: [next, end) of its region
        self._all_handed_out = False
        self._limit = max(1, min(opts.initial_limit or opts.workers, opts.workers))
        self._gate = threading.Condition()
        #: Entries per batch now (read by the workers without the lock).
        self.batch = self._batch_size(self._limit)
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
                self.batch = self._batch_size(n)
                self._gate.notify_all()
            self.limit_history.append((time.monotonic() - self._t0, n))

    def progress(self) -> Progress:
        stats = self.worker_stats
        return Progress(sum(w.files for w in stats), sum(w.bytes for w in stats))

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
        # (the cat-files started ahead are open already, and a worker's share once taken)
        held = 0 if self.prestarted is None else FDS_PER_CATFILE * self.prestarted.ready()
        nworkers = max(1, min(self.opts.workers, n, fd_budget(held))) if n else 0
        self._split(n, nworkers)
        self._live = nworkers
        if nworkers == 0:
            self._done.set()
        conversions, nul = self.opts.conversions, self.opts.nul_requests
        self.lfs_reads = self._read_ahead()
        for i in range(nworkers):
            worker = Worker(self, i, self.worker_stats[i], conversions=conversions, nul=nul)
            t = threading.Thread(
                target=self._work, args=(worker,), name=f"pcheckout-w{i}", daemon=True
            )
            threads.append(t)
        try:
            for t in threads:
                t.start()
            while not self._done.wait(interval):
                if tick is not None and not self.stopping.is_set():
                    tick(self)
            for t in threads:
                t.join()
        except BaseException as exc:
            self._fail(exc)
            self._kill_all()
            for t in threads:
                # A SIGTERM raised in Thread.start() leaves that thread (and those after it)
                # not started: join() would raise RuntimeError over the interruption.
                with contextlib.suppress(RuntimeError):
                    t.join(5)
            raise
        finally:
            if self.lfs_reads is not None:
                self.lfs_reads.close()
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
            git_said=self.git_said,
        )

    def _read_ahead(self) -> ReadAhead | None:
        """The local LFS objects read ahead of the writers, in the order their regions
        reach them (``write/lfsread.py``), where the options ask for it."""
        conversions = self.opts.conversions
        if not self.opts.lfs_read_ahead or conversions is None:
            return None
        skip = self.skip
        smudges = {
            i: c.lfs
            for i, c in enumerate(conversions)
            if c is not None and c.lfs is not None and (skip is None or not skip[i])
        }
        if not smudges:
            return None
        regions = [[i for i in range(a, b) if i in smudges] for a, b in self._ranges]
        order = interleaved(regions)
        return ReadAhead(smudges, order, self.opts.lfs_read_ahead).start()

    # -- work distribution ----------------------------------------------------
    def _batch_size(self, limit: int) -> int:
        n = len(self.entries)
        return max(MIN_BATCH, min(MAX_BATCH, n // max(1, limit * BATCHES_PER_WORKER)))

    def _split(self, n: int, nworkers: int) -> None:
        """One contiguous region per initially allowed worker.

        Writers that share a directory serialize on it (ext4 and the VFS hold
        the parent's lock across a create, so over NFS or FUSE across a whole
        round trip): git gives each worker one contiguous chunk for that
        reason.  Measured on the dev VM's ext4 root with 5000 files: one shared
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
        take = most // 2 if most >= 2 * self.batch else most
        self._ranges[victim][1] = end - take
        self._ranges[wid] = [end - take, end]
        return True

    def take(self, wid: int) -> range | None:
        """A batch of entry indexes for worker ``wid``; None when all is handed out."""
        while True:
            if self.stopping.is_set():
                raise Stop
            with self._qlock:
                if wid < self._limit:
                    r = self._ranges[wid]
                    if r[0] >= r[1]:
                        if not self._steal(wid):
                            self._all_handed_out = True
                            break
                        r = self._ranges[wid]
                    start = r[0]
                    end = min(r[1], start + self.batch)
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

    # -- the workers' side ---------------------------------------------------------
    def open_catfile(self, wid: int, *, filters: bool) -> CatFile:
        """A new cat-file for worker ``wid`` (a plain one started ahead, if any is left);
        every one is killed if the run is interrupted."""
        cf = None if filters or self.prestarted is None else self.prestarted.take(self.git)
        if cf is not None:
            cf.name = f"cat-file of worker {wid}"
        else:
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
        if self.stopping.is_set():
            cf.kill()
            raise Stop
        return cf

    def _work(self, worker: Worker) -> None:
        """One thread: the worker's run; its first failure stops every other."""
        try:
            worker.run()
        except (Stop, Abandoned):
            pass
        except BaseException as exc:  # noqa: BLE001 - every failure reaches the caller
            self._fail(exc)
        finally:
            worker.kill()
            with self._gate:
                self._live -= 1
                if self._live == 0:
                    self._done.set()
                self._gate.notify_all()

    # -- failure ----------------------------------------------------------------
    def _fail(self, exc: BaseException) -> None:
        with self._gate:
            if self._error is None:
                self._error = exc
            self.stopping.set()
            self._gate.notify_all()

    def _kill_all(self) -> None:
        with self._procs_lock:
            procs = list(self._procs)
        for p in procs:
            p.kill()


def fd_budget(held: int = 0) -> int:
    """How many workers the open-file limit (RLIMIT_NOFILE) leaves room for.

    A low ``ulimit -n`` then means fewer workers instead of EMFILE half way
    through; at least one worker always runs (and fails clearly if even that
    does not fit).
    """
    try:
        import resource  # POSIX only (absent on Windows): the ImportError below

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 1 << 30
    if soft == resource.RLIM_INFINITY:
        return 1 << 30
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        in_use = 3
    return max(1, (soft - (in_use - held) - FDS_RESERVED) // FDS_PER_WORKER)
