"""Decide a checkout: what ``checkout REV`` writes into an opened run (``session.py``).

A populated work tree with an index is a switch (``decide/switch.py``, or git's own
``git checkout REV`` where git's writer runs: ``decide/gitswitch.py``).  Otherwise, in
order: list the target tree and refuse unsafe trees and occupied destinations; select
what is written (a sparse checkout's cone, the blobs a partial clone still lacks:
``write/partial.py``); plan the writers for it (``plan/planner.py``); plan each path's
conversion (``git/attributes.py``).  Nothing is written: a partial clone's missing
``.gitattributes`` blobs alone are fetched, which the conversion plan must read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from pcheckout.context import Context, both
from pcheckout.decide import collisions
from pcheckout.decide.hooks import after_checkout
from pcheckout.decide.plan import Counts, HeadMove, Plan
from pcheckout.decide.submodules import SubmoduleMove, fresh_moves, recursing
from pcheckout.decide.workers import asked, switch_workers
from pcheckout.git.config import config_bool
from pcheckout.git.pathsafety import check_entries, listing_looks_safe
from pcheckout.git.promisor import local_objects, promisor_remotes
from pcheckout.git.tree import Entry, OldSide, RootedListing, list_tree, old_side
from pcheckout.plan.policy import PARALLEL_THRESHOLD, WorkerPlan
from pcheckout.session import Patterns, Run

if TYPE_CHECKING:
    from pcheckout.decide.worktree import Look
    from pcheckout.fs.detect import FsInfo
    from pcheckout.git import convert
    from pcheckout.git.sparse import Sparsity
    from pcheckout.write.partial import Selection

__all__ = ["Planned", "decide"]

#: Told the worker plan as soon as it is known, before the conversion is planned: the
#: apply step's chance to start the writers' cat-files meanwhile (``apply/warm.py``).
Planned = Callable[[WorkerPlan, "Selection | None"], None]


def decide(run: Run, planned: Planned | None = None) -> Plan:
    """The plan of ``run``'s checkout (a fresh one, a resume or a switch)."""
    ctx, opts, found = run.ctx, run.opts, run.found
    # A partial clone lacks blobs: ls-tree -l would fetch each one for its size; which
    # are local is listed beside the tree (each git process costs round trips on a mount).
    partial = bool(promisor_remotes(ctx.config))
    sizes = opts.dry_run and not partial
    if found.switching:
        # Who writes is known from the filesystem alone; git's writer (without --force) is
        # git's whole checkout: its two-way merge, its local-change protection and messages,
        # so neither tree is listed entry by entry for it (40k entries: ~60 ms each).
        fs, first = switch_workers(run, PARALLEL_THRESHOLD, run.ahead.finish(run.root))
        # (not an interrupted switch: git's checkout would refuse its half-written paths)
        if first.writer == "git" and not opts.force and not opts.dry_run and not found.previous:
            from pcheckout.decide import gitswitch

            return gitswitch.decide(run, fs)
    listing = _list(run, partial and not found.switching, sizes)
    entries = listing.entries
    # A switch without --force that finishes no interrupted one writes only what the
    # trees' diff names (and, in a sparse checkout, index entries the cone takes in):
    # those are checked as git's writer's switch checks them, by the switch, where that
    # costs less than the whole tree here.
    by_changes = found.switching and listing.old is not None and not opts.force
    by_changes = by_changes and found.interrupted is None and _changes_cheaper(len(entries), fs)
    if not by_changes and not (
        isinstance(entries, RootedListing) and listing_looks_safe(entries, ctx.config)
    ):
        check_entries(entries, ctx.config)
    if found.switching:
        # Imported here, as are the engine's modules: where git's writer runs they are
        # never used, and importing them cost ~25 ms of CPU before git's writer could start
        # (docs/benchmarks.md, start-up).
        from pcheckout.decide import switch

        return switch.decide(run, _parsed(entries), listing.old, fs, checked=not by_changes)
    return _fresh(run, listing, sizes, planned)


