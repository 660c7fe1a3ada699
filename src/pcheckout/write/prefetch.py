"""Write a partial clone's checkout while its missing blobs arrive.

git fetches every missing blob of a checkout in one ``git fetch`` and writes only after
it ended (``unpack-trees.c: check_updates()``).  Here the missing blobs are fetched in
batches on background threads (git's own fetch command per batch,
:class:`pcheckout.git.promisor.Prefetch`), and the writers start on what is present:
each time a write round ends, every batch that landed meanwhile is written in the next
round.  On a latency-bound mount the writes then overlap the transfer instead of
following it.

Why rounds and not one long write: a writer's cat-file must never be asked for a blob
that has not landed (before git 2.45 that starts a serial lazy fetch per blob, and
nothing can switch it off), and a long-lived cat-file sees a pack that appeared after it
started only after a miss makes it rescan the pack directory.  A round's cat-files are
started after its batches landed, so they see every pack at once.

``.gitattributes`` come first: when conversion is on, the entries git reads attributes
from are in the first batch and nothing is written before it landed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from pcheckout.git.attributes import is_gitattributes
from pcheckout.git.promisor import (
    FIRST_BATCH,
    Fetched,
    Prefetch,
    PromisorFetchError,
    batch_sizes,
)
from pcheckout.git.runner import Git
from pcheckout.git.tree import MODE_GITLINK, Entry

__all__ = [
    "FETCHERS_LATENCY_BOUND",
    "FetchFrom",
    "FetchPlan",
    "Round",
    "plan_fetch",
    "write_while_fetching",
]

#: Concurrent fetches where the destination is latency-bound.  One fetch writes its pack
#: in small synchronous writes (index-pack's 4 KiB input buffer), ~1.4 ms per blob on the
#: 1 ms latency filesystem, so one fetch alone is slower than the writers
#: (docs/benchmarks.md, "Blobless checkout").  Elsewhere one fetch at a time.
FETCHERS_LATENCY_BOUND = 4


class Round(Protocol):
    """Writes the entries whose ``skip`` flag is False; returns the engine's outcome
    (``stats`` per entry index, None where not written)."""

    def __call__(self, skip: list[bool], first: bool) -> RoundOutcome: ...


class RoundOutcome(Protocol):
    stats: list[bytes | None]
    files: int
    bytes: int


@dataclass
class FetchPlan:
    """Which entries are written from present blobs and which batch brings the rest."""

    wanted: list[int]  # entry indexes to write
    present: list[int]  # of those, whose blob is here (or that need none: gitlinks)
    batches: list[list[str]]  # missing object ids, in fetch order
    waiting: dict[str, list[int]] = field(default_factory=dict)  # oid -> entry indexes
    attributes_first: bool = False  # nothing is written before batch 0 landed

    @property
    def missing(self) -> int:
        return sum(len(b) for b in self.batches)


def plan_fetch(
    entries: Sequence[Entry],
    wanted: Sequence[int],
    missing: set[str],
    *,
    conversion: bool,
    fetchers: int = 1,
    first: int = FIRST_BATCH,
) -> FetchPlan:
    """Batches for the missing blobs of ``wanted`` (gitlinks are never fetched):
    ``.gitattributes`` first, then tree order (neighbours share directories, and a
    round writes whole directories); ``first`` blobs, then with several ``fetchers``
    the rest shared among the others, with one the batches doubling."""
    present: list[int] = []
    waiting: dict[str, list[int]] = {}
    attrs: list[str] = []
    order: list[str] = []
    for i in wanted:
        e = entries[i]
        if e.mode == MODE_GITLINK or e.oid not in missing:
            present.append(i)
            continue
        if e.oid not in waiting:
            waiting[e.oid] = []
            (attrs if is_gitattributes(e.path) else order).append(e.oid)
        waiting[e.oid].append(i)
    oids = attrs + order
    batches: list[list[str]] = []
    if fetchers > 1:
        # A small first batch, so writing starts soon, and the rest in one batch per other
        # fetcher, fetched meanwhile: every round of writes starts its writers' cat-files
        # anew, so few rounds (docs/benchmarks.md, "Blobless checkout").
        batches = [oids[:first]] if oids else []
        rest = oids[first:]
        parts = max(1, fetchers - 1)
        for j in range(parts):
            part = rest[len(rest) * j // parts : len(rest) * (j + 1) // parts]
            if part:
                batches.append(part)
    else:
        k = 0
        for size in batch_sizes(len(oids), first=first):
            batches.append(oids[k : k + size])
            k += size
    if attrs and len(batches[0]) < len(attrs):  # all attributes in the first batch
        merged = oids[: len(attrs)]
        rest = oids[len(attrs) :]
        batches = [merged] + [b for b in _rechunk(rest, batches[1:])]
    return FetchPlan(list(wanted), present, batches, waiting, conversion and bool(attrs))


def _rechunk(oids: list[str], like: list[list[str]]) -> list[list[str]]:
    out: list[list[str]] = []
    k = 0
    for b in like:
        if k >= len(oids):
            break
        out.append(oids[k : k + len(b)])
        k += len(b)
    if k < len(oids):
        out.append(oids[k:])
    return out


class _Landing:
    """Batches landed and not yet written; the writer waits here."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.landed: list[int] = []
        self.done = 0
        self.expected = 0

    def arrive(self, k: int) -> None:
        with self.cond:
            if k < 0:
                self.done += 1
            else:
                self.landed.append(k)
            self.cond.notify_all()

    def take(self, wait: bool) -> tuple[list[int], bool]:
        """Landed batches (waiting for at least one when ``wait``), and whether every
        fetcher has finished."""
        with self.cond:
            while wait and not self.landed and self.done < self.expected:
                self.cond.wait()
            got, self.landed = self.landed, []
            return got, self.done >= self.expected


