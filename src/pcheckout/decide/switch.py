"""Decide an incremental switch by pcheckout's engine: a populated work tree with an index
moving from HEAD to REV, as ``git checkout REV`` moves it.

The two-way merge of HEAD's tree, the index and REV's tree decides each path
(``decide/merge.py``); only the paths it changes are checked for local changes
(``decide/worktree.py``; every tracked file with ``--force``), and what it would create
for untracked files in the way.  In a sparse checkout (``git/sparse.py``) only paths in
the cone are written; a skip-worktree entry's absent file is no local change; a path of
the target outside the cone is recorded with the skip-worktree bit; an entry the
patterns now exclude is removed from the work tree if clean (kept, without the bit, if
not: git's "not up to date" warning), one they now include is written.  A sparse index
is expanded.  In a partial clone the missing blobs of what is written are listed, to be
fetched in one batch before anything changes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from pcheckout.decide import collisions
from pcheckout.decide.hooks import after_checkout
from pcheckout.decide.leftovers import Leftovers, earlier_tables, find, touched
from pcheckout.decide.merge import (
    Before,
    Cone,
    Merge,
    SparseMoves,
    apply_local_changes,
    cone_moves,
    everywhere,
    sparse_split,
    two_way_merge,
)
from pcheckout.decide.plan import Counts, HeadMove, Plan
from pcheckout.decide.submodules import SubmoduleMove, Switching, recursing, switch_moves
from pcheckout.decide.workers import asked
from pcheckout.decide.worktree import (
    SKIP,
    Look,
    Way,
    dirty_paths,
    folded_index,
    modified,
    present_paths,
    racily_clean_changed,
    refuse_untracked_in_the_way,
    stat_rules,
    stat_threads,
)
from pcheckout.errors import (
    LOCAL_CHANGES,
    AssumedChangedError,
    DestinationError,
    LocalChangesError,
    decode,
    quote_paths,
    refusal,
)
from pcheckout.fs.detect import FsInfo
from pcheckout.git import fsmonitor, untracked
from pcheckout.git import index as ix
from pcheckout.git.config import config_bool
from pcheckout.git.indexformat import HASH_SIZES
from pcheckout.git.pathsafety import changes_look_safe, check_entries
from pcheckout.git.sparse import Sparsity, expand_sparse_directories
from pcheckout.git.sparse import load as load_sparsity
from pcheckout.git.tree import MODE_GITLINK, Entry, OldSide
from pcheckout.plan.planner import plan_for
from pcheckout.session import Run
from pcheckout.write.indexout import KeptEntries, index_version
from pcheckout.write.partial import select

__all__ = ["FINISHING", "decide"]

#: Why an interrupted switch is finished by pcheckout's engine: git's checkout would see
#: the half-written paths as local changes and refuse (``git checkout -f`` would also
#: discard the user's own).
FINISHING = "pcheckout's engine finishes an interrupted switch (git's would refuse its paths)"


class _Tables(NamedTuple):
    """The three sides of the two-way merge, by path."""

    in_index: dict[bytes, ix.IndexEntry]
    head: Mapping[bytes, Entry]  # (merge.Before: asked only where I and M differ)
    target: dict[bytes, Entry]


def decide(
    run: Run, entries: list[Entry], old: OldSide | None, fs: FsInfo, *, checked: bool = True
) -> Plan:
    """The switch's plan: ``entries`` is REV's tree, ``old`` HEAD's where it differs
    (``git/tree.py`` ``old_side``; None: HEAD has no tree); ``fs`` the destination's
    filesystem.  ``checked``: REV's paths were checked (``git/pathsafety.py``); else
    those that differ from HEAD's are, as git's writer's switch checks them."""
    ctx, opts = run.ctx, run.opts
    index = ix.read_index(ctx.repo.index_path, git_dir=ctx.repo.git_dir)
    index_entries = (
        expand_sparse_directories(ctx.git, index.entries) if index.sparse else list(index.entries)
    )
    if ix.unmerged(index_entries):
        if not opts.force:  # git's words (unpack-trees.c: unmerged entries, not --force)
            raise DestinationError("you need to resolve your current index first")
        index_entries = _unmerged_as_changed(index_entries)
    target = {e.path: e for e in entries}
    head: Mapping[bytes, Entry] = {} if old is None else Before(target, old.entries)
    if not checked and old is not None:
        _check_changes(run, old, entries, target)
    tables = _Tables({e.path: e for e in index_entries}, head, target)
    sparsity = load_sparsity(ctx.git, ctx.config, ctx.repo.git_dir)
    merge = two_way_merge(tables.in_index, tables.head, tables.target, force=opts.force)
    # Stat (and delete) in parallel where each call is a round trip; the count for these
    # comes from the same policy as the writers'.
    probe = asked(run, adapt=False)._replace(writer=None, git_version=(0, 0, 0), processes=None)
    fs, stat_plan = plan_for(run.root, probe, entries=len(merge.change), nbytes=0, fs=fs)
    threads = stat_threads(fs, stat_plan.workers, opts.stat_threads)
    repo = ctx.repo
    root_b = os.fsencode(run.root)
    look = Look(
        ctx.git, root_b, repo.index_path, repo.object_format, threads, stat_rules(ctx.config)
    )
    tables, merge = _present_outside(run, look, sparsity, tables, merge)
    cone = _cone(tables.in_index, sparsity)
    left = _leftovers(run, look, tables)
    merge = _finishing(merge, left, tables)
    moves = cone_moves(merge.keep, cone)
    dirty = _dirty(run, look, merge, moves[1], tables.in_index, cone) - cone.skipped - left.ours
    plan = apply_local_changes(merge, tables.in_index, tables.target, dirty, force=opts.force)
    if plan.refused:
        raise LocalChangesError(refusal(LOCAL_CHANGES, plan.refused))
    if opts.force:
        _refuse_assumed(merge, tables.in_index, dirty)
    split = sparse_split(plan, tables.target, moves, cone, dirty)
    # What interrupted runs created that the index does not track goes too (theirs, not
    # the user's; written again where REV has it).
    # (absent ones too: the directories made for them go once empty)
    strays = sorted(p for p in left.ours if p not in tables.in_index)
    split = split._replace(remove=sorted({*split.remove, *strays}))
    expendable = _in_the_way(run, look, tables, split, left)
    recurse = recursing(ctx, opts.clone)
    switching = Switching(
        run.root,
        tables.in_index,
        tables.target,
        split.write,
        split.remove,
        opts.force,
        run.target.tree,
        recurse,
        frozenset(left.ours),
    )
    subs = switch_moves(ctx, switching)
    absent = frozenset(left.ours - left.present)
    facts = _Facts(
        fs,
        entries,
        index,
        cone,
        sparsity,
        threads.min_share,
        subs,
        absent,
        _fsmonitor(ctx.config, index, plan.keep.keys() - dirty),
        expendable,
    )
    return _plan(run, tables, _smudged(look, plan.keep), split, facts)


