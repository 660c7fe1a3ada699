"""Decide a switch that ``git checkout REV`` carries out itself (git's writer, no
``--force``): git's two-way merge, its local-change and untracked-file protection, its
messages and its HEAD and reflog.

What git will write and delete is the two trees' ``diff-tree`` (in round 1 where the
destination looked like this switch, ``session.py``): the written paths are checked one
by one, and the names of the subtrees it changed (with the root) for a name twice
(``git/pathsafety.py``); the worker count is planned from what changes.  Neither tree is
listed whole: the check costs what changes, not the tree.
"""

from __future__ import annotations

from pcheckout.decide.hooks import after_checkout
from pcheckout.decide.plan import Counts, HeadMove, Plan
from pcheckout.decide.workers import switch_workers
from pcheckout.fs.detect import FsInfo
from pcheckout.git.pathsafety import changes_look_safe, check_entries
from pcheckout.git.refs import symbolic_head
from pcheckout.git.tree import TreeChanges, list_tree, tree_changes
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
    changes = run.found.changes  # (asked in round 1 where it looked like this switch)
    if changes is None:
        changes = tree_changes(git, head_tree, target.tree)
    writes = list(zip(changes.written, changes.modes, strict=True))
    if not changes_look_safe(git, target.tree, changes.trees, writes, config):
        check_entries(list_tree(git, target.tree), config)  # names the offence
    return changes
