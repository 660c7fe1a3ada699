"""Which writer a checkout gets, how many workers, and why.

:func:`choose_workers` is pure: (filesystem, :class:`Inputs`: CPUs, entries, bytes, explicit
choices, tuned value, git version, ceiling) -> :class:`WorkerPlan`.  Precedence, for the count
and for the writer alike: an explicit choice (``--workers``/``--writer``,
``PCHECKOUT_WORKERS``/``PCHECKOUT_WRITER``, git config) > a tuned value measured on the same
mount (or its export, in the shared file) > the policy below.  A ceiling
(``PCHECKOUT_MAX_WORKERS``, git config ``pcheckout.maxWorkers``, a tune result's) caps every
count but ``--workers``.

The writer: where writing is CPU-bound (tmpfs, local and virtual disks) git's own parallel
checkout (git >= 2.32) writes, with the plan's count as ``checkout.workers``; where calls wait
(NFS, SMB, FUSE, other network filesystems) pcheckout's engine does (docs/filesystems.md).

Sources of the numbers ("seed NNN" are the team's research seeds):

* seed 000 -- Jeff King, "index-pack: adjust default threading cap" (git, 2020): CPU-bound
  work peaks at the physical core count, about half the online CPUs on SMT machines, and
  nothing improves past 20 threads.
* seed 001 -- Matheus Tavares, "RFC: auto-enabling parallel-checkout on NFS" (git, 2020):
  linux-v5.8 checkout on NFS, single-core client.  NFS 3: 1->183.7 s, 8->68.1 s, 16->64.0 s,
  32->62.3 s, 64->63.7 s.  NFS 4.1: 8->69.4 s, 16->64.8 s, 32->64.1 s.  NFS 4.0 is flat from
  4 workers (102.7 s) to 64 (103.1 s).  A 251-file repository (bat) was best at 8-16 workers.
* seed 002 -- Pete Wyckoff on git grep threads (git, 2011): on NFS, 8 threads on 2 cores ran
  twice as fast as 2 threads, because open() blocks on the server; threads > CPUs pay off.
* git documentation, checkout.thresholdForParallelism (default 100) and checkout.workers:
  "Parallel checkout usually delivers better performance for repositories located on SSDs or
  over NFS. For repositories on spinning disks and/or machines with a small number of cores,
  the default sequential checkout often performs better."
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, NamedTuple

from pcheckout.errors import UsageError
from pcheckout.fs.kinds import family
from pcheckout.plan.cpus import CPU_BOUND_CAP as CPU_BOUND_CAP  # (re-exported)
from pcheckout.plan.cpus import CpuInfo as CpuInfo

if TYPE_CHECKING:
    from pcheckout.fs.detect import FsInfo

Source = Literal["user", "tuned", "policy"]
Writer = Literal["pcheckout", "git"]
WRITERS: tuple[Writer, ...] = ("pcheckout", "git")

#: Hard cap for any source, user choices included.  seed 001 measured up to 64 workers and saw
#: no gain past 32 on any NFS version (64 was equal or slower); beyond that threads only add
#: memory, open descriptors and lock contention.  64 leaves headroom over the best measured 32.
MAX_WORKERS = 64

#: Below this many entries one worker is used: git's checkout.thresholdForParallelism default.
#: Threads are cheaper to start than git's worker processes, so this is conservative.
PARALLEL_THRESHOLD = 100

#: NFS 3, 4.1, 4.2: seed 001, the knee is at 16 (within 3% of the best on linux.git, and the
#: best on the 251-file repository); 32 was best on linux.git, by 2.6% on NFS 3.
NFS_WORKERS = 16
#: ... and for big checkouts, where seed 001's linux.git (~70k entries) still gained 16 -> 32.
NFS_WORKERS_LARGE = 32
#: Entry count from which NFS_WORKERS_LARGE is used.  A guess between seed 001's two repositories
#: (251 and ~70k entries); to be refined by tuning.
NFS_LARGE_ENTRIES = 20_000
#: NFS 4.0: seed 001, flat from 4 workers on (102.7 s at 4, 104.9 s at 8, 103.1 s at 64).
NFS40_WORKERS = 4
#: NFS of unknown version: 8 gets most of the 3/4.1 win (seed 001: 68-69 s vs 62-64 s best)
#: and costs 4.0 only ~2% (104.9 s vs 102.7 s).
NFS_UNKNOWN_WORKERS = 8
#: SMB/CIFS: latency-bound like NFS (open/create is a round trip, seed 002's argument), but no
#: measurement yet; a guess, the same middle value as NFS of unknown version.
SMB_WORKERS = 8
#: Ceph, Lustre, GPFS, glusterfs, 9p ...: latency-bound (seed 002); no measurement; a
#: guess equal to the NFS knee, as these are built for many clients in flight.
NETWORK_WORKERS = 16
#: sshfs: at most 10 requests in flight, whatever the number of writers (sshfs 3.7 on libfuse
#: 3.12 or later runs 10 FUSE threads; docs/filesystems.md, *sshfs*), so more writers than that
#: only queue in the kernel.  A few more than 10 keep every thread busy while a writer is
#: between files.  Measured through scripts/sshfsmount.py (docs/benchmarks.md, *sshfs*): a
#: git.git-shaped checkout was fastest at 16 workers at 0.5 and 1 ms of round trip, 32 within
#: 3%, 64 and 8 slower; ``max_conns`` (more SFTP connections) did not raise the ceiling.
SSHFS_WORKERS = 16
#: FUSE: every create, write and close is a round trip to the daemon.  Measured on
#: scripts/latencyfs (docs/benchmarks.md, 2000 files): the best fixed counts were 32 and 64 at
#: 0.5 ms and 1 ms per request, 8 workers were 1.4-1.6x slower.  A single-threaded daemon
#: serialises anyway, and the adaptive controller backs off where more writers do not pay.
FUSE_WORKERS = 32
#: Virtual disks (virtio, xen, nbd, rbd, zfs datasets, loop) get the CPU-bound count, like any local
#: block filesystem: a create lands in the page cache and writeback is asynchronous, so no write
#: waits on the disk.  Measured on this project's dev VM (docs/benchmarks.md, root ext4 on virtio
#: vda, rotational=1, 5069 files, 2 vCPUs): git's time is flat from 2 to 16 workers (0.21-0.23 s),
#: pcheckout at 2 workers 0.365 s vs 0.417 s at 8 (the count used for virtual disks before).  The
#: "~0.6 ms per create" once seen there was kernel CPU, not latency: that ext4 has no journal, and a
#: journal-less ext4 skips inodes freed in the last minute or more while allocating
#: (fs/ext4/ialloc.c, recently_deleted), so creating files right after deleting a tree costs 2-3 s
#: of system time per 5000 files; there 8 writers took 0.54-1.9 s and 2 took 0.33-0.38 s. Spinning
#: disks: one writer (git's checkout.workers note: sequential often performs better).
HDD_WORKERS = 1

#: Fewer entries per worker than this and thread start-up and queue traffic dominate.  A guess;
#: seed 001's 251-file repository was still best at 8-16 workers (16-31 entries each).
MIN_ENTRIES_PER_WORKER = 8

#: Adapting the count during a run needs enough entries to measure and still profit.  Probing
#: double and half the start costs time at counts that are worse; measured on the latency
#: filesystem with 2025 entries (docs/benchmarks.md, run C), adapting from the FUSE start of 32
#: took 0.999 s vs 0.884 s fixed at 0.5 ms and 1.231 s vs 1.092 s at 1 ms: a ~1 s checkout is
#: over before probing can pay.  From 10 000 entries a checkout at 1 ms lasts several seconds.
ADAPT_MIN_ENTRIES = 10_000

#: git's parallel checkout (``checkout.workers``, ``checkout.thresholdForParallelism``) first
#: shipped in git 2.32 (git's Documentation/RelNotes/2.32.0.txt; parallel-checkout.c).
GIT_PARALLEL_CHECKOUT = (2, 32)

#: git's writer on CPU-bound kinds: this many ``checkout.workers`` per CPU-bound worker
#: (physical core).  git's main process walks the index, lstat()s and makes directories while
#: its workers inflate and write, so it runs beside them: docs/benchmarks.md run C, tmpfs, 2
#: vCPUs, 5069 files: git at 4 workers 0.169 s, at 2 0.190 s, at 8 0.170 s; the local disk
#: 0.269 s at 4, 0.292 s at 2.
GIT_WORKERS_PER_CORE = 2

_CONFIG_KEY = "pcheckout.workers"
_GIT_CONFIG_KEY = "checkout.workers"
#: Set beside checkout.workers by the file `pcheckout tune --git-config` writes, to the same
#: value: a checkout.workers equal to it is pcheckout's own, not an explicit choice.
TUNED_GIT_CONFIG_KEY = "pcheckout.gitconfigworkers"
_ENV_KEY = "PCHECKOUT_WORKERS"
_WRITER_CONFIG_KEY = "pcheckout.writer"
#: The ceiling's keys (docs/tuning.md, *A ceiling per mount*).
_MAX_CONFIG_KEY = "pcheckout.maxworkers"
_MAX_ENV_KEY = "PCHECKOUT_MAX_WORKERS"
_WRITER_ENV_KEY = "PCHECKOUT_WRITER"


class Explicit(NamedTuple):
    workers: int
    where: str  # "--workers", "PCHECKOUT_WORKERS", "git config pcheckout.workers", ...


class ExplicitWriter(NamedTuple):
    writer: Writer
    where: str  # "--writer", "PCHECKOUT_WRITER", "git config pcheckout.writer"


class Tuned(NamedTuple):
    workers: int
    measured_on: str  # ISO date
    mount_key: str
    writer: Writer | None = None  # the writer `pcheckout tune` measured faster, if it compared
    git_workers: int | None = None  # git's best measured checkout.workers (with ``writer``)
    git_seconds: float | None = None  # the probe checkout's median time by git's writer ...
    engine_seconds: float | None = None  # ... and by pcheckout's engine
    probe_files: int = 0  # entries of that probe checkout
    ceiling: int | None = None  # no count above this on that mount (tune's knee, or an admin's)
    where: str = "for this mount"  # where the result was found: shown by --dry-run and detect
    file: str = ""  # the file it was read from (the user's cache, or the shared file)

    def to_json(self) -> dict[str, object]:
        """``detect --json``'s and the checkout's ``tuned`` (docs/json.md)."""
        return {
            "workers": self.workers,
            "ceiling": self.ceiling,
            "measured_on": self.measured_on,
            "writer": self.writer,
            "where": self.where,
            "file": self.file,
        }


class Ceiling(NamedTuple):
    """The most workers a count may have on this mount, and who said so."""

    workers: int
    where: str  # "PCHECKOUT_MAX_WORKERS", "git config pcheckout.maxworkers", "the tune ..."
    #: Set as a ceiling (the key or the variable): it binds explicit counts too.  A tune
    #: result's measured one binds only the counts pcheckout chooses itself.
    explicit: bool = True


class Inputs(NamedTuple):
    """Everything the policy weighs besides the filesystem (:func:`choose_workers`)."""

    cpus: CpuInfo
    entries: int
    nbytes: int = 0  # does not change the count yet: no measurement says how
    explicit: Explicit | None = None
    tuned: Tuned | None = None
    allow_adapt: bool = True
    writer: ExplicitWriter | None = None
    git_version: tuple[int, int, int] = (0, 0, 0)  # (0, 0, 0): unknown, git's writer unused
    processes: bool | None = None  # forked engine workers (True) or threads (False) forced
    ceilings: tuple[Ceiling, ...] = ()


class WorkerPlan(NamedTuple):
    workers: int
    reason: str  # one line
    source: Source
    adapt: bool = False  # the engine may adapt the count during the checkout
    processes: bool = False  # workers are forked processes, not threads (CPU-bound writing)
    writer: Writer = "pcheckout"  # who writes: pcheckout's engine or git's own checkout
    writer_reason: str = "pcheckout's engine"  # one line: why that writer
    writer_source: Source = "policy"
    ceiling: int = MAX_WORKERS  # the adaptive controller goes no higher
    cpus: CpuInfo | None = None  # the CPUs weighed (and the limit that set them)
    tuned: Tuned | None = None  # the stored tune result found for the mount, applied or not


def _parse_count(value: str, where: str) -> int | None:
    """``None`` for ``auto``; a positive int otherwise; ``UsageError`` for anything else."""
    text = value.strip()
    if text.lower() == "auto":
        return None
    try:
        n = int(text, 10)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(
            f"invalid {where} value {value!r}: expected a positive number of workers or 'auto'"
        )
    return n


def _config_get(git_config: Mapping[str, str], key: str) -> str | None:
    # git config names are case-insensitive in section and key (git lists them lower-cased).
    for k, v in git_config.items():
        if k.lower() == key:
            return v
    return None


def parse_workers(value: str, where: str = "--workers") -> int | None:
    """A ``--workers`` value as typed: None for ``auto``, else a positive count;
    anything else is a ``UsageError`` naming ``where``."""
    return _parse_count(value, where)


def explicit_choice(
    cli_workers: int | None, environ: Mapping[str, str], git_config: Mapping[str, str]
) -> Explicit | None:
    """The user's explicit worker count, if any, and where it came from.

    Precedence: ``--workers N`` > ``PCHECKOUT_WORKERS`` > git config ``pcheckout.workers`` >
    git config ``checkout.workers``.  ``auto`` (or no value) at one level defers to the next.

    Decision on ``checkout.workers``: it counts, last, unless ``pcheckout tune --git-config``
    set it (its file sets ``pcheckout.gitConfigWorkers`` to the same value).  It is the
    user's own statement of how parallel checkouts of this repository should be; a user who
    set it to 1 for a spinning disk means it for us too.  As in git, a value below 1 means
    the number of logical CPUs.  An unusable ``checkout.workers`` is ignored (git's own
    business), the others raise.
    """
    if cli_workers is not None:
        return Explicit(cli_workers, "--workers")
    env = environ.get(_ENV_KEY)
    if env is not None and env.strip():
        n = _parse_count(env, _ENV_KEY)
        if n is not None:
            return Explicit(n, _ENV_KEY)
    cfg = _config_get(git_config, _CONFIG_KEY)
    if cfg is not None and cfg.strip():
        n = _parse_count(cfg, f"git config {_CONFIG_KEY}")
        if n is not None:
            return Explicit(n, f"git config {_CONFIG_KEY}")
    git_cfg = _config_get(git_config, _GIT_CONFIG_KEY)
    if git_cfg is not None and git_cfg == _config_get(git_config, TUNED_GIT_CONFIG_KEY):
        # The value `tune --git-config` wrote for plain git (its file marks it): not the
        # user's statement, so the tune result it came from decides, for either writer.
        return None
    if git_cfg is not None:
        try:
            n = int(git_cfg.strip(), 10)
        except ValueError:
            return None
        if n < 1:
            return Explicit(os.cpu_count() or 1, f"git config {_GIT_CONFIG_KEY}={n} (all CPUs)")
        return Explicit(n, f"git config {_GIT_CONFIG_KEY}")
    return None


def ceiling_for(
    environ: Mapping[str, str], git_config: Mapping[str, str], tuned: Tuned | None
) -> tuple[Ceiling, ...]:
    """The ceilings that apply: ``PCHECKOUT_MAX_WORKERS`` and git config
    ``pcheckout.maxWorkers`` (set: they bind explicit counts too), and the tune result's
    (measured: it binds what pcheckout chooses).  An unusable value is a ``UsageError``
    naming where it came from."""
    found = []
    env = environ.get(_MAX_ENV_KEY)
    if env is not None and env.strip():
        found.append(Ceiling(_parse_ceiling(env, _MAX_ENV_KEY), _MAX_ENV_KEY))
    cfg = _config_get(git_config, _MAX_CONFIG_KEY)
    if cfg is not None and cfg.strip():
        where = f"git config {_MAX_CONFIG_KEY}"
        found.append(Ceiling(_parse_ceiling(cfg, where), where))
    if tuned is not None and tuned.ceiling is not None:
        found.append(Ceiling(tuned.ceiling, f"the tune result {tuned.where}", explicit=False))
    return tuple(found)


def _parse_ceiling(value: str, where: str) -> int:
    try:
        n = int(value.strip(), 10)
    except ValueError:
        n = 0
    if n < 1:
        raise UsageError(f"invalid {where} value {value!r}: expected a positive number of workers")
    return n


def _parse_writer(value: str, where: str) -> Writer | None:
    """``None`` for ``auto``; ``pcheckout`` or ``git``; ``UsageError`` for anything else."""
    text = value.strip().lower()
    if text == "auto":
        return None
    if text == "pcheckout":
        return "pcheckout"
    if text == "git":
        return "git"
    raise UsageError(f"invalid {where} value {value!r}: expected 'pcheckout', 'git' or 'auto'")


def explicit_writer(
    cli_value: str | None, environ: Mapping[str, str], git_config: Mapping[str, str]
) -> ExplicitWriter | None:
    """The user's explicit writer, if any: ``--writer`` > ``PCHECKOUT_WRITER`` > git config
    ``pcheckout.writer``, as for the worker count; ``auto`` (or no value) defers."""
    levels = (
        (cli_value, "--writer"),
        (environ.get(_WRITER_ENV_KEY), _WRITER_ENV_KEY),
        (_config_get(git_config, _WRITER_CONFIG_KEY), f"git config {_WRITER_CONFIG_KEY}"),
    )
    for value, where in levels:
        if value is not None and value.strip():
            writer = _parse_writer(value, where)
            if writer is not None:
                return ExplicitWriter(writer, where)
    return None


def _cap(n: int) -> int:
    return max(1, min(n, MAX_WORKERS))


def _policy(fs: FsInfo | None, cpus: CpuInfo, entries: int) -> tuple[int, str]:
    cpu = cpus.cpu_bound_workers
    cpu_why = (
        f"{cpu} = physical cores" if cpus.physical else f"{cpu} = half the {cpus.logical} CPUs"
    ) + " (git's own threading cap: CPU-bound work peaks there)"
    if cpus.limited_by:
        cpu_why += f"; CPUs limited by {cpus.limited_by}"
    if fs is None:
        return cpu, f"filesystem unknown: {cpu_why}"
    kind = fs.kind
    if kind == "overlay":
        if fs.upper_kind is None or fs.upper_kind == "overlay":
            return cpu, f"overlay with an unknown upper layer: {cpu_why}"
        n, why = _by_kind(fs.upper_kind, fs, cpus, entries, cpu, cpu_why)
        return n, f"overlay, writes go to its upper layer: {why}"
    return _by_kind(kind, fs, cpus, entries, cpu, cpu_why)


def _by_kind(
    kind: str, fs: FsInfo, cpus: CpuInfo, entries: int, cpu: int, cpu_why: str
) -> tuple[int, str]:
    if kind == "nfs":
        ver = fs.nfs_version
        if ver == "4.0":
            return NFS40_WORKERS, (
                f"NFS 4.0 is latency-bound but plateaus: {NFS40_WORKERS} workers "
                "(git's NFS measurements: no gain past 4 on 4.0)"
            )
        if ver in ("2", "3", "4.1", "4.2"):
            n = NFS_WORKERS_LARGE if entries >= NFS_LARGE_ENTRIES else NFS_WORKERS
            return n, (
                f"NFS {ver} is latency-bound: {n} workers keep many opens in flight "
                "(git's NFS measurements: 3 and 4.1 improve to ~16-32)"
            )
        return NFS_UNKNOWN_WORKERS, (
            f"NFS of unknown version: {NFS_UNKNOWN_WORKERS} workers (git's NFS measurements: most "
            "of the gain on 3/4.1, harmless on 4.0)"
        )
    if kind == "smb":
        return SMB_WORKERS, (
            f"SMB is latency-bound: {SMB_WORKERS} workers (a guess; git grep on NFS: "
            "threads beyond CPUs pay off when open() waits on a server)"
        )
    if kind == "network" and family(fs.fstype) == "sshfs":
        return SSHFS_WORKERS, (
            f"sshfs serves at most 10 requests at a time: {SSHFS_WORKERS} workers keep them all "
            "busy (measured: more only queue)"
        )
    if kind == "network":
        return NETWORK_WORKERS, (
            f"{fs.fstype} is a network filesystem: {NETWORK_WORKERS} workers (a guess after "
            "git's NFS measurements: opens wait on servers)"
        )
    if kind == "fuse":
        return FUSE_WORKERS, (
            f"FUSE ({fs.fstype}): {FUSE_WORKERS} workers (a guess: calls wait on a user-space "
            "daemon that may not be very parallel)"
        )
    if kind == "virtual":
        return cpu, (
            "virtual disk (its rotational flag is not trusted): writes go to the page cache, "
            f"CPU-bound like a local disk: {cpu_why}"
        )
    if kind == "hdd":
        return HDD_WORKERS, "spinning disk: 1 worker (git docs: sequential often performs better)"
    if kind == "ssd":
        return cpu, f"SSD: {cpu_why}"
    if kind == "tmpfs":
        return cpu, f"tmpfs is RAM, writing is CPU-bound: {cpu_why}"
    return cpu, f"storage kind unknown: {cpu_why}"


#: Kinds where writing a file is CPU work: no call waits on a device or a server (a block
#: device's latency is paid at writeback).
CPU_BOUND_KINDS = ("tmpfs", "ssd", "hdd", "virtual")


def _kind(fs: FsInfo | None) -> str | None:
    return None if fs is None else (fs.upper_kind if fs.kind == "overlay" else fs.kind)


def choose_workers(fs: FsInfo | None, inputs: Inputs) -> WorkerPlan:
    """The plan for writing ``inputs.entries`` files to ``fs``: the writer, its worker count,
    and why.

    Pure.  Where writing is CPU-bound and git has parallel checkout, git's own checkout
    writes (C, inflating in the process that writes: docs/benchmarks.md run C, 1.8x faster
    than pcheckout's engine on tmpfs); elsewhere pcheckout's engine.  Its workers are
    processes where writing is CPU-bound and there is a CPU for each (one interpreter lock
    each); where calls wait, or more workers than CPUs are asked for, threads (cheap to have
    many of, and they can adapt).  ``inputs.processes`` True or False asks for processes or
    threads whatever the filesystem and the CPUs (one worker is never forked).  A ceiling
    caps every count but ``--workers``, the adaptive controller's included.
    """
    return _plan(fs, inputs)._replace(cpus=inputs.cpus, tuned=inputs.tuned)


def _plan(fs: FsInfo | None, inputs: Inputs) -> WorkerPlan:
    cpus, entries = inputs.cpus, inputs.entries
    chosen, why, source = _choose_writer(fs, cpus, inputs.tuned, inputs.writer, inputs.git_version)
    plan = _choose(fs, inputs, chosen)
    if chosen == "git":
        workers = plan.workers
        reason = plan.reason
        if plan.source == "policy" and plan.workers > 1 and _kind(fs) != "hdd":
            workers = _fit(min(plan.workers * GIT_WORKERS_PER_CORE, CPU_BOUND_CAP), entries)
            reason += (
                f"; git's writer: {workers} checkout.workers ({GIT_WORKERS_PER_CORE} per "
                "core: its main process walks and makes directories beside them)"
            )
        plan = plan._replace(
            workers=workers,
            reason=reason,
            adapt=False,
            processes=False,
            writer="git",
            writer_reason=why,
            writer_source=source,
        )
        return _capped(plan, inputs)
    plan = _capped(plan._replace(writer_reason=why, writer_source=source), inputs)
    processes = inputs.processes
    if processes is None:
        processes = _kind(fs) in CPU_BOUND_KINDS and plan.workers <= cpus.logical
    if processes and plan.workers >= 2:
        return plan._replace(processes=True, adapt=False)
    return plan


def _capped(plan: WorkerPlan, inputs: Inputs) -> WorkerPlan:
    """``plan`` under its ceilings: a set one caps every count but ``--workers`` on the
    command line, a measured one the counts pcheckout chooses (policy, tuned, adapting)."""
    chosen_here = plan.source != "user"
    binding = [c for c in inputs.ceilings if c.explicit or chosen_here]
    if not binding:
        return plan
    ceiling = min(binding, key=lambda c: c.workers)
    top = _cap(ceiling.workers)
    plan = plan._replace(ceiling=top)
    if plan.workers <= top:
        return plan
    if inputs.explicit is not None and inputs.explicit.where == "--workers":
        return plan._replace(reason=plan.reason + f" (above the ceiling of {top}: {ceiling.where})")
    return plan._replace(
        workers=top, reason=plan.reason + f"; capped at {top} by {ceiling.where}", adapt=False
    )


def _version(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))


def _choose_writer(
    fs: FsInfo | None,
    cpus: CpuInfo,
    tuned: Tuned | None,
    writer: ExplicitWriter | None,
    git_version: tuple[int, int, int],
) -> tuple[Writer, str, Source]:
    """Who writes, why (one line), and where that came from."""
    has_parallel = git_version[:2] >= GIT_PARALLEL_CHECKOUT
    need = ".".join(map(str, GIT_PARALLEL_CHECKOUT))
    if writer is not None:
        if writer.writer == "git" and not has_parallel and git_version != (0, 0, 0):
            return (
                "git",
                (
                    f"{writer.where} asks for git's writer; git {_version(git_version)} "
                    f"has no parallel checkout ({need}+): it writes sequentially"
                ),
                "user",
            )
        return writer.writer, f"{writer.where} asks for the {writer.writer} writer", "user"
    kind = _kind(fs)
    if tuned is not None and _tuned_applies(fs, tuned):
        if tuned.writer is not None:
            chosen: Writer = tuned.writer
            why = f"tuned on {tuned.measured_on} {tuned.where}: " + _measured(tuned)
        elif tuned.workers > cpus.logical:
            return (
                "pcheckout",
                (
                    f"tuned on {tuned.measured_on} {tuned.where}: its best count "
                    f"({tuned.workers}) exceeds the {cpus.logical} CPUs, so calls wait: "
                    "pcheckout's engine keeps many in flight"
                ),
                "tuned",
            )
        else:
            chosen = "git"
            why = (
                f"tuned on {tuned.measured_on} {tuned.where}: its best count "
                f"({tuned.workers}) is within the {cpus.logical} CPUs, so writing is CPU-bound: "
                "git's own parallel checkout"
            )
        if chosen == "git" and not has_parallel:
            return "pcheckout", why + _too_old(git_version, need), "tuned"
        return chosen, why, "tuned"
    if kind in CPU_BOUND_KINDS:
        what = "overlay whose upper layer is " if fs is not None and fs.kind == "overlay" else ""
        why = (
            f"{what}{kind} is CPU-bound: git's own parallel checkout inflates in C where it "
            "writes (1.8x faster than pcheckout's engine on tmpfs: docs/benchmarks.md)"
        )
        if not has_parallel:
            return "pcheckout", why + _too_old(git_version, need), "policy"
        return "git", why, "policy"
    if kind is None or kind in ("unknown", "overlay"):
        return (
            "pcheckout",
            (
                "storage kind unknown: pcheckout's engine (where calls wait it is 10x faster than "
                "git's default, where writing is CPU-bound at most 1.8x slower: docs/benchmarks.md)"
            ),
            "policy",
        )
    return (
        "pcheckout",
        (
            f"{kind} is latency-bound: pcheckout's engine keeps many calls in flight (13x "
            "git's default, 3.3x git's best at 1 ms per request: docs/benchmarks.md)"
        ),
        "policy",
    )


def _measured(tuned: Tuned) -> str:
    """The writer comparison behind a tuned writer, e.g. "git's writer 0.31 s vs pcheckout's
    engine 0.52 s (a 2,000-file probe checkout)"."""
    git = f"git's writer {tuned.git_seconds:.3f} s" if tuned.git_seconds is not None else ""
    engine = (
        f"pcheckout's engine {tuned.engine_seconds:.3f} s"
        if tuned.engine_seconds is not None
        else ""
    )
    first, second = (git, engine) if tuned.writer == "git" else (engine, git)
    probe = f" (a {tuned.probe_files:,}-file probe checkout, medians)" if tuned.probe_files else ""
    if not first or not second:
        return f"the {tuned.writer} writer was faster{probe}"
    return f"{first} vs {second}{probe}"


def _too_old(git_version: tuple[int, int, int], need: str) -> str:
    if git_version == (0, 0, 0):
        return "; but git's version is not known: pcheckout's engine writes"
    return (
        f"; but git {_version(git_version)} has no parallel checkout ({need}+): "
        "pcheckout's engine writes"
    )


def _choose(fs: FsInfo | None, inputs: Inputs, writer: Writer) -> WorkerPlan:
    explicit, tuned, entries = inputs.explicit, inputs.tuned, inputs.entries
    if explicit is not None:
        n = _cap(explicit.workers)
        capped = f" (capped at {MAX_WORKERS})" if explicit.workers > MAX_WORKERS else ""
        why = f"{explicit.where} asks for {explicit.workers} workers{capped}"
        return WorkerPlan(n, why, "user")
    if entries < PARALLEL_THRESHOLD:
        return WorkerPlan(
            1,
            f"{entries} entries, fewer than {PARALLEL_THRESHOLD}: 1 worker "
            "(git checkout.thresholdForParallelism)",
            "policy",
        )
    if tuned is not None and _tuned_applies(fs, tuned):
        if writer == "git" and tuned.git_workers is not None:
            # git's writer was timed at its own counts: the best of them is its count.
            n = _fit(_cap(tuned.git_workers), entries)
            return WorkerPlan(
                n,
                f"tuned on {tuned.measured_on} {tuned.where}: {n} checkout.workers "
                "(git's writer was fastest there)",
                "tuned",
            )
        n = _fit(_cap(tuned.workers), entries)
        return WorkerPlan(n, f"tuned on {tuned.measured_on} {tuned.where}: {n} workers", "tuned")
    n, why = _policy(fs, inputs.cpus, entries)
    fitted = _fit(_cap(n), entries)
    if fitted < n:
        why += f"; {fitted} for {entries} entries (>= {MIN_ENTRIES_PER_WORKER} per worker)"
    # Where writing is CPU-bound the policy's count (physical cores) is the peak already
    # (seed 000) and probing cost more than it won (tmpfs, 5069 files: 0.506 s adapting vs
    # 0.418 s at the fixed 2; docs/benchmarks.md): adapt only where calls wait.
    adapt = (
        inputs.allow_adapt
        and fitted > 1
        and entries >= ADAPT_MIN_ENTRIES
        and _kind(fs) not in CPU_BOUND_KINDS
    )
    return WorkerPlan(fitted, why, "policy", adapt)


def _tuned_applies(fs: FsInfo | None, tuned: Tuned | None) -> bool:
    return tuned is not None and fs is not None and tuned.mount_key == fs.mount_key


def _fit(n: int, entries: int) -> int:
    return max(1, min(n, entries // MIN_ENTRIES_PER_WORKER))