def _check_changes(
    run: Run, old: OldSide, entries: list[Entry], target: Mapping[bytes, Entry]
) -> None:
    """REV's paths checked where they differ from HEAD's, as git's writer's switch checks
    them (``decide/gitswitch.py``): each path one by one, the trees that changed for a
    name twice; all of REV's tree where that cannot tell (the first offence named)."""
    config = run.ctx.config
    writes = [(p, target[p].mode) for p in old.entries if p in target]
    if not changes_look_safe(run.ctx.git, run.target.tree, old.trees, writes, config):
        check_entries(entries, config)


def _in_the_way(
    run: Run, look: Look, tables: _Tables, split: SparseMoves, left: Leftovers
) -> list[bytes]:
    """Untracked files in the way of what the switch writes refuse it; the ignored ones in
    the way, returned, are removed (``decide/worktree.py``)."""
    config = run.ctx.config
    tracked = tables.in_index.keys() | left.ours
    folded = None
    if config_bool(config.get("core.ignorecase"), False):  # (git's own: no probe)
        folded = folded_index(tables.in_index.values())
    gitlinks = {p for p, e in tables.in_index.items() if e.mode == MODE_GITLINK}
    force = run.opts.force
    way = Way(split.write, split.remove, tracked, tables.target, force, gitlinks, folded)
    return refuse_untracked_in_the_way(look, way)


def _fsmonitor(
    config: Mapping[str, str], index: ix.Index, unchanged: Iterable[bytes]
) -> fsmonitor.Kept | None:
    """What the switch's index keeps of the fsmonitor extension (``git/fsmonitor.py``):
    the entries kept ``unchanged`` (no local change found) stay as they were (None:
    nothing, as git keeps nothing: no extension, or no ``core.fsmonitor``)."""
    if index.fsmonitor is None or not fsmonitor.enabled(config):
        return None
    paths = [e.path for e in index.entries]  # (as stored: a sparse index's directories too)
    kept = fsmonitor.read(index.fsmonitor, paths)
    if kept is None:
        return None
    old = set(paths)
    return kept._replace(valid=frozenset(p for p in unchanged if p in old))


