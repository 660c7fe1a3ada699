"""The writers' plain cat-files (``git/catfile.py`` ``Prestarted``) and the listing of the
loose objects they read themselves (``write/worktree.py`` ``LooseScan``), started while
the run still plans conversions and, for a resume, proves what it keeps: the decide step
tells :class:`Warm` the worker plan as soon as it is known."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from pcheckout.context import Context
from pcheckout.plan.policy import WorkerPlan

if TYPE_CHECKING:
    from pcheckout.git.catfile import Prestarted
    from pcheckout.write.partial import Selection
    from pcheckout.write.worktree import LooseScan

__all__ = ["Warm"]


class Warm:
    """Starts the cat-files and the loose objects' listing once told the plan (the decide
    step's ``planned`` call); the apply step hands them to the writers, which take them;
    :meth:`close` kills the untaken cat-files (every one, if the run failed before it
    wrote) and waits for the listing."""

    def __init__(self, ctx: Context, dry_run: bool) -> None:
        self._ctx = ctx
        self._dry_run = dry_run
        self.catfiles: Prestarted | None = None
        self.loose: LooseScan | None = None

    def __call__(self, plan: WorkerPlan, sel: Selection | None) -> None:
        """Only for writer threads (forked writers start their own, and a fork must not
        copy these pipes) that run this git as it is (a partial clone's writers of blobs
        still to fetch run another)."""
        if self._dry_run or plan.writer == "git" or plan.processes or plan.workers < 1:
            return
        if sel is not None and sel.missing:
            return
        from pcheckout.git.catfile import Prestarted
        from pcheckout.write.engine import fd_budget
        from pcheckout.write.worktree import LooseScan

        # (no more than the open-file limit lets the writers have: the rest is the run's)
        ctx = self._ctx
        self.catfiles = Prestarted(ctx.git, min(plan.workers, fd_budget()), spawn=ctx.spawn)
        self.loose = LooseScan(ctx, plan.workers)

    def close(self) -> None:
        if self.catfiles is not None:
            self.catfiles.close()
        if self.loose is not None:
            with contextlib.suppress(Exception):  # (the run failed before it wrote)
                self.loose.result()
