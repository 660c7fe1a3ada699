"""Write only part of a tree, with blobs that may still be on a promisor remote.

Two things decide what a checkout writes besides the tree itself:

* a sparse checkout (``git/sparse.py``): entries outside the patterns are not written,
  only recorded in the index with the skip-worktree bit;
* a partial clone (``git/promisor.py``): blobs of entries to be written may be missing;
  they are found without a fetch and fetched in batches while what is present is
  written (``write/prefetch.py``).  Only blobs of entries that will be written are
  fetched: no gitlinks, nothing outside the cone.

:func:`select` decides (cheap, and all a ``--dry-run`` reports); :func:`write_selected`
writes, returning one :class:`Outcome` over all entries (None stats for those not
written) as ``write_tree`` would for the whole list.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from pcheckout.context import Context
from pcheckout.git.promisor import (
    Fetched,
    Staging,
    missing_objects,
    no_lazy_fetch_env,
    promisor_remotes,
)
from pcheckout.git.runner import Git
from pcheckout.git.sparse import Sparsity
from pcheckout.git.tree import MODE_GITLINK, Entry
from pcheckout.write.engine import Outcome
from pcheckout.write.prefetch import (
    FETCHERS_LATENCY_BOUND,
    FetchFrom,
    RoundOutcome,
    plan_fetch,
    write_while_fetching,
)
from pcheckout.write.worktree import RoundReporter, WriteRequest, merge_outcomes, write_tree

__all__ = ["Selection", "select", "write_selected"]

#: Concurrent fetches into a local staging directory (git/promisor.py Staging): the pack
#: is written at local speed there, so two fetches keep ahead of the writers on the 1 ms
#: latency filesystem (docs/benchmarks.md, "Blobless checkout").
FETCHERS_STAGED = 2


@dataclass
class Selection:
    """Which entries are written, which only recorded, and which blobs must come first."""

    wanted: list[int]  # indexes of the entries written
    skip_worktree: list[bool]  # per entry: recorded with the skip-worktree bit, not written
    remotes: list[str] = field(default_factory=list)  # promisor remotes, git's order
    missing: set[str] = field(default_factory=set)  # blob ids of ``wanted`` not local
    warnings: list[str] = field(default_factory=list)  # git's sparse-checkout warnings
    fetched_first: int = 0  # missing .gitattributes blobs fetched before the conversion plan
    sparsity: Sparsity | None = None  # the sparse checkout's rules (a sparse index's cone)

    @property
    def outside(self) -> int:
        return sum(self.skip_worktree)


def select(
    ctx: Context,
    entries: Sequence[Entry],
    sparsity: Sparsity | None,
    *,
    candidates: Sequence[int] | None = None,
    have: set[str] | None = None,
) -> Selection:
    """Decide what of ``entries`` (or of ``candidates``, indexes into it) is written:
    the in-cone ones, and among those which blobs a partial clone still lacks
    (found without fetching; an ordinary clone costs nothing here).  ``have``: the
    local objects if already listed (``promisor.local_objects``)."""
    todo = range(len(entries)) if candidates is None else candidates
    if sparsity is None:
        wanted, skip = list(todo), [False] * len(entries)
    else:
        wanted, skip = sparsity.split_entries(entries, todo)
    sel = Selection(wanted, skip, warnings=list(sparsity.warnings) if sparsity else [])
    sel.sparsity = sparsity
    sel.remotes = promisor_remotes(ctx.config)
    if sel.remotes and wanted:
        blobs = [entries[i].oid for i in wanted if entries[i].mode != MODE_GITLINK]
        if have is None:
            sel.missing = set(missing_objects(ctx.git, blobs))
        else:  # the local objects, listed beside the tree (git/promisor.py local_objects)
            sel.missing = {oid for oid in blobs if oid not in have}
    return sel


def write_selected(
    ctx: Context, req: WriteRequest, sel: Selection, *, latency_bound: bool
) -> tuple[Outcome, Fetched]:
    """Write ``sel.wanted`` of ``req.entries`` (fetching missing blobs on the way);
    the outcome's ``stats`` cover all of ``req.entries``."""
    entries = req.entries
    n = len(entries)
    if not sel.missing and len(sel.wanted) == n:
        return write_tree(ctx, req), Fetched()
    base_env: dict[str, str] = dict(ctx.git.env) if ctx.git.env is not None else dict(ctx.environ)
    staging = _staging(ctx, sel, base_env, latency_bound=latency_bound)
    fetchers = (
        FETCHERS_STAGED if staging is not None else FETCHERS_LATENCY_BOUND if latency_bound else 1
    )
    plan = plan_fetch(
        entries, sel.wanted, sel.missing, conversion=req.conversion.by_git > 0, fetchers=fetchers
    )
    files = len(sel.wanted)
    nbytes = sum(max(entries[i].size, 0) for i in sel.wanted)
    ui = RoundReporter(ctx.ui, files, nbytes, req.plan.workers)
    writer_git, fetch_git = _gits(ctx, base_env, staging, missing=bool(sel.missing))
    rounds = _RoundWriter(ctx._replace(git=writer_git, ui=ui), req)
    write_round = rounds.write
    outcomes = rounds.outcomes

    total = plan.missing
    if total:
        ui.fetch(0, total, 0)

    def progress(f: Fetched) -> None:
        ui.fetch(f.objects, total, f.bytes)

    try:
        if plan.batches:
            try:
                pack_dir = staging.pack_dir if staging is not None else None
                source = FetchFrom(fetch_git, sel.remotes, fetchers, pack_dir)
                done = write_while_fetching(source, entries, plan, write_round, progress=progress)
            except BaseException:
                if staging is not None:  # what landed goes in, even when a fetch failed
                    with contextlib.suppress(OSError):
                        staging.migrate()
                raise
            if staging is not None:
                staging.migrate()
            stats, fetched = done.stats, done.fetched
        else:
            mask = [True] * n
            for i in sel.wanted:
                mask[i] = False
            stats = write_round(mask, True).stats
            fetched = Fetched()
    finally:
        ui.done()
        if staging is not None:
            staging.close()
    return merge_outcomes(stats, outcomes), fetched


