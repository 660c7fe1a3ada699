"""``pcheckout tune``'s workload: measure a mount once, pick the knee, remember it per mount.

A static table cannot know a given NFS server, SMB share or virtual disk (the idea is Ævar's
unmerged "measure and write checkout.workers" job for git; docs/tuning.md).  So:

1. In a scratch directory under PATH, write a checkout-like workload -- many small files across
   directories: mkdir + create + write + close, some chmod and symlinks -- with N plain threads
   (the engine writes with threads too), for N halving down from ``max_workers`` to 1 like git's
   ``t/perf/p5302`` (plus the CPU counts, so they are tried themselves).  Several rounds,
   interleaved (alternating order), medians.
2. Pick the knee: the smallest N within :data:`KNEE_THRESHOLD` of the best median.
3. Store it per mount (:attr:`FsInfo.mount_key`) with :func:`pcheckout.plan.tunecache.store`,
   with the date and curve.  A checkout reads it back through :mod:`pcheckout.plan.tunecache`
   and never imports this module.

The scratch directory is removed afterwards, also on Ctrl-C (SIGINT reaches the main thread,
which only ever waits with timeouts; the ``finally`` stops the writers and removes it).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from pcheckout.errors import DestinationError, UsageError, WriteError
from pcheckout.fs.detect import FsInfo, detect
from pcheckout.plan.policy import MAX_WORKERS, CpuInfo
from pcheckout.plan.tunecache import TuneResult, WriterTimes, store

#: The knee: the smallest count whose median throughput is within this fraction of the best.
#: "A few percent" was asked for; 5% is a guess in that range.  Not yet validated on a quiet
#: machine: every tmpfs run on the dev VM (2 vCPU) had other benchmarks on both CPUs, and per-round
#: rates then varied by up to 2x (docs/tuning.md, Measurements), far more than 5%; medians of 3
#: rounds help only so far.
KNEE_THRESHOLD: float = 0.05

#: Default budget when neither --files nor --duration is given.  A guess at what a user will wait
#: for once per mount: 7-8 counts x 3 rounds -> ~0.2 s of writing per measurement, which on a
#: 2 ms-latency filesystem still completes ~20 files at 1 worker.
DEFAULT_DURATION_S: float = 10.0
#: Share of the budget spent writing; the rest goes to removing what was written.  Measured on
#: tmpfs on the dev VM (2 vCPU): 4 s of writing took 8 s wall, i.e. removal costs about as much
#: as writing (docs/tuning.md, step 4).
WRITE_SHARE: float = 0.5
#: Shortest time slice per measurement (thread start-up and the tail would dominate below it).
MIN_SLICE_S: float = 0.05

#: Files per directory of the workload.  linux.git (v5.8) has ~70k files in ~4.7k directories,
#: ~15 per directory; 16 keeps the arithmetic round.
FILES_PER_DIR: int = 16
#: Directories per parent directory (a second level, so mkdir of parents also races as in a
#: real tree).  A guess with the same order of magnitude as above.
DIRS_PER_PARENT: int = 16
#: File sizes cycle through 0 .. MAX_FILE_SIZE-1 bytes (mean ~4 KiB): a typical source file.
#: linux.git's median blob is a few KiB; the exact shape matters little, the per-file cost
#: dominates on every filesystem we target.
MAX_FILE_SIZE: int = 8192
#: One file in CHMOD_EVERY is made executable (git writes mode 0755 for a few % of files).
CHMOD_EVERY: int = 16
#: One entry in SYMLINK_EVERY is a symlink (rarer than executables in typical trees).
SYMLINK_EVERY: int = 32
#: Threads used to remove the workload after each measurement.  NFS writes keep improving to
#: ~16 workers (seed 001, Tavares's NFS RFC); removal is the same kind of per-file round trips.
REMOVE_THREADS: int = 16

_PAYLOAD = bytes(range(256)) * (MAX_FILE_SIZE // 256)
_POLL_S = 0.1  # how often the waiting main thread wakes up (so Ctrl-C is handled promptly)


@dataclass(frozen=True)
class TuneOptions:
    path: str
    max_workers: int = MAX_WORKERS
    files: int | None = None  # workload size per measurement
    duration: float | None = None  # seconds budget (bounds the cost)
    rounds: int = 3


# --- knee -----------------------------------------------------------------------------------------


def pick_knee(curve: Sequence[tuple[int, float]], threshold: float = KNEE_THRESHOLD) -> int:
    """The smallest worker count whose throughput is within ``threshold`` of the best."""
    if not curve:
        raise ValueError("empty curve")
    best = max(rate for _, rate in curve)
    return min(n for n, rate in curve if rate >= best * (1.0 - threshold))


def worker_counts(max_workers: int, cpus: Sequence[int | None] = ()) -> tuple[int, ...]:
    """max, max/2, ... 1 (git's p5302 halves down from the top), plus the CPU counts."""
    counts = set()
    n = max_workers
    while n >= 1:
        counts.add(n)
        n //= 2
    counts.update(c for c in cpus if c is not None and 1 <= c <= max_workers)
    return tuple(sorted(counts, reverse=True))


# --- the workload ---------------------------------------------------------------------------------


class _Workload:
    """One measurement: ``workers`` threads write directories of files until told to stop."""

    def __init__(self, root: str, workers: int, max_files: int | None) -> None:
        self.root = root
        self.workers = workers
        self.max_dirs = None if max_files is None else -(-max_files // FILES_PER_DIR)
        self.max_files = max_files
        self.stop = threading.Event()
        self.error: tuple[str, OSError] | None = None
        self.counts = [0] * workers
        self._next = 0
        self._lock = threading.Lock()
        self._start = threading.Barrier(workers + 1)

    def _take(self) -> int | None:
        with self._lock:
            k = self._next
            if self.max_dirs is not None and k >= self.max_dirs:
                return None
            self._next += 1
            return k

    def _run(self, slot: int) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            self._start.wait()
        path = self.root
        try:
            while not self.stop.is_set():
                k = self._take()
                if k is None:
                    return
                parent = os.path.join(self.root, f"p{k // DIRS_PER_PARENT}")
                path = parent
                with contextlib.suppress(FileExistsError):
                    os.mkdir(parent)
                d = os.path.join(parent, f"d{k}")
                path = d
                os.mkdir(d)
                first = k * FILES_PER_DIR
                last = first + FILES_PER_DIR
                if self.max_files is not None:
                    last = min(last, self.max_files)
                for i in range(first, last):
                    if self.stop.is_set():
                        return
                    name = os.path.join(d, f"f{i}")
                    path = name
                    if i % SYMLINK_EVERY == SYMLINK_EVERY - 1:
                        os.symlink(f"f{i - 1}", name)
                    else:
                        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                        try:
                            size = (i * 2654435761) % MAX_FILE_SIZE  # Knuth hash: a spread
                            if size:
                                os.write(fd, _PAYLOAD[:size])
                        finally:
                            os.close(fd)
                        if i % CHMOD_EVERY == 0:
                            os.chmod(name, 0o755)
                    self.counts[slot] += 1
        except OSError as exc:
            self.error = (path, exc)
            self.stop.set()

    def measure(self, seconds: float | None) -> float:
        """Run; return files/s.  Counts every completed file over the whole run time."""
        threads = [
            threading.Thread(target=self._run, args=(i,), name=f"pcheckout-tune-{i}", daemon=True)
            for i in range(self.workers)
        ]
        for t in threads:
            t.start()
        try:
            self._start.wait()
            t0 = time.monotonic()
            deadline = None if seconds is None else t0 + seconds
            for t in threads:
                while t.is_alive():
                    now = time.monotonic()
                    if deadline is not None and now >= deadline:
                        self.stop.set()
                    wait = _POLL_S if deadline is None else max(0.001, min(_POLL_S, deadline - now))
                    t.join(wait)
            elapsed = time.monotonic() - t0
        finally:
            self.stop.set()
            self._start.abort()
            for t in threads:
                t.join()
        if self.error is not None:
            path, exc = self.error
            raise WriteError(os.fsencode(path), exc)
        return sum(self.counts) / max(elapsed, 1e-9)


def remove_tree(root: str, threads: int = REMOVE_THREADS) -> None:
    """Remove a workload directory in parallel (one job per leaf directory), then the rest."""
    try:
        parents = [e.path for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
        leaves = [e.path for p in parents for e in os.scandir(p) if e.is_dir(follow_symlinks=False)]
    except OSError:
        leaves = []

    jobs = iter(leaves)
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                d = next(jobs, None)
            if d is None:
                return
            shutil.rmtree(d, ignore_errors=True)

    pool = [threading.Thread(target=work, daemon=True) for _ in range(min(threads, len(leaves)))]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _scratch(path: str) -> Iterator[str]:
    try:
        scratch = tempfile.mkdtemp(prefix=".pcheckout-tune-", dir=path)
    except OSError as exc:
        raise WriteError(os.fsencode(os.path.join(path, ".pcheckout-tune-*")), exc) from exc
    try:
        yield scratch
    finally:
        remove_tree(scratch)


# --- running a tune -------------------------------------------------------------------------------


def _today() -> str:
    return _dt.date.today().isoformat()


#: ``writers(scratch, knee, files_per_s_at_knee)``: time both writers on a probe tree under
#: ``scratch`` (in the mount) and say which won; None where they cannot both run.  The caller
#: provides it (:func:`pcheckout.tune.writers.comparer`: whole checkouts, timed).
CompareWriters = Callable[[str, int, float], WriterTimes | None]


def run_tune(
    opts: TuneOptions,
    *,
    fs: FsInfo | None = None,
    progress: Callable[[str], None] | None = None,
    writers: CompareWriters | None = None,
) -> TuneResult:
    """Measure the filesystem holding ``opts.path`` (with ``writers``, compare the two writers
    at the count found), store and return the result."""
    if opts.max_workers < 1:
        raise UsageError(f"--max-workers must be at least 1 (got {opts.max_workers})")
    if opts.rounds < 1:
        raise UsageError(f"rounds must be at least 1 (got {opts.rounds})")
    if opts.files is not None and opts.files < 1:
        raise UsageError(f"--files must be at least 1 (got {opts.files})")
    if opts.duration is not None and not opts.duration > 0:
        raise UsageError(f"--duration must be positive (got {opts.duration})")
    if not os.path.isdir(opts.path):
        raise DestinationError(f"cannot tune {opts.path}: not a directory")
    if fs is None:
        fs = detect(opts.path)
    say = progress or (lambda _msg: None)
    max_workers = min(opts.max_workers, MAX_WORKERS)
    cpus = CpuInfo.current()
    counts = worker_counts(max_workers, (cpus.logical, cpus.physical))

    duration = opts.duration
    if duration is None and opts.files is None:
        duration = DEFAULT_DURATION_S
    slice_s = None
    if duration is not None:
        slice_s = max(MIN_SLICE_S, duration * WRITE_SHARE / (opts.rounds * len(counts)))

    samples: dict[int, list[float]] = {n: [] for n in counts}
    per_round: list[tuple[tuple[int, float], ...]] = []
    with _scratch(opts.path) as scratch:
        # Warm-up (not recorded): first directory creations, page cache, thread machinery.
        warm = os.path.join(scratch, "warmup")
        os.mkdir(warm)
        _Workload(warm, counts[-1 if len(counts) == 1 else len(counts) // 2], opts.files).measure(
            None if slice_s is None else min(slice_s, 0.2)
        )
        remove_tree(warm)
        for r in range(opts.rounds):
            order = counts if r % 2 == 0 else tuple(reversed(counts))
            this_round = []
            for n in order:
                root = os.path.join(scratch, f"r{r}-w{n}")
                os.mkdir(root)
                rate = _Workload(root, n, opts.files).measure(slice_s)
                remove_tree(root)
                samples[n].append(rate)
                this_round.append((n, rate))
                say(f"round {r + 1}/{opts.rounds}: {n:>3} workers {rate:>10,.0f} files/s")
            per_round.append(tuple(sorted(this_round, reverse=True)))
        curve = tuple((n, statistics.median(samples[n])) for n in counts)
        knee = pick_knee(curve)
        times = None if writers is None else writers(scratch, knee, dict(curve)[knee])

    result = TuneResult(
        mount_key=fs.mount_key,
        mount_point=fs.mount_point,
        kind=str(fs.kind),
        measured_on=_today(),
        workers=knee,
        threshold=KNEE_THRESHOLD,
        curve=curve,
        rounds=tuple(per_round),
        writers=times,
    )
    store(result)
    return result
