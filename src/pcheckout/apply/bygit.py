"""Plans written by git's own checkout, carried out through ``write/gitwriter.py`` (the one
module that runs git to write a work tree):

* a fresh checkout, a resume and a switch with ``--force``: ``read-tree -u --reset TREE``
  writes the tree and a scratch index (a copy of the index), renamed over the index
  through the lock; an interrupted run left no index, so running it again overwrites;
* a switch without ``--force`` ("git-switch"): ``git checkout REV`` itself, in a scratch
  index too; git moves HEAD and writes its reflog;
* an export: ``read-tree -u --reset TREE`` into the destination with a temporary index.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

from pcheckout.apply import collided
from pcheckout.apply.job import Job, Written
from pcheckout.context import Context
from pcheckout.errors import GitError, GitRefusedError, Interrupted
from pcheckout.git.config import config_bool
from pcheckout.git.indexsize import written_bytes
from pcheckout.git.lock import IndexLock, scratch_index
from pcheckout.plan.policy import PARALLEL_THRESHOLD
from pcheckout.write import gitwriter

__all__ = ["write"]


def write(job: Job) -> Written:
    """Carry out ``job.plan`` by git's writer."""
    kind = job.plan.kind
    if kind == "export":
        return _export(job)
    assert job.lock is not None  # taken for every run that writes a work tree
    if kind == "git-switch":
        return _switch(job, job.lock)
    return _tree(job, job.lock)


def _tree(job: Job, lock: IndexLock) -> Written:
    """The tree and the index (HEAD is moved by the apply step, as for the engine)."""
    ctx, plan = job.ctx, job.plan
    if job.journal is not None:
        job.journal.close()  # git records nothing in it: a resume by git's writer overwrites
    fresh = plan.kind in ("fresh", "resume")
    with scratch_index(lock, copy=True) as scratch:
        git = dataclasses.replace(ctx.git, env=scratch.env(ctx.git.env))
        workers = collided.git_workers(plan)
        done = gitwriter.write_by_git(
            ctx._replace(git=git), plan.tree, workers, plan.recurse_submodules
        )
        # git does not say what it wrote; its index holds every file's size (-1: unknown).
        paths = None if fresh else {e.path for e in plan.entries}
        nbytes = written_bytes(scratch.path, ctx.repo.object_format, paths)
        lock.commit_from(scratch.path)
    collided.say(ctx, plan)
    # (no attribute source at all, as the plan found: no path has filter=lfs; the lookup is
    # an ls-files and a check-attr over every path, ~80 ms at 40k entries on tmpfs)
    if plan.conversion is None or plan.conversion.sources:
        _lfs_hooks(ctx, lambda: _checked_out(ctx) if fresh else [e.path for e in plan.entries])
    if not fresh:
        return Written(len(plan.entries), nbytes)
    return Written(done.updated if done.updated >= 0 else plan.counts.files, nbytes)


def _switch(job: Job, lock: IndexLock) -> Written:
    """``git checkout REV``: git refuses (its message, nothing changed) or moves the work
    tree, the index (a scratch copy, renamed over the index through ``lock``) and HEAD.
    The counts come from the two trees' changes and the index git wrote."""
    ctx, plan = job.ctx, job.plan
    assert plan.changes is not None and plan.head is not None
    report = gitwriter.Reporting(ctx.ui, plan.workers.workers)
    try:
        with scratch_index(lock, copy=True) as scratch:
            by_git = dataclasses.replace(ctx.git, env=scratch.env(ctx.git.env))
            before = _identity(scratch.path)
            try:
                done = gitwriter.switch(
                    by_git,
                    plan.head.rev,
                    workers=plan.workers.workers,
                    threshold=PARALLEL_THRESHOLD,
                    progress=report,
                )
            except GitError as exc:
                # git wrote the work tree and its index, then failed to move HEAD (its
                # lock held): the index it wrote is git's own result, put in place
                if not isinstance(exc, GitRefusedError) and _identity(scratch.path) != before:
                    lock.commit_from(scratch.path)
                raise
            # The old index is still in place until the commit.
            sparse = config_bool(ctx.config.get("core.sparsecheckout"), False)
            written, deleted, nbytes = gitwriter.switch_counts(
                plan.changes, scratch.path, lock.index, ctx.repo.object_format, sparse
            )
            lock.commit_from(scratch.path)
    except KeyboardInterrupt:
        raise Interrupted(2, "git's checkout stopped; run the same command again") from None
    finally:
        report.finish()
    gitwriter.relay(ctx.ui, done)
    changes = plan.changes
    _lfs_hooks(ctx, lambda: changes.written)
    return Written(written, nbytes, planned=written, deleted=deleted)


def _lfs_hooks(ctx: Context, written: Callable[[], Sequence[bytes]]) -> None:
    """git-lfs's hooks, where git started git-lfs's filter (for a ``written`` path whose
    ``filter`` attribute is ``lfs``) and one is missing: git-lfs's filter installs them
    each time it starts, but under git's writer it read the ``core.hooksPath=/dev/null``
    that keeps git's own hooks off, and installed nothing."""
    from pcheckout.git import attributes, lfs  # (only here: lfs imports its staging's)

    if not lfs.runs_git_lfs(ctx.config) or not lfs.hooks_missing(ctx.repo, ctx.config):
        return
    rows = attributes.lookup_in_index(ctx.git, ctx.repo, written(), ["filter"])
    if any(row[0] == "lfs" for row in rows):
        lfs.install_hooks(ctx.git, ctx.repo, ctx.config)


def _checked_out(ctx: Context) -> list[bytes]:
    """The index's entries git's checkout wrote (not skip-worktree)."""
    out = ctx.git.out("ls-files", "-t", "-z")
    return [rec[2:] for rec in out.split(b"\0") if rec.startswith(b"H ")]


def _identity(path: bytes) -> tuple[int, int] | None:
    """The file at ``path`` as git's lockfile.c replaces it (a rename: a new inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _export(job: Job) -> Written:
    """The tree alone into the destination; no index left behind."""
    ctx, plan = job.ctx, job.plan
    done = gitwriter.export_by_git(ctx, plan.tree, plan.root, plan.workers)
    return Written(done.updated if done.updated >= 0 else len(plan.entries), done.bytes)