def _staging(
    ctx: Context, sel: Selection, base_env: dict[str, str], *, latency_bound: bool
) -> Staging | None:
    """A staging directory for the fetches where missing blobs go to a latency-bound
    destination (objects live in the common dir unless the environment moves them:
    then none)."""
    objects = os.fsencode(ctx.repo.common_dir / "objects")
    staging = (
        Staging(objects) if sel.missing and latency_bound and Staging.usable(base_env) else None
    )
    for path in staging.removed_stale if staging is not None else []:
        ctx.ui.debug(f"removed the staging directory of a run that died: {path}")
    return staging


def _gits(
    ctx: Context, base_env: dict[str, str], staging: Staging | None, *, missing: bool
) -> tuple[Git, Git]:
    """The writers' git (told not to fetch lazily, reading the staging directory too)
    and the fetches' (writing into the staging directory)."""
    env = no_lazy_fetch_env(ctx.git, base_env) if missing else None
    if staging is not None:
        env = staging.reader_env(env if env is not None else base_env)
    writer_git = ctx.git.replace(env=env) if env is not None else ctx.git
    fetch_git = ctx.git.replace(env=staging.fetch_env(base_env)) if staging is not None else ctx.git
    return writer_git, fetch_git


class _RoundWriter:
    """Writes one round's entries of ``req`` (:class:`pcheckout.write.prefetch.Round`);
    ``outcomes``: the rounds' so far."""

    def __init__(self, round_ctx: Context, req: WriteRequest) -> None:
        self.ctx = round_ctx
        self.req = req
        self.outcomes: list[Outcome] = []

    def write(self, skip: list[bool], first: bool) -> RoundOutcome:
        req = self.req
        entries = req.entries
        group = [i for i, s in enumerate(skip) if not s]
        given = req.contents or {}
        sub = dataclasses.replace(
            req,
            entries=[entries[i] for i in group],
            conversion=req.conversion.take(group),
            contents={j: given[i] for j, i in enumerate(group) if i in given} or None,
            resume=req.resume and first,
            overwrite=req.overwrite or (req.resume and not first),
            positions=group if req.positions is None else [req.positions[i] for i in group],
        )
        out = write_tree(self.ctx, sub)
        self.outcomes.append(out)
        stats: list[bytes | None] = [None] * len(entries)
        for j, i in enumerate(group):
            stats[i] = out.stats[j]
        return _Stats(stats, out.files, out.bytes)


@dataclass
class _Stats:
    stats: list[bytes | None]
    files: int
    bytes: int