def _unmerged_as_changed(entries: list[ix.IndexEntry]) -> list[ix.IndexEntry]:
    """``--force`` over a conflicted index, as ``git checkout -f`` resets it: each unmerged
    path becomes one entry (our side's, else theirs, else the base), its stat data unknown,
    so that the work tree's copy counts as a local change and is discarded."""
    out: list[ix.IndexEntry] = []
    sides: dict[bytes, ix.IndexEntry] = {}
    for e in entries:
        if not e.stage:
            out.append(e)
        elif e.path not in sides or e.stage == 2 or (e.stage == 3 and sides[e.path].stage == 1):
            sides[e.path] = e
    for e in sides.values():
        out.append(ix.IndexEntry(e.path, e.mode, e.oid, *ix.NO_STAT))
    return sorted(out, key=lambda e: e.path)


def _leftovers(run: Run, look: Look, tables: _Tables) -> Leftovers:
    """What interrupted switches left (``decide/leftovers.py``): nothing without one."""
    previous = run.found.interrupted
    if previous is None:
        return Leftovers(set(), set())
    target = run.target
    listed: dict[str, Mapping[bytes, Entry]] = {target.tree: tables.target}
    trees = list(previous.trees)
    if target.head_tree is not None:
        listed[target.head_tree] = dict(tables.head)  # (compared path by path: a table)
        trees.append(target.head_tree)
    earlier = earlier_tables(run.ctx.git, list(dict.fromkeys(trees)), listed)
    return find(look, touched(earlier), earlier, tables.in_index)


def _finishing(merge: Merge, left: Leftovers, tables: _Tables) -> Merge:
    """The merge with what interrupted runs left brought to the target: each of their
    paths moves to REV's entry (or goes), whatever the index says of it (the index is
    still the one the first interrupted run began with, or the one it wrote)."""
    if not left.ours:
        return merge
    ours = left.ours
    keep = {p: e for p, e in merge.keep.items() if p not in ours}
    tracked = [p for p in sorted(ours) if p in tables.in_index or p in tables.target]
    change = [p for p in merge.change if p not in ours] + tracked
    return Merge(keep, change, [p for p in merge.refused if p not in ours])


def _smudged(look: Look, keep: dict[bytes, ix.IndexEntry]) -> dict[bytes, ix.IndexEntry]:
    """The kept entries as git writes them back: a racily clean one whose file changed
    gets size 0 (``racily_clean_changed``), else the next ``git status``, reading an index
    from a later second, would trust its stat data and miss the change."""
    smudge = racily_clean_changed(look, list(keep.values()))
    if not smudge:
        return keep
    from dataclasses import replace  # (imported already: git/index.py built the entries)

    return {p: replace(e, size=0) if p in smudge else e for p, e in keep.items()}


def _refuse_assumed(merge: Merge, index: Mapping[bytes, ix.IndexEntry], dirty: set[bytes]) -> None:
    """``git checkout -f`` stops at an assume-unchanged file the switch changes and the
    user changed (unpack-trees.c merged_entry -> verify_uptodate_1 even in a reset), with
    git's message for the first and its status."""
    valid = ix.FLAG_ASSUME_VALID
    stuck = sorted(p for p in merge.change if p in dirty and p in index and index[p].flags & valid)
    if stuck:
        raise AssumedChangedError(f"Entry '{decode(stuck[0])}' not uptodate. Cannot merge.")


def _present_outside(
    run: Run, look: Look, sparsity: Sparsity | None, tables: _Tables, merge: Merge
) -> tuple[_Tables, Merge]:
    """The index as git reads it in a sparse checkout (sparse-index.c
    clear_skip_worktree_from_present_files, unless ``sparse.expectFilesOutsideOfPatterns``):
    a skip-worktree entry whose path is present in the work tree is an ordinary entry,
    its local changes protected and its clean file removed if it stays outside."""
    config = run.ctx.config
    if sparsity is None or config_bool(config.get("sparse.expectfilesoutsideofpatterns"), False):
        return tables, merge
    skipped = [p for p, e in tables.in_index.items() if e.extended_flags & SKIP]
    present = present_paths(look, skipped)
    if not present:
        return tables, merge
    cleared = {p: _without(tables.in_index[p], SKIP) for p in present}
    keep = {p: cleared.get(p, e) for p, e in merge.keep.items()}
    return tables._replace(in_index={**tables.in_index, **cleared}), merge._replace(keep=keep)


def _without(e: ix.IndexEntry, bits: int) -> ix.IndexEntry:
    from dataclasses import replace  # (as in _smudged)

    return replace(e, extended_flags=e.extended_flags & ~bits)