#: Checking a tree's paths whole (``check_entries``), per entry: 0.29-0.37 s at 250,174
#: entries, 4-6 ms at 5,069 (this VM, docs/benchmarks.md, 2026-12-06).
WHOLE_CHECK_PER_ENTRY = 1.3e-6
#: Checking a switch's changes instead costs a git process reading the trees that changed:
#: 6-8 ms for 290 trees on tmpfs, 41-48 ms on the 1 ms latency mount, where the whole
#: check of that 5,069-entry tree took 3 ms (the same measurements).
CHANGES_CHECK_LOCAL = 0.008
CHANGES_CHECK_LATENCY_BOUND = 0.05


def _changes_cheaper(entries: int, fs: FsInfo) -> bool:
    """Whether checking what a switch changes costs less than checking its ``entries``
    whole (``fs``: the destination's filesystem, where the repository is too)."""
    local = fs.latency_bound is False
    cost = CHANGES_CHECK_LOCAL if local else CHANGES_CHECK_LATENCY_BOUND
    return entries * WHOLE_CHECK_PER_ENTRY > cost


class _Listing(NamedTuple):
    """The target's entries, HEAD's beside them when switching, and what a fresh checkout
    reads beside them: a partial clone's local objects, a sparse checkout's rules."""

    entries: list[Entry] | RootedListing  # listed beside round 1: parsed where used
    #: switching: HEAD's tree where it differs from the target's (its entries, the
    #: target's subtrees that changed); None: no switch, or HEAD has no tree
    old: OldSide | None
    have: set[str] | None
    sparsity: Sparsity | None


def _list(run: Run, partial: bool, sizes: bool) -> _Listing:
    """The target's entries (and what is read beside them).  A sparse checkout's pattern
    file is read beside the listing too (open, read and close are ~4 round trips on a
    mount), or was beside round 1 with it."""
    sparse = not run.found.switching and config_bool(
        run.ctx.config.get("core.sparsecheckout"), False
    )
    (entries, old), (have, sparsity) = both(
        lambda: _entries(run, sizes),
        lambda: _beside_listing(run.ctx, partial, sparse, run.found.patterns),
    )
    return _Listing(entries, old, have, sparsity)


def _entries(run: Run, sizes: bool) -> tuple[list[Entry] | RootedListing, OldSide | None]:
    """The target's entries, and when switching what HEAD's tree has where the two differ
    (``old_side``: one diff-tree, not a second listing).  Sizes cost git a header read
    per blob; only the dry run reports them."""
    found, target, git = run.found, run.target, run.ctx.git
    if found.listed is not None and not found.switching and not sizes:
        return found.listed, None  # listed beside round 1 (session._early)
    head_tree = target.head_tree
    if not found.switching or head_tree is None:
        return list_tree(git, target.tree, sizes=sizes), None
    return both(
        lambda: list_tree(git, target.tree, sizes=sizes),
        lambda: old_side(git, head_tree, target.tree),
    )


def _beside_listing(
    ctx: Context, partial: bool, sparse: bool, patterns: Patterns | None
) -> tuple[set[str] | None, Sparsity | None]:
    """What a fresh checkout reads while the tree is listed: a partial clone's local
    objects and a sparse checkout's rules (each only if asked for)."""
    if partial and sparse and patterns is None:
        return both(lambda: local_objects(ctx.git), lambda: _sparsity(ctx, None))
    have = local_objects(ctx.git) if partial else None
    return have, _sparsity(ctx, patterns) if sparse else None


def _sparsity(ctx: Context, patterns: Patterns | None) -> Sparsity | None:
    """The worktree's sparse-checkout rules (None: no pattern file, a full checkout);
    ``patterns``: the pattern file as round 1 read it, if it did."""
    from pcheckout.git import sparse

    if patterns is not None:
        return sparse.from_patterns(ctx.config, patterns.data)
    return sparse.load(ctx.git, ctx.config, ctx.repo.git_dir)


