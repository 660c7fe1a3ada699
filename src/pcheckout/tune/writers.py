"""``pcheckout tune``'s second step: time pcheckout's engine and git's own parallel checkout on
one probe tree in the mount, interleaved, and say which was faster.

The policy's rule (git's writer where writing is CPU-bound, the engine where calls wait) is a
rule about kinds of filesystems; a given mount (a fast NFS server, a FUSE daemon that serialises,
a virtual disk whose writes wait) may differ.  So after the thread workload
(:mod:`pcheckout.tune.workload`) has found the knee, this runs whole fresh checkouts -- the
same ``checkout()`` a user runs, so listing, planning, the index and HEAD are in the time -- of
a probe tree shaped like the workload (16 files per directory, 0-8 KiB, some executables and
symlinks, every blob distinct):

* pcheckout's engine at the knee;
* git's writer at the knee, at twice it, and at the policy's count for git (2 per core) when
  that is higher (git's main process walks the index and makes directories beside its
  workers: on CPU-bound kinds its best count is above the engine's, docs/filesystems.md
  *Which writer*).

``rounds`` rounds, the order alternating (so drift of the machine hits every configuration
alike), the median of each; the faster writer wins, git at its faster count.  The probe's git
dir is a ``clone --shared`` in the mount (its index and HEAD written there, as a user's are);
its objects stay in a local temporary repository.  The probe's size follows the workload's rate
at the knee (about :data:`PROBE_SECONDS` per checkout), between :data:`PROBE_MIN_FILES` and
:data:`PROBE_MAX_FILES`, or ``--files`` when given.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.errors import GitError, PcheckoutError, WriteError
from pcheckout.git.runner import git_version
from pcheckout.plan.policy import (
    CPU_BOUND_CAP,
    GIT_PARALLEL_CHECKOUT,
    GIT_WORKERS_PER_CORE,
    MAX_WORKERS,
    CpuInfo,
    Writer,
)
from pcheckout.plan.tunecache import WriterTimes
from pcheckout.tune.workload import (
    CHMOD_EVERY,
    FILES_PER_DIR,
    MAX_FILE_SIZE,
    SYMLINK_EVERY,
    CompareWriters,
    TuneOptions,
    remove_tree,
)

#: Aim of one probe checkout's length at the workload's measured rate: long enough that a
#: checkout's fixed costs (a few git processes, ~30-50 ms on tmpfs) do not decide alone, short
#: enough that 3 configurations x 3 rounds stay a few seconds on a fast mount.  A guess.
PROBE_SECONDS: float = 0.25
#: Bounds of the probe's size.  2,000 entries is git's and pcheckout's regime of a small
#: repository; 5,000 is the ~5k-file tree of docs/benchmarks.md.  Below 200 a probe is all
#: start-up (and below 1,000 the engine does not fork: write/forked.py MIN_ENTRIES).
PROBE_MIN_FILES: int = 200
PROBE_MAX_FILES: int = 5000
#: Subdirectories per parent in the probe (as the workload's DIRS_PER_PARENT).
_DIRS_PER_PARENT = 16

#: One timed checkout: (work tree, writer, workers) -> seconds.  The seam tests replace.
RunCheckout = Callable[[Path, Writer, int], float]


@dataclass(frozen=True)
class Comparison:
    """How the writers are compared: the git that runs, and the comparison's options."""

    git_version: tuple[int, int, int]
    rounds: int = 3
    files: int | None = None  # the probe's entries (None: from the workload's rate)
    progress: Callable[[str], None] | None = None  # one line per timed checkout
    run: RunCheckout | None = None  # the seam tests replace (None: a real checkout())
    environ: Mapping[str, str] | None = None  # the checkouts' environment (None: os.environ)


def comparer(
    opts: TuneOptions,
    progress: Callable[[str], None] | None = None,
    note: Callable[[str], None] | None = None,
) -> CompareWriters | None:
    """The comparison ``run_tune`` calls at the knee; None, with a ``note`` saying why, where
    git cannot be run or has no parallel checkout."""
    tell = note or (lambda _msg: None)
    try:
        version = git_version()
    except PcheckoutError as exc:
        tell(f"not timing the writers: {exc}")
        return None
    if version[:2] < GIT_PARALLEL_CHECKOUT:
        have, need = (".".join(map(str, v)) for v in (version, GIT_PARALLEL_CHECKOUT))
        tell(f"git {have} has no parallel checkout ({need}+): the engine writes")
        return None
    how = Comparison(version, rounds=opts.rounds, files=opts.files, progress=progress)

    def run(scratch: str, knee: int, rate: float) -> WriterTimes | None:
        return compare(scratch, knee, rate, how)

    return run


def probe_size(rate: float, files: int | None = None) -> int:
    """Entries of the probe tree: ``files`` if given, else what the workload wrote in
    :data:`PROBE_SECONDS` at the knee, within the bounds."""
    if files is not None:
        return max(1, files)
    return int(min(PROBE_MAX_FILES, max(PROBE_MIN_FILES, rate * PROBE_SECONDS)))


def configurations(knee: int, git_policy: int) -> tuple[tuple[Writer, int], ...]:
    """The engine at the knee; git at the knee, at twice it, and at the policy's count for
    git on CPU-bound kinds (``git_policy``: 2 per core) where that is above the knee (the
    thread workload's knee is the engine's: on tmpfs with 2 vCPUs it is 1-2, git's best 4)."""
    git_counts = {knee, min(MAX_WORKERS, 2 * knee)}
    if git_policy > knee:
        git_counts.add(min(MAX_WORKERS, git_policy))
    return (("pcheckout", knee), *(("git", n) for n in sorted(git_counts)))