@dataclass
class Overlapped:
    stats: list[bytes | None]
    rounds: list[RoundOutcome]
    fetched: Fetched


class FetchFrom(NamedTuple):
    """Where the missing blobs come from: ``git`` (its environment is the fetches'),
    the promisor ``remotes``, how many fetches run at once, where their packs land
    (None: the repository's pack directory)."""

    git: Git
    remotes: Sequence[str]
    fetchers: int = 1
    pack_dir: bytes | None = None


def write_while_fetching(
    source: FetchFrom,
    entries: Sequence[Entry],
    plan: FetchPlan,
    write_round: Round,
    *,
    progress: Callable[[Fetched], None] | None = None,
) -> Overlapped:
    """Fetch ``plan.batches`` on up to ``source.fetchers`` threads while ``write_round``
    writes what is present, then each group of landed batches.  A fetch failure stops
    the fetching; the writes of what landed finish, then PromisorFetchError is raised
    (the caller writes no index for a checkout left incomplete)."""
    landing = _Landing()
    prefetches = _start_fetches(source, plan.batches, landing, progress)
    rounds = _Rounds(write_round, len(entries))
    try:
        _write_as_they_land(plan, landing, prefetches, rounds)
    except BaseException:
        for p in prefetches:
            p.stop()
        for p in prefetches:
            p.wait_quietly()
        raise
    total = Fetched()
    for p in prefetches:
        part = p.wait_quietly()
        total.objects += part.objects
        total.bytes += part.bytes
        total.fetches += part.fetches
    errors = [p.error for p in prefetches if p.error is not None]
    if errors:
        raise _combined(errors, plan, rounds.stats)
    return Overlapped(rounds.stats, rounds.outcomes, total)


def _start_fetches(
    source: FetchFrom,
    batches: list[list[str]],
    landing: _Landing,
    progress: Callable[[Fetched], None] | None,
) -> list[Prefetch]:
    """One started Prefetch per lane: each takes every fetchers-th batch, in order
    (batch 0 lands first); each reports its landings to ``landing``."""
    lanes = [
        list(range(j, len(batches), max(1, source.fetchers)))
        for j in range(max(1, source.fetchers))
    ]
    lanes = [lane for lane in lanes if lane]
    lock = threading.Lock()
    prefetches: list[Prefetch] = []

    def report(_part: Fetched) -> None:
        if progress is None:
            return
        with lock:
            agg = Fetched(
                sum(p.result.objects for p in prefetches),
                sum(p.result.bytes for p in prefetches),
                sum(p.result.fetches for p in prefetches),
            )
        progress(agg)

    def arrival(lane: list[int]) -> Callable[[int], None]:
        return lambda j: landing.arrive(lane[j] if j >= 0 else -1)

    for lane in lanes:
        mine = [batches[k] for k in lane]
        prefetches.append(
            Prefetch(source.git, source.remotes, mine, arrival(lane), report, source.pack_dir)
        )
    landing.expected = len(prefetches)
    for p in prefetches:
        p.start()
    return prefetches


class _Rounds:
    """The write rounds so far: each writes the given entry indexes; ``stats`` per
    entry of all rounds."""

    def __init__(self, write_round: Round, n: int) -> None:
        self.write_round = write_round
        self.n = n
        self.stats: list[bytes | None] = [None] * n
        self.outcomes: list[RoundOutcome] = []
        self.first = True

    def run(self, indexes: list[int]) -> None:
        if not indexes:
            return
        skip = [True] * self.n
        for i in indexes:
            skip[i] = False
        out = self.write_round(skip, self.first)
        self.first = False
        self.outcomes.append(out)
        for i in indexes:
            self.stats[i] = out.stats[i]


def _write_as_they_land(
    plan: FetchPlan, landing: _Landing, prefetches: list[Prefetch], rounds: _Rounds
) -> None:
    """What is present first (after batch 0 where the attributes come first), then,
    round after round, what landed during the round before, until every fetch ended."""
    batches = plan.batches
    pending = list(plan.present)
    if plan.attributes_first and batches:
        # Nothing before the attributes: batch 0 (lane 0's first) holds them.
        got: list[int] = []
        finished = False
        while 0 not in got and not finished:
            more, finished = landing.take(wait=True)
            got += more
        pending = pending + _entries_of(plan, batches, got) if 0 in got else []
    while True:
        rounds.run(pending)
        if _fetch_failed(prefetches):
            for p in prefetches:
                p.stop()  # the remote is gone for all of them: stop wasting time
        more, finished = landing.take(wait=True)
        pending = _entries_of(plan, batches, more)
        if not pending and finished:
            break


def _fetch_failed(prefetches: list[Prefetch]) -> bool:
    return any(p.error is not None for p in prefetches)


def _entries_of(plan: FetchPlan, batches: list[list[str]], landed: list[int]) -> list[int]:
    out: list[int] = []
    for k in sorted(landed):
        for oid in batches[k]:
            out.extend(plan.waiting[oid])
    out.sort()
    return out


def _combined(
    errors: list[BaseException], plan: FetchPlan, stats: list[bytes | None]
) -> BaseException:
    """One error for all fetchers: the count of blobs that could not be had is what
    is still missing of what was to be written."""
    fetch_errors = [e for e in errors if isinstance(e, PromisorFetchError)]
    if len(fetch_errors) != len(errors):
        return next(e for e in errors if not isinstance(e, PromisorFetchError))
    unwritten = {i for i in plan.wanted if stats[i] is None}
    missing = {oid for oid, idx in plan.waiting.items() if any(i in unwritten for i in idx)}
    first = fetch_errors[0]
    return PromisorFetchError(first.remotes, len(missing), first.stderr)