def _cone(index: Mapping[bytes, ix.IndexEntry], sparsity: Sparsity | None) -> Cone:
    """The sparse checkout as the switch applies it.  Without one everything is inside and
    nothing is skipped: git leaves skip-worktree bits (``git update-index
    --skip-worktree``) as they are, checks and writes those paths as any other, and a
    written one keeps its bit (unpack-trees.c merged_entry)."""
    if sparsity is None:
        return Cone(set(), everywhere)
    skipped = {p for p, e in index.items() if e.extended_flags & SKIP}

    def inside(path: bytes, mode: int) -> bool:
        return sparsity.includes(path, mode)

    return Cone(skipped, inside)


def _dirty(
    run: Run,
    look: Look,
    merge: Merge,
    flip_out: list[bytes],
    index: Mapping[bytes, ix.IndexEntry],
    cone: Cone,
) -> set[bytes]:
    """The tracked paths with local changes the switch must know of: every one with
    ``--force`` (git checkout -f restores every tracked file), else only those it
    changes or moves out of the cone, stat data first (an absent skip-worktree file is
    not a local change: git never looks)."""
    if run.opts.force:
        # (git's refresh skips assume-unchanged entries; checkout -f looks at them by
        # their stat data: unpack-trees.c oneway_merge, verify_uptodate_1)
        valid = [e for e in index.values() if e.flags & ix.FLAG_ASSUME_VALID]
        return dirty_paths(run.ctx.git, run.ctx.repo.index_path) | modified(look, valid)
    checked = [index[p] for p in [*merge.change, *flip_out] if p in index and p not in cone.skipped]
    return modified(look, checked)


class _Facts(NamedTuple):
    """What the switch's plan is made from besides the merge."""

    fs: FsInfo
    entries: list[Entry]  # REV's tree (its .gitattributes decide the conversion)
    #: the index read: its version, a split index's tie to its shared index, its untracked
    #: cache; its kept entries are copied as stored
    index_read: ix.Index
    cone: Cone
    sparsity: Sparsity | None
    min_share: int  # the parallel deletes' least share worth a thread
    submodules: tuple[SubmoduleMove, ...]  # submodule.recurse: what moves
    absent: frozenset[bytes] = frozenset()  # removed paths not there (an interrupted run's)
    fsmonitor: fsmonitor.Kept | None = None  # the index's fsmonitor state to keep
    expendable: list[bytes] = []  # ignored files and directories in the way: removed


def _plan(
    run: Run,
    tables: _Tables,
    keep: dict[bytes, ix.IndexEntry],
    split: SparseMoves,
    facts: _Facts,
) -> Plan:
    """The switch's plan from its decisions: what is written, deleted, kept, recorded."""
    ctx, opts = run.ctx, run.opts
    write_entries = [
        tables.target[p] if p in tables.target else _entry_of(tables.in_index[p])
        for p in split.write
    ]
    sel = select(ctx, write_entries, None)
    nbytes = sum(max(e.size, 0) for e in write_entries)
    n = len(write_entries) + len(split.remove)
    fs, workers = plan_for(run.root, asked(run), entries=n, nbytes=nbytes, fs=facts.fs)
    if run.found.interrupted is not None and workers.writer == "git":
        workers = workers._replace(writer="pcheckout", writer_reason=FINISHING)
    moved = set(split.flip_in) | set(split.flip_out)
    recorded = [_skip_worktree(tables.target[p]) for p in split.recorded]
    recorded += [_skip_worktree(_entry_of(tables.in_index[p])) for p in split.flip_out]
    kept = [e for p, e in keep.items() if p not in moved]
    version = facts.index_read.version
    if version not in (3, 4):
        version = index_version(ctx.config, ctx.environ)
    outside = len(facts.cone.skipped & set(keep) - set(split.flip_in))
    counts = Counts(
        len(write_entries),
        nbytes,
        deleted=len(set(split.remove) - set(split.write) - facts.absent),
        skip_worktree=len(split.recorded) + len(split.flip_out) + outside,
        fetch_blobs=len(sel.missing),
    )
    return Plan(
        "switch",
        run.root,
        run.target.tree,
        write_entries,
        workers,
        fs,
        counts,
        dry_run=opts.dry_run,
        selection=sel,
        delete=split.remove,
        expendable=facts.expendable,
        kept=KeptEntries(
            kept,
            recorded,
            version,
            facts.index_read.split,
            _untracked(run, tables.in_index, [*kept, *recorded], write_entries, facts),
            facts.fsmonitor._replace(valid=facts.fsmonitor.valid - moved)
            if facts.fsmonitor is not None
            else None,
            skip=_carried(tables.in_index, split.write) if facts.sparsity is None else frozenset(),
            sparsity=facts.sparsity,
            assumed=_assumed(tables, split.write),
            source=facts.index_read,
        ),
        head=HeadMove(opts.rev, run.target),
        earlier=_earlier(run),
        previous=run.found.interrupted,
        warnings=_warnings(facts.sparsity, split.left),
        commit=run.target.commit,
        tree_entries=facts.entries,
        min_share=facts.min_share,
        hooks=after_checkout(run),
        submodules=facts.submodules,
        recurse_submodules=recursing(ctx, opts.clone),
        collisions=collisions.find_switch(
            ctx, run.root, _on_disk(kept), write_entries, local=fs.latency_bound is False
        ),
    )