def compare(scratch: str, knee: int, rate: float, how: Comparison) -> WriterTimes | None:
    """Time both writers on a probe tree under ``scratch``; None if git has no parallel
    checkout (then the comparison means nothing: git's writer is never chosen there)."""
    if how.git_version[:2] < GIT_PARALLEL_CHECKOUT:
        return None
    say = how.progress or (lambda _msg: None)
    rounds = how.rounds
    n_files = probe_size(rate, how.files)
    cores = CpuInfo.current().cpu_bound_workers
    configs = configurations(knee, min(cores * GIT_WORKERS_PER_CORE, CPU_BOUND_CAP))
    env = dict(os.environ if how.environ is None else how.environ)
    samples: dict[tuple[Writer, int], list[float]] = {c: [] for c in configs}
    with _probe_repository(n_files, env) as source, _probe_clone(scratch, source, env) as work:
        timed = how.run or _timed_checkout(env)
        for r in range(rounds):
            order = configs if r % 2 == 0 else tuple(reversed(configs))
            for writer, n in order:
                _empty(work)
                seconds = timed(work, writer, n)
                samples[(writer, n)].append(seconds)
                name = "git's writer" if writer == "git" else "the engine  "
                say(
                    f"round {r + 1}/{rounds}: {name} {n:>3} workers {seconds:>8.3f} s "
                    f"({n_files:,}-file checkout)"
                )
    times = tuple((w, n, statistics.median(samples[(w, n)])) for w, n in configs)
    git_n, git_t = min(((n, t) for w, n, t in times if w == "git"), key=lambda p: (p[1], p[0]))
    engine_t = next(t for w, _, t in times if w == "pcheckout")
    winner: Writer = "git" if git_t < engine_t else "pcheckout"
    return WriterTimes(winner, git_n, knee, times, n_files, rounds)


def _timed_checkout(env: Mapping[str, str]) -> RunCheckout:
    environ = dict(env)

    def run(work: Path, writer: Writer, workers: int) -> float:
        opts = CheckoutOptions(
            directory=work, workers=workers, writer=writer, adapt=False, environ=environ
        )
        t0 = time.monotonic()
        checkout(opts)
        return time.monotonic() - t0

    return run


def _empty(work: Path) -> None:
    """The probe's work tree back to a clone without a checkout: no files, no index."""
    for entry in os.scandir(work):
        if entry.name == ".git":
            continue
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path)
        else:
            os.unlink(entry.path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(work / ".git" / "index")


def _git(cwd: Path, env: Mapping[str, str], *args: str, stdin: bytes | None = None) -> None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(cwd), *args], env=dict(env), input=stdin, capture_output=True
        )
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}") from None
    if proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip().replace("\n", " ")
        raise GitError(f"tune's probe repository: git {args[0]} failed: {message}")


@contextlib.contextmanager
def _probe_clone(scratch: str, source: Path, env: Mapping[str, str]) -> Iterator[Path]:
    """``git clone --no-checkout --shared`` of the probe into ``scratch`` (the mount),
    removed afterwards."""
    base = tempfile.mkdtemp(prefix="probe-", dir=scratch)
    try:
        _git(Path(base), env, "clone", "-q", "--no-checkout", "--shared", str(source), "w")
        yield Path(base) / "w"
    finally:
        remove_tree(base)


@contextlib.contextmanager
def _probe_repository(files: int, env: Mapping[str, str]) -> Iterator[Path]:
    """A local temporary repository whose HEAD is the probe tree (``git fast-import``)."""
    base = tempfile.mkdtemp(prefix="pcheckout-tune-probe-")
    try:
        repo = Path(base) / "repo.git"
        _git(Path(base), env, "init", "-q", "--bare", "repo.git")
        _git(repo, env, "fast-import", "--quiet", stdin=_stream(files))
        _git(repo, env, "symbolic-ref", "HEAD", "refs/heads/probe")
        yield repo
    except OSError as exc:
        raise WriteError(os.fsencode(base), exc) from exc
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _stream(files: int) -> bytes:
    """The fast-import stream of one commit holding the probe tree under ``t/``."""
    payload = bytes(range(256)) * (MAX_FILE_SIZE // 256)
    out = [b"commit refs/heads/probe\ncommitter pcheckout tune <tune@pcheckout> 0 +0000\n"]
    out.append(b"data 12\nprobe tree\n\n")
    for i in range(files):
        k = i // FILES_PER_DIR
        path = b"t/p%d/d%d/f%d" % (k // _DIRS_PER_PARENT, k, i)
        if i % SYMLINK_EVERY == SYMLINK_EVERY - 1:
            target = b"f%d" % (i - 1)
            out.append(b"M 120000 inline %s\ndata %d\n%s\n" % (path, len(target), target))
            continue
        size = (i * 2654435761) % MAX_FILE_SIZE  # the workload's spread of sizes
        body = b"%d\n" % i + payload[:size]  # distinct blobs, as in a real tree
        mode = b"100755" if i % CHMOD_EVERY == 0 else b"100644"
        out.append(b"M %s inline %s\ndata %d\n%s\n" % (mode, path, len(body), body))
    return b"".join(out)