def _fresh(run: Run, listing: _Listing, sizes: bool, planned: Planned | None) -> Plan:
    """A fresh checkout's (or a resume's) plan."""
    from pcheckout.plan.planner import plan_for  # (imported beside round 1: session.Ahead)

    ctx, found, root, entries = run.ctx, run.found, run.root, listing.entries
    sel = _select(ctx, entries, listing.have, listing.sparsity)
    wanted = range(len(entries)) if sel is None else sel.wanted
    # Sizes are listed for a dry run only (ls-tree -l reads every blob's header): otherwise
    # every size is -1 and the sum, 8 ms of Python at 40k entries, would be 0 anyway.
    nbytes = sum(max(entries[i].size, 0) for i in wanted) if sizes else 0
    fs, workers = plan_for(
        root, asked(run), entries=len(wanted), nbytes=nbytes, fs=run.ahead.finish(root)
    )
    if planned is not None:  # (the writers' cat-files warm up while the rest is decided)
        planned(workers, sel)
    if workers.writer != "git" or run.opts.dry_run:
        entries = _parsed(entries)  # a listing beside round 1 is parsed only for the engine
    where = _Where(fs, workers.workers)
    kept: tuple[bytes, ...] = ()
    expendable: list[bytes] = []
    if found.occupied and not found.resume:
        kept, expendable = _refuse_untracked(run, entries, wanted, where)
    strays = _left_by_earlier_runs(run, _parsed(entries), where) if found.resume else []
    conversion = plan_conversion(run, entries, sel, workers)
    local = fs.latency_bound is False  # (the case probe first: no round trips)
    collided = collisions.find(ctx, root, entries, wanted, run.opts.clone, local=local)
    counts = Counts(len(wanted), nbytes)
    if sel is not None:
        counts = counts._replace(
            skip_worktree=sel.outside, fetch_blobs=len(sel.missing) + sel.fetched_first
        )
    return Plan(
        "resume" if found.resume else "fresh",
        root,
        run.target.tree,
        entries,
        workers,
        fs,
        counts,
        dry_run=run.opts.dry_run,
        selection=sel,
        conversion=conversion,
        head=HeadMove(run.opts.rev, run.target),
        warnings=sel.warnings if sel is not None else (),
        delete=strays,
        expendable=expendable,
        previous=found.previous if found.resume else None,
        earlier=found.previous.trees if found.resume and found.previous else (),
        commit=run.target.commit,
        hooks=after_checkout(run),
        submodules=_submodules(run, entries),
        counts_read=run.opts.counts,
        recurse_submodules=recursing(run.ctx, run.opts.clone),
        collisions=collided,
        untracked_kept=kept,
        clone=run.opts.clone,
    )


def _submodules(run: Run, entries: Sequence[Entry]) -> tuple[SubmoduleMove, ...]:
    """submodule.recurse: the active submodules a fresh checkout populates."""
    if not recursing(run.ctx, run.opts.clone):
        return ()
    return fresh_moves(run.ctx, run.root, run.target.tree, entries)


class _Where(NamedTuple):
    """The destination's filesystem and the writers planned for it."""

    fs: FsInfo
    workers: int


def _refuse_untracked(
    run: Run, entries: Sequence[Entry], wanted: Sequence[int], where: _Where
) -> tuple[tuple[bytes, ...], list[bytes]]:
    """A fresh checkout into a work tree that holds files already (no index: a CI cache
    restored before the checkout, say) keeps them and writes the tree, as git does, unless
    one is in the way of what it writes: then it refuses, as git does, and writes nothing
    (git's ``--force`` would overwrite them; pcheckout never does).  Returned: the names at
    the top of the work tree it keeps whole (the tree has nothing there), and the ignored
    files in the way, to be removed (git's checkout overwrites them)."""
    from pcheckout.decide.worktree import Way, refuse_untracked_in_the_way

    paths = [entries[i].path for i in wanted]
    target = {e.path: e for e in entries}
    expendable = refuse_untracked_in_the_way(_look(run, where), Way(paths, target=target))
    top = {p.partition(b"/")[0] for p in target}
    return tuple(sorted(n for n in run.found.occupied if n not in top)), expendable


