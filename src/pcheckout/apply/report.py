"""The ``Result`` of a run, built here alone: from the plan (all a dry run reports), then
from what the writer did."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcheckout.apply.job import Written
from pcheckout.decide.plan import Plan
from pcheckout.errors import decode
from pcheckout.options import Result

if TYPE_CHECKING:
    from pcheckout.git.refs import HeadOutcome

__all__ = ["finish", "report"]


def report(plan: Plan) -> Result:
    """What ``plan`` will do, as the report states it before anything is written."""
    c = plan.counts
    result = Result(plan.mode, c.files, c.nbytes, plan.workers, plan.fs)
    result.dry_run = plan.dry_run
    result.deleted = c.deleted
    result.skip_worktree = c.skip_worktree
    result.fetch_blobs = c.fetch_blobs
    result.warnings = list(plan.warnings)
    result.export_ignored = c.export_ignored
    result.export_subst = c.export_subst
    result.hooks = [h.name for h in plan.hooks if h.planned]
    result.submodules = [m.to_json() for m in plan.submodules]
    result.untracked_kept = [decode(n) for n in plan.untracked_kept]
    if plan.conversion is not None:
        result.add_conversion(plan.conversion)
    if plan.collisions is not None:
        result.collided = [decode(p) for p in plan.collisions.collided]
        result.replaced = [decode(p) for p in plan.collisions.lost]
    return result


def finish(result: Result, written: Written, seconds: float, head: HeadOutcome | None) -> Result:
    """``result`` once the plan is carried out: what the writer did, in ``seconds``, and
    where HEAD ended (``head``; None where HEAD did not move: an export)."""
    result.seconds = seconds
    result.written = written.files
    result.bytes = written.bytes
    result.kept = written.kept
    result.adapt_summary = written.adapt_summary
    result.processes = written.processes
    if written.fetched is not None:
        result.fetched_bytes, result.fetches = written.fetched.bytes, written.fetched.fetches
    if written.planned is not None:
        result.files = written.planned
    if written.deleted is not None:
        result.deleted = written.deleted
    if written.conversion is not None:
        result.add_conversion(written.conversion)
    result.head = head
    if written.said is not None:
        result.said = list(written.said)
    return result
