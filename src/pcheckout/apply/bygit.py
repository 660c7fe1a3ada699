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

import os
from collections.abc import Callable, Sequence

from pcheckout.apply import collided
from pcheckout.apply.job import Job, Written
from pcheckout.context import Context
from pcheckout.decide.plan import Plan
from pcheckout.errors import GitError, GitRefusedError, Interrupted
from pcheckout.git import attributes
from pcheckout.git.config import config_bool, runs_git_lfs
from pcheckout.git.convert import LFS_REASON
from pcheckout.git.indexsize import written_bytes
from pcheckout.git.lock import IndexLock, scratch_index
from pcheckout.git.tree import RootedListing
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
        git = ctx.git.replace(env=scratch.env(ctx.git.env))
        workers = collided.git_workers(plan)
        done = gitwriter.write_by_git(
            ctx._replace(git=git), plan.tree, workers, plan.recurse_submodules
        )
        # git does not say what it wrote; its index holds every file's size (-1: unknown).
        paths = None if fresh else {e.path for e in plan.entries}
        nbytes = -1
        if plan.counts_read:
            nbytes = written_bytes(scratch.path, ctx.repo.object_format, paths)
        lock.commit_from(scratch.path)
    collided.say(ctx, plan)
    _lfs_hooks(ctx, lambda: _tree_filters_lfs(ctx, plan, fresh))
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
            by_git = ctx.git.replace(env=scratch.env(ctx.git.env))
            before = _identity(scratch.path)
            try:
                done = gitwriter.switch(
                    by_git,
                    plan.head.rev,
                    workers=plan.workers.workers,
                    threshold=PARALLEL_THRESHOLD,
                    progress=report,
                    said=plan.head_lines,
                )
            except GitError as exc:
                # git wrote the work tree and its index, then failed to move HEAD (its
                # lock held): the index it wrote is git's own result, put in place
                if not isinstance(exc, GitRefusedError) and _identity(scratch.path) != before:
                    lock.commit_from(scratch.path)
                raise
            # The old index is still in place until the commit.
            if plan.counts_read:
                sparse = config_bool(ctx.config.get("core.sparsecheckout"), False)
                written, deleted, nbytes = gitwriter.switch_counts(
                    plan.changes, scratch.path, lock.index, ctx.repo.object_format, sparse
                )
            else:  # (what git was asked: the two trees' changes)
                written, deleted, nbytes = len(plan.changes.written), len(plan.changes.deleted), -1
            lock.commit_from(scratch.path)
    except KeyboardInterrupt:
        raise Interrupted(2, "git's checkout stopped; run the same command again") from None
    finally:
        report.finish()
    if done.said is None:  # (else git's lines, its warnings among them, go in the Result)
        gitwriter.relay(ctx.ui, done)
    changes = plan.changes
    _lfs_hooks(ctx, lambda: _switch_filters_lfs(ctx, changes.written))
    return Written(written, nbytes, planned=written, deleted=deleted, said=done.said)


def _lfs_hooks(ctx: Context, filtered: Callable[[], bool]) -> None:
    """git-lfs's hooks, where git started git-lfs's filter (``filtered``: a path it wrote
    has filter=lfs) and one is missing: git-lfs's filter installs them each time it
    starts, but under git's writer it read the ``core.hooksPath=/dev/null`` that keeps
    git's own hooks off, and installed nothing."""
    if not runs_git_lfs(ctx.config):
        return
    from pcheckout.git import lfshooks  # (only where git-lfs is configured)

    if not lfshooks.hooks_missing(ctx.repo, ctx.config):
        return
    if filtered():
        lfshooks.install_hooks(ctx.git, ctx.repo, ctx.config)


def _tree_filters_lfs(ctx: Context, plan: Plan, fresh: bool) -> bool:
    """Whether a path git's checkout of the tree wrote has filter=lfs."""
    conv = plan.conversion
    if conv is not None and not conv.sources:
        return False  # (no attribute source at all, as the plan found)
    if conv is not None and conv.per_entry:
        return bool(conv.counts.get(LFS_REASON))  # (the plan looked every path up)
    entries = plan.entries
    if isinstance(entries, RootedListing):
        names = entries.files_named(attributes.GITATTRIBUTES)
    else:
        names = [e.path for e in entries if attributes.is_gitattributes(e.path)]
    return _filters_lfs(
        ctx, names, lambda: _checked_out(ctx) if fresh else [e.path for e in plan.entries]
    )


def _switch_filters_lfs(ctx: Context, written: Sequence[bytes]) -> bool:
    """Whether a path git's switch wrote has filter=lfs: the index git wrote names its
    ``.gitattributes`` (an ls-files where its bytes may hold one)."""
    names: list[bytes] = []
    try:
        with open(ctx.repo.index_path, "rb") as f:
            maybe = attributes.index_may_name_gitattributes(f.read())
    except OSError:
        maybe = True
    if maybe or any(n.startswith("sharedindex.") for n in os.listdir(ctx.repo.git_dir)):
        # (a split index's entries are mostly in its shared index)
        out = ctx.git.out("ls-files", "-z", "--", LS_GITATTRIBUTES, extra_env=GLOB_PATHSPECS)
        names = [p for p in out.split(b"\0") if attributes.is_gitattributes(p)]
    return _filters_lfs(ctx, names, lambda: written)


#: every ``.gitattributes`` of the index, as a pathspec with its magic (gitglossary)
LS_GITATTRIBUTES = ":(glob)**/.gitattributes"
#: (pathspec magic as the pathspec says, whatever the caller's environment asks: git.c)
GLOB_PATHSPECS = {"GIT_LITERAL_PATHSPECS": "0", "GIT_NOGLOB_PATHSPECS": "0"}


def _filters_lfs(
    ctx: Context, gitattributes: Sequence[bytes], written: Callable[[], Sequence[bytes]]
) -> bool:
    """Whether a ``written`` path has filter=lfs, looked up (a check-attr over the paths:
    23-37 ms for 9k paths on tmpfs) only where an attribute source says "lfs": the tree's
    ``gitattributes`` (paths) or the attribute files git reads besides."""
    repo = ctx.repo
    assert repo.work_tree is not None  # (a checkout's)
    others = attributes.other_attribute_files(ctx.config, repo.common_dir, ctx.environ)
    if not attributes.may_say(b"lfs", repo.work_tree, gitattributes, others):
        return False
    rows = attributes.lookup_in_index(ctx.git, repo, written(), ["filter"])
    return any(row[0] == "lfs" for row in rows)


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
