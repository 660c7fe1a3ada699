"""What every part of the apply step is handed, and what a writer answers."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from pcheckout.context import Context
from pcheckout.decide.plan import Plan

if TYPE_CHECKING:  # types only: the engine's modules are imported where it writes
    from pcheckout.apply.warm import Warm
    from pcheckout.git.convert import ConversionPlan
    from pcheckout.git.lock import IndexLock
    from pcheckout.git.promisor import Fetched
    from pcheckout.write.journal import Journal

__all__ = ["Job", "Written"]


class Job(NamedTuple):
    """One plan being carried out."""

    ctx: Context
    plan: Plan
    lock: IndexLock | None  # index.lock, held since the run began (None: an export)
    journal: Journal | None = None  # where the engine records completed entries
    warm: Warm | None = None  # the writers' cat-files and loose objects, started ahead


class Written(NamedTuple):
    """What a writer did (beside the files on disk, and the index where it wrote one)."""

    files: int  # entries written (a resume: besides those it kept)
    bytes: int  # bytes written; -1: unknown
    kept: int = 0  # entries a resume found already written
    adapt_summary: str | None = None  # what the adaptive controller did, if it ran
    processes: bool = False  # written by forked processes (else threads)
    fetched: Fetched | None = None  # a partial clone's fetches while or before writing
    conversion: ConversionPlan | None = None  # where planned only now (a switch)
    planned: int | None = None  # the entries to write, where only the writer knew them
    deleted: int | None = None  # likewise, the paths removed
    failed: tuple[str, ...] = ()  # git's messages for submodules that could not be moved
    said: tuple[tuple[str, str], ...] | None = None  # git's HEAD lines (Result.said)