def _left_by_earlier_runs(run: Run, entries: list[Entry], where: _Where) -> list[bytes]:
    """The files interrupted checkouts of other trees left that this tree lacks
    (``decide/leftovers.py``); one changed since stays, untracked."""
    from pcheckout.decide.leftovers import left_behind

    previous = run.found.previous
    assert previous is not None
    return left_behind(_look(run, where), previous.trees, run.target.tree, entries)


def _look(run: Run, where: _Where) -> Look:
    from pcheckout.decide.worktree import Look, stat_rules, stat_threads

    threads = stat_threads(where.fs, where.workers, run.opts.stat_threads)
    ctx = run.ctx
    root_b, repo, rules = os.fsencode(run.root), ctx.repo, stat_rules(ctx.config)
    return Look(ctx.git, root_b, repo.index_path, repo.object_format, threads, rules)


def _parsed(entries: Sequence[Entry]) -> list[Entry]:
    """``entries`` as a list (a listing beside round 1 is parsed on first use)."""
    return entries.entries if isinstance(entries, RootedListing) else list(entries)


def _select(
    ctx: Context, entries: Sequence[Entry], have: set[str] | None, sparsity: Sparsity | None
) -> Selection | None:
    """What is written.  None: everything, and every blob is here (no sparse checkout, no
    promisor remote); only then are git.sparse and write.partial (with the engine they
    import) not imported at all (see the switch import above).  ``have``: a partial
    clone's local objects, ``sparsity`` the sparse-checkout rules (``_sparsity``), both
    read beside the tree's listing."""
    sparse = config_bool(ctx.config.get("core.sparsecheckout"), False)
    if not sparse and not promisor_remotes(ctx.config):
        return None
    from pcheckout.write.partial import select

    return select(ctx, _parsed(entries), sparsity, have=have)


def plan_conversion(
    run: Run, entries: Sequence[Entry], sel: Selection | None, workers: WorkerPlan
) -> convert.ConversionPlan:
    """Which paths convert, and how (``git/convert.py``)."""
    from pcheckout.git import attributes, convert  # (imported beside round 1: session.Ahead)

    ctx, dry_run = run.ctx, run.opts.dry_run
    if workers.writer == "git" and not dry_run:
        # git converts as it writes: only where attributes could come from is reported
        # (the per-path lookup is a check-attr process over every path, for the engine).
        has = None
        if isinstance(entries, RootedListing):
            has = entries.has_file(attributes.GITATTRIBUTES)
        sources = attributes.conversion_sources(
            entries, ctx.config, ctx.repo.common_dir, ctx.environ, has_gitattributes=has
        )
        return convert.ConversionPlan(sources, [])
    entries = _parsed(entries)
    only = None if sel is None else sel.wanted
    unknown = 0
    if sel is not None and dry_run:
        # A dry run fetches nothing: paths below a missing .gitattributes are not looked
        # up (check-attr would fetch it), and the blob counts among those a run fetches.
        only, absent = attributes.known_attributes(
            ctx.git, entries, sel.wanted, sel.remotes, sel.missing
        )
        unknown = len(sel.wanted) - len(only)
        sel.missing.update(absent)
    elif sel is not None:
        _fetch_attributes(ctx, entries, sel)
    local = None if sel is None else (lambda oid: oid not in sel.missing)  # (no lazy fetch)
    conversion = convert.plan_conversion(ctx, run.target.tree, entries, only=only, local=local)
    conversion.unknown = unknown
    return conversion


def _fetch_attributes(ctx: Context, entries: list[Entry], sel: Selection) -> None:
    """check-attr must find the tree's .gitattributes local (a partial clone)."""
    from pcheckout.git import attributes

    fetched = attributes.fetch_attributes(ctx.git, entries, sel.remotes, only=sel.wanted)
    sel.missing.difference_update(fetched)
    sel.fetched_first = len(fetched)
