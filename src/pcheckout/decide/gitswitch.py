"""Decide a switch that ``git checkout REV`` carries out itself (git's writer, no
``--force``): git's two-way merge, its local-change and untracked-file protection, its
messages and its HEAD and reflog.

What git will write and delete is the two trees' ``diff-tree``, listed beside the
target's paths before git runs (in round 1 where the destination looked like this
switch, ``session.py``): the written paths are checked one by one and the whole
tree's names for collisions (``git/pathsafety.py``), and the worker count is planned
from what changes.  A tree of 40k entries is then not parsed entry by entry (~60 ms).
"""

from __future__ import annotations

from pcheckout.context import both
from pcheckout.decide.hooks import after_checkout
from pcheckout.decide.plan import Counts, HeadMove, Plan
from pcheckout.decide.workers import switch_workers
from pcheckout.fs.detect import FsInfo
from pcheckout.git.pathsafety import check_entries, entries_look_safe, tree_names_look_safe
from pcheckout.git.refs import symbolic_head
from pcheckout.git.tree import TreeChanges, list_paths, list_tree, tree_changes
from pcheckout.session import Run

__all__ = ["decide"]


def decide(run: Run, fs: FsInfo) -> Plan:
    """The plan of a switch by ``git checkout REV``; its counts come after git ran."""
    changes = _changes(run)
    # Planned from what changes: a switch of 50 files does not need a tree's worth of workers.
    fs, workers = switch_workers(run, len(changes.written) + len(changes.deleted), fs)
    return Plan(
        "git-switch",
        run.root,
        run.target.tree,
        [],
        workers,
        fs,
        Counts(0, 0),
        head=HeadMove(
            run.opts.rev, run.target, symbolic_head(run.ctx.git, run.ctx.repo, run.ctx.config)
        ),
        commit=run.target.commit,
        earlier=(run.target.head_tree,) if run.target.head_tree else (),
        changes=changes,
        hooks=after_checkout(run),
        counts_read=run.opts.counts,
        head_lines=run.opts.head_lines,
    )


def _changes(run: Run) -> TreeChanges:
    """What the switch changes, its paths checked as a checkout's are."""
    git, config, target = run.ctx.git, run.ctx.config, run.target
    head_tree = target.head_tree
    if head_tree is None:  # an unborn branch with files and an index: all of it is written
        entries = list_tree(git, target.tree)
        check_entries(entries, config)
        return TreeChanges([e.path for e in entries], [e.mode for e in entries], [])
    listed, early = run.found.listed, run.found.changes
    if listed is not None and early is not None:  # both asked in round 1 (session.py)
        paths = listed.paths()  # a name twice, a subtree's record included: look closer
        names_ok, changes = len(set(paths)) == len(paths), early
    else:  # the names are checked while diff-tree still runs (it reads both trees)
        names_ok, changes = both(
            lambda: tree_names_look_safe(list_paths(git, target.tree)),
            lambda: tree_changes(git, head_tree, target.tree),
        )
    writes = list(zip(changes.written, changes.modes, strict=True))
    if not (names_ok and entries_look_safe(writes, config)):
        check_entries(list_tree(git, target.tree), config)  # names the offence
    return changes
