"""Carry out a plan (``decide/plan.py``): one step for a checkout, a resume, a switch and
an export, whichever writer the plan chose.

In order: the journal of an interrupted run's completed entries (a fresh checkout and a
resume); the writer: pcheckout's engine (``apply/byengine.py``: a switch's fetch and
deletes first, then the files, then the index from the writers' stat data) or git's own
checkout (``apply/bygit.py``, the one module that runs git's writer: git writes the files
and a scratch index, renamed over the index through the lock); HEAD, as ``git checkout
REV`` moves it; the journal removed; the ``Result`` (``apply/report.py``).  An export
keeps its journal in its destination instead (``decide/export.py``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from pcheckout.apply.job import Job, Written
from pcheckout.apply.report import finish, report
from pcheckout.context import Context
from pcheckout.decide.plan import Plan
from pcheckout.errors import DestinationError, GitRefusedError, HookError, SubmoduleError
from pcheckout.git import branchstate, hooks
from pcheckout.git.promisor import PromisorFetchError
from pcheckout.git.refs import HeadOutcome, head_outcome, update_head
from pcheckout.options import Result
from pcheckout.session import IN_PROGRESS
from pcheckout.write import journal

if TYPE_CHECKING:
    from pcheckout.apply.warm import Warm
    from pcheckout.git.lock import IndexLock

__all__ = ["apply"]

#: Failures that leave a switch's work tree as it was: git refused it, or its fetch
#: failed before anything changed.
UNCHANGED = (GitRefusedError, PromisorFetchError)

#: The hooks git runs once the index is in place, before HEAD moves (read-cache.c
#: ``do_write_locked_index``), and those it runs once HEAD has moved (builtin/checkout.c
#: ``post_checkout_hook``, builtin/clone.c ``checkout``).
INDEX_HOOKS = ("post-index-change",)
AFTER_HOOKS = ("post-checkout",)


def apply(
    ctx: Context,
    plan: Plan,
    lock: IndexLock | None = None,
    warm: Warm | None = None,
) -> Result:
    """Carry out ``plan`` (a dry run's is only reported).  ``lock`` is ``index.lock``, held
    since the run began (None: an export); ``warm`` what was started for the writers
    while the run decided (``apply/warm.py``)."""
    result = report(plan)
    if plan.dry_run:
        return result
    writer = _writer(plan)
    if plan.kind == "export":
        _make_destination(plan)
    t0 = time.monotonic()
    picks = branchstate.picks(ctx.repo.git_dir) if plan.kind == "git-switch" else []
    with _journal(ctx, plan) as jr:
        _remove_leftovers(plan)
        written = _write(writer, Job(ctx, plan, lock, jr, warm))
        result.hooks = []
        _run_hooks(ctx, plan, result, INDEX_HOOKS)  # (its status is ignored, as git does)
        head = _move_head(ctx, plan)
    finish(result, written, time.monotonic() - t0, head)
    if head is not None:
        ctx.ui.moved(result)
        # git's own checkout cleared it, quietly: its warnings said for it (unless git,
        # not quiet, said them itself among its lines: ``written.said``)
        cleared = picks if written.said is None else []
        if plan.kind != "git-switch":
            cleared = branchstate.clear(ctx.git, ctx.repo.git_dir)
        for line in cleared:
            ctx.ui.git_message(line)
    _run_hooks(ctx, plan, result, AFTER_HOOKS)
    if written.failed:  # as git's checkout: said after the switch, exit 1
        raise SubmoduleError("; ".join(written.failed), result=result)
    return result


def _write(writer: ModuleType, job: Job) -> Written:
    """The writer's write; an export's under the umask that gives its files the modes
    ``tar -x`` leaves, then its members' times set as tar sets them."""
    plan = job.plan
    if plan.export is None:
        written: Written = writer.write(job)
        return written
    from pcheckout.apply.exported import finish_members
    from pcheckout.fs.untar import umask

    with umask(plan.export.umask):
        written = writer.write(job)
    finish_members(plan)
    return written


def _make_destination(plan: Plan) -> None:
    """An export's destination, with its parents (one line if it cannot be made)."""
    try:
        plan.root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DestinationError(f"cannot create {plan.root}: {exc.strerror}") from None


def _run_hooks(ctx: Context, plan: Plan, result: Result, names: tuple[str, ...]) -> None:
    """The plan's hooks named ``names``, as git runs them (``result.hooks`` names those
    that ran); a ``post-checkout`` that fails makes the run fail, as git's checkout does,
    after a complete write."""
    where = hooks.Where(ctx.git, ctx.repo, ctx.config, ctx.environ, plan.root)
    for hook in plan.hooks:
        if hook.name not in names:
            continue
        ran = hooks.run(where, hook)
        for line in ran.hints:
            ctx.ui.git_message(line)
        if ran.code is None:
            continue
        result.hooks.append(hook.name)
        if ran.code != 0 and hook.name in AFTER_HOOKS:
            raise HookError(
                f"the {hook.name} hook exited with status {ran.code}; the checkout is complete",
                result=result,
                status=ran.code,
            )


def _writer(plan: Plan) -> ModuleType:
    """The module that writes ``plan``: git's writer or pcheckout's engine (each imported
    only where it writes: the engine's modules cost ~25 ms of CPU before git's writer
    could start, docs/benchmarks.md, start-up)."""
    if plan.workers.writer == "git" and (plan.export is None or plan.export.git_can_write):
        from pcheckout.apply import bygit

        return bygit
    from pcheckout.apply import byengine

    return byengine


@contextlib.contextmanager
def _journal(ctx: Context, plan: Plan) -> Iterator[journal.Journal | None]:
    """The in-progress journal (``write/journal.py``) of every run that writes a work
    tree, started before anything is written (EROFS or ENOSPC then name the marker) and
    removed once HEAD has moved; an interrupted run leaves it for the re-run, which
    finishes it (``decide/leftovers.py``).  A run that fails having changed nothing (git
    refused the switch, a fetch failed first) leaves none of its own."""
    fresh = plan.kind in ("fresh", "resume")
    conversion = plan.conversion.any if plan.conversion is not None else True
    kind = "fresh" if fresh else plan.kind if plan.kind == "export" else "switch"
    head = journal.Header(
        plan.commit or "", plan.tree, conversion, kind, plan.earlier, clone=plan.clone
    )
    marker = _marker(ctx, plan)
    previous = plan.previous if fresh else None  # (only a fresh checkout's has records)
    jr = journal.Journal.start(marker, head, previous=previous)
    try:
        yield jr
    except UNCHANGED:
        # (not an interrupted run's journal; a fresh checkout's fetches run while it writes)
        if plan.previous is None and not fresh:
            journal.remove(marker)
        raise
    finally:
        jr.close()
    journal.remove(marker)


def _marker(ctx: Context, plan: Plan) -> Path:
    """Where the run's journal goes: the git dir, or an export's destination."""
    if plan.kind == "export":
        from pcheckout.decide.export import EXPORT_MARKER

        return plan.root / EXPORT_MARKER
    return ctx.repo.git_dir / IN_PROGRESS


def _remove_leftovers(plan: Plan) -> None:
    """Before anything is written: ignored files in the way (as git's checkout overwrites
    them); before a fresh checkout or an export writes, what interrupted runs of other
    trees left (``decide/checkout.py``, ``decide/export.py``), and the directories that
    leaves empty."""
    root_b = os.fsencode(plan.root)
    if plan.expendable:
        from pcheckout.write.remove import remove_expendable

        remove_expendable(root_b, plan.expendable)
    if plan.kind not in ("fresh", "resume", "export") or not plan.delete:
        return
    # (imported where there is something to remove: write/remove.py's threads import
    # concurrent.futures and logging, ~5 ms before git's writer could start)
    from pcheckout.write.remove import delete_parallel, remove_empty_dirs

    delete_parallel(root_b, plan.delete, max(1, plan.workers.workers), plan.min_share)
    remove_empty_dirs(root_b, set(plan.delete), plan.entries)


def _move_head(ctx: Context, plan: Plan) -> HeadOutcome | None:
    """Point HEAD where ``git checkout REV`` would; where it went (None: an export)."""
    move = plan.head
    if move is None:
        return None
    target = move.target
    if plan.kind == "git-switch":  # git moved it, and wrote its reflog
        return head_outcome(target, move.rev, move.old, ctx.config)
    return update_head(ctx.git, ctx.repo, ctx.config, move.rev, target)
