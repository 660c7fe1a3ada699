"""A checkout whose paths collide on a case-insensitive destination, carried out as the
plan's :class:`~pcheckout.decide.collisions.Collisions` says.

The engine writes in rounds: every entry not replaced later, and the first of each group,
in round 1 (in parallel, as any checkout); before each round the files and directories
git's checkout would remove are removed and the directories it makes are made, in index
order; then that round's entries are written.  Each entry's stat data is that of the file
it wrote, as in git's index (an entry whose file a later one replaced keeps it: ``git
status`` then compares the file that is there).  git's writer is run with one worker: its
parallel checkout writes a group in whatever order its workers reach it, its sequential one
in index order (what ``git checkout`` and ``git clone`` do by default).  A clone's checkout
then says git clone's warning.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pcheckout.context import Context
from pcheckout.decide.collisions import Collisions, Step, warning
from pcheckout.decide.plan import Plan
from pcheckout.errors import WriteError
from pcheckout.git.promisor import Fetched
from pcheckout.plan.policy import WorkerPlan

if TYPE_CHECKING:  # the engine's modules: imported where it writes (git's writer uses this)
    from pcheckout.write.engine import Outcome
    from pcheckout.write.partial import Selection
    from pcheckout.write.worktree import WriteRequest

__all__ = ["git_workers", "say", "write_rounds"]


def write_rounds(
    ctx: Context, req: WriteRequest, sel: Selection, found: Collisions, latency_bound: bool
) -> tuple[Outcome, Fetched]:
    """``sel.wanted`` of ``req.entries`` written round by round; the outcome's stats cover
    every entry."""
    import dataclasses  # (the engine's records are dataclasses; git's writer needs none)

    from pcheckout.write import partial  # the engine's modules (git's writer imports this)
    from pcheckout.write.worktree import merge_outcomes  # likewise

    root = os.fsencode(req.root)
    by_round: dict[int, list[int]] = {}
    for i in sel.wanted:
        by_round.setdefault(found.rounds.get(i, 1), []).append(i)
    stats: list[bytes | None] = [None] * len(req.entries)
    outcomes: list[Outcome] = []
    fetched = Fetched()
    for r in sorted(by_round):
        _take_steps(root, [s for s in found.steps if s.round == r])
        this = req if r == 1 else dataclasses.replace(req, resume=False, previous=None)
        part = dataclasses.replace(sel, wanted=by_round[r])
        out, got = partial.write_selected(ctx, this, part, latency_bound=latency_bound)
        for i in by_round[r]:
            stats[i] = out.stats[i]
        outcomes.append(out)
        fetched.objects += got.objects
        fetched.bytes += got.bytes
        fetched.fetches += got.fetches
    return merge_outcomes(stats, outcomes), fetched


def _take_steps(root: bytes, steps: Sequence[Step]) -> None:
    """What git's checkout removes and makes before the entries of one round."""
    for step in steps:
        path = root + b"/" + step.path
        try:
            if step.op == "mkdir":
                try:
                    os.mkdir(path, 0o777)
                except FileExistsError:
                    if not stat_mod.S_ISDIR(os.lstat(path).st_mode):
                        raise
            elif step.op == "rmtree":
                import shutil  # (not imported ahead: ~3 ms of a start in a plain venv)

                shutil.rmtree(path)
            else:
                os.unlink(path)
        except FileNotFoundError:  # removed already (by the run a resume finishes)
            continue
        except OSError as exc:
            raise WriteError(step.path, exc) from None


def git_workers(plan: Plan) -> WorkerPlan:
    """The workers git's writer is given: one where paths collide (see above)."""
    if plan.collisions is None or plan.workers.workers == 1:
        return plan.workers
    return plan.workers._replace(workers=1)


def say(ctx: Context, plan: Plan) -> None:
    """git clone's warning, where a clone's checkout wrote colliding paths."""
    found = plan.collisions
    if found is not None and found.warn and found.collided:
        ctx.ui.git_message("warning: " + warning(found.collided))