def _on_disk(kept: list[ix.IndexEntry]) -> list[bytes]:
    """The paths of the kept entries whose files are there (not skip-worktree)."""
    skip = ix.EXT_FLAG_SKIP_WORKTREE
    return [e.path for e in kept if not e.extended_flags & skip]


def _untracked(
    run: Run,
    before: Mapping[bytes, ix.IndexEntry],
    after: list[ix.IndexEntry],
    written: list[Entry],
    facts: _Facts,
) -> bytes:
    """The untracked cache git's checkout leaves (``git/untracked.py``): the directories
    of each path whose index entry it adds, changes or removes invalidated (unpack-trees.c
    invalidate_ce_path; an entry kept with its local change is not one of them)."""
    ctx = run.ctx
    wanted = untracked.setting(ctx.config)
    if wanted is False or (facts.index_read.untracked is None and wanted is None):
        return b""
    changed: list[bytes] = []
    if facts.index_read.untracked is not None:
        now = {e.path: (e.mode, e.oid) for e in after}
        fromhex = bytes.fromhex
        now.update((e.path, (e.mode, fromhex(e.oid))) for e in written)
        changed = [p for p, e in before.items() if now.get(p) != (e.mode, e.oid)]
        changed += [p for p in now if p not in before]
    return untracked.after_checkout(
        facts.index_read.untracked,
        changed,
        work_tree=run.root,
        config=ctx.config,
        rawsz=HASH_SIZES[ctx.repo.object_format],
    )


def _carried(index: Mapping[bytes, ix.IndexEntry], written: list[bytes]) -> frozenset[bytes]:
    """The written paths whose entries keep their skip-worktree bit: without a sparse
    checkout git moves the bit to the new entry (unpack-trees.c merged_entry)."""
    return frozenset(p for p in written if p in index and index[p].extended_flags & SKIP)


def _assumed(tables: _Tables, written: list[bytes]) -> frozenset[bytes]:
    """The written paths whose entries keep their assume-unchanged bit: those whose entry
    stays what it was, written again (--force): git keeps the old entry (unpack-trees.c
    oneway_merge keep_entry); a changed one is a new entry, without it."""
    out = []
    for p in written:
        e, m = tables.in_index.get(p), tables.target.get(p)
        if e is None or m is None or not e.flags & ix.FLAG_ASSUME_VALID:
            continue
        if (e.mode, e.oid.hex()) == (m.mode, m.oid):
            out.append(p)
    return frozenset(out)


def _earlier(run: Run) -> tuple[str, ...]:
    """The trees whose files this switch may leave if it is interrupted: where HEAD is,
    and those interrupted switches before it were writing or leaving."""
    previous = run.found.interrupted
    trees = previous.trees if previous is not None else ()
    head = run.target.head_tree
    return tuple(dict.fromkeys((*trees, *([head] if head else []))))


def _warnings(sparsity: Sparsity | None, left: list[bytes]) -> list[str]:
    """git's sparse-checkout warnings, and its "not up to date" one for what is left."""
    warnings = list(sparsity.warnings) if sparsity is not None else []
    if left:
        warnings.append(
            "The following paths are not up to date and were left despite sparse patterns: "
            + quote_paths(left)
        )
    return warnings


def _entry_of(e: ix.IndexEntry) -> Entry:
    """A tree entry for what an index entry records (its size is not known)."""
    return Entry(e.path, e.mode, e.oid.hex(), -1)


def _skip_worktree(e: Entry) -> ix.IndexEntry:
    """An entry outside the sparse checkout: skip-worktree, zero stat data (as git)."""
    return ix.IndexEntry(
        e.path,
        e.mode,
        bytes.fromhex(e.oid),
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        extended_flags=ix.EXT_FLAG_SKIP_WORKTREE,
    )
