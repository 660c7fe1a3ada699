"""Per-path calls (lstat, unlink) spread over threads where each is a round trip.

On NFS or FUSE every ``lstat`` or ``unlink`` waits on the server, so a few
hundred of them in a row cost a visible part of a switch or a resume (measured
on the 1 ms latency mount: ~400 sequential lstats were 0.4 s of a 1.9 s
switch).  :func:`in_shares` gives each thread one contiguous share of the
paths: neighbours share a directory, whose lock serializes creates and
unlinks, and there is no per-path task overhead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pcheckout.fs.retry import GaveUp, retrying

T = TypeVar("T")

#: A thread is worth starting for this many lstats or unlinks (a guess: on
#: tmpfs either is a few microseconds, a thread start ~50 us).
MIN_PATHS_PER_THREAD = 16


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


def lstat_many_or_none(
    root_b: bytes, paths: list[bytes], workers: int, min_share: int = MIN_PATHS_PER_THREAD
) -> list[os.stat_result | None]:
    """As :func:`lstat_many`, network errors retried (fs/retry.py) and, if they
    persist, answered None: for a resume, which then writes the entry again
    (and reports the error if writing fails too)."""
    return in_shares(lambda p: _lexists_retrying(root_b + b"/" + p), paths, workers, min_share)


__all__ = ["MIN_PATHS_PER_THREAD", "in_shares", "lexists", "lstat_many", "lstat_many_or_none"]
