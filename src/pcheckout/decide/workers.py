"""The writers a run's options ask for (``plan/planner.py``), planned for a checkout's
part: the record of what was asked, and a switch's plan."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcheckout.plan.policy import WorkerPlan
from pcheckout.session import Run

if TYPE_CHECKING:
    from pcheckout.fs.detect import FsInfo
    from pcheckout.plan.planner import Asked

__all__ = ["asked", "switch_workers"]


def asked(run: Run, *, adapt: bool | None = None) -> Asked:
    """What ``run``'s options ask of the writers (``adapt``: overriding theirs)."""
    from pcheckout.plan.planner import Asked  # (imported beside round 1: session.Ahead)

    opts, ctx = run.opts, run.ctx
    return Asked(
        opts.workers,
        opts.writer,
        opts.adapt if adapt is None else adapt,
        opts.environ,
        ctx.config,
        ctx.git.version,
        opts.processes,
    )


def switch_workers(run: Run, entries: int, fs: FsInfo | None) -> tuple[FsInfo, WorkerPlan]:
    """A switch's plan for ``entries`` (it never adapts; its byte count is not known;
    the processes are the engine's business)."""
    from pcheckout.plan.planner import plan_for  # (imported beside round 1: session.Ahead)

    request = asked(run, adapt=False)._replace(processes=None)
    return plan_for(run.root, request, entries=entries, nbytes=0, fs=fs)
