"""Per-path calls (lstat, unlink) spread over threads where each is a round trip.

On NFS or FUSE every ``lstat`` or ``unlink`` waits on the server, so a few
hundred of them in a row cost a visible part of a switch or a resume (measured
on the 1 ms latency mount: ~400 sequential lstats were 0.4 s of a 1.9 s
switch).  :func:`in_shares` gives each thread one contiguous share of the
paths: neighbours share a directory, whose lock serializes creates and
unlinks, and there is no per-path task overhead.

Where the kernel still holds a path's attributes (a file this client wrote or
looked at a moment ago: the FUSE attribute timeout, NFS ``acregmin``), an
``lstat`` is a few microseconds and asks no server; threads then only cost
(each call gives up the interpreter lock and waits to take it back: 4,291
such lstats over 32 threads, beside a checkout's writers, took 0.42 s, and
1,000 in one thread 4 ms). :func:`lstat_while_cached` takes them in the
calling thread for as long as they answer that fast.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pcheckout.fs.retry import GaveUp, retrying

T = TypeVar("T")

#: A thread is worth starting for this many lstats or unlinks (a guess: on
#: tmpfs either is a few microseconds, a thread start ~50 us).
MIN_PATHS_PER_THREAD = 16
#: :func:`lstat_while_cached` goes on in its thread while a chunk of this many
#: lstats averages under :data:`CACHED_LSTAT_S` each.  An lstat from the kernel's
#: caches took ~4 us (the 1 ms latency mount, just after the files were written);
#: one that asks the server waits a round trip (1 ms there, ~0.1-1 ms on NFS).
CACHED_CHUNK = 64
CACHED_LSTAT_S = 50e-6


def in_shares(
    call: Callable[[bytes], T], paths: list[bytes], workers: int, min_share: int
) -> list[T]:
    """``call(path)`` for each path, in order, over up to ``workers`` threads,
    each taking one contiguous share of at least ``min_share`` paths."""
    n = max(1, min(workers, len(paths) // max(1, min_share)))
    if n == 1:
        return [call(p) for p in paths]

    def share(part: list[bytes]) -> list[T]:
        return [call(p) for p in part]

    parts = [paths[len(paths) * j // n : len(paths) * (j + 1) // n] for j in range(n)]
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="pcheckout-io") as pool:
        return [r for part in pool.map(share, parts) for r in part]


def lexists(path: bytes) -> os.stat_result | None:
    """``lstat(path)``, None if nothing is there (or a leading part is a file)."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def lstat_many(
    root_b: bytes, paths: list[bytes], workers: int, min_share: int = MIN_PATHS_PER_THREAD
) -> list[os.stat_result | None]:
    """``lstat`` of each path under ``root_b`` (None: absent), in parallel."""
    return in_shares(lambda p: lexists(root_b + b"/" + p), paths, workers, min_share)


def _lexists_retrying(path: bytes) -> os.stat_result | None:
    try:
        return retrying(lambda _attempt: lexists(path))
    except GaveUp:
        return None


def lstat_while_cached(root_b: bytes, paths: list[bytes]) -> list[os.stat_result | None]:
    """``lstat`` of the first paths under ``root_b`` (None: absent), in this thread, for
    as long as they are answered from the kernel's caches: chunk by chunk
    (:data:`CACHED_CHUNK`), stopping after the first chunk that took longer than
    :data:`CACHED_LSTAT_S` a path.  Returns the answers for a prefix of ``paths``
    (all of them, or none but the slow chunk's); errors as :func:`lstat_many_or_none`."""
    prefix = root_b + b"/"
    out: list[os.stat_result | None] = []
    clock = time.perf_counter
    for start in range(0, len(paths), CACHED_CHUNK):
        t0 = clock()
        part = [_lexists_retrying(prefix + p) for p in paths[start : start + CACHED_CHUNK]]
        out += part
        if clock() - t0 > CACHED_LSTAT_S * len(part):
            break
    return out


def lstat_many_or_none(
    root_b: bytes,
    paths: list[bytes],
    workers: int,
    min_share: int = MIN_PATHS_PER_THREAD,
    *,
    cached_first: bool = True,
) -> list[os.stat_result | None]:
    """As :func:`lstat_many`, network errors retried (fs/retry.py) and, if they
    persist, answered None: for a resume, which then writes the entry again
    (and reports the error if writing fails too).  With more than one worker,
    ``cached_first``: :func:`lstat_while_cached` first, the rest in threads."""
    first: list[os.stat_result | None] = []
    if workers > 1 and cached_first:
        first = lstat_while_cached(root_b, paths)
        if len(first) == len(paths):
            return first
        paths = paths[len(first) :]
    rest = in_shares(lambda p: _lexists_retrying(root_b + b"/" + p), paths, workers, min_share)
    return first + rest if first else rest


__all__ = [
    "CACHED_CHUNK",
    "CACHED_LSTAT_S",
    "MIN_PATHS_PER_THREAD",
    "in_shares",
    "lexists",
    "lstat_many",
    "lstat_many_or_none",
    "lstat_while_cached",
]
