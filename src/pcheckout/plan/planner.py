"""Plan a write: the filesystem under the destination and the worker plan for it.

The one impure step of planning: detect the filesystem (``fs/detect.py``), look
up a stored ``pcheckout tune`` result for its mount (or its export, in the shared
file), read the CPUs and the ceiling, and hand it all to the pure
``policy.choose_workers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from pcheckout.errors import PcheckoutError
from pcheckout.fs.detect import FsInfo, detect
from pcheckout.plan import policy, tunecache


class Asked(NamedTuple):
    """What the user asked of the writers (``None``: not given, or ``auto``), with the
    configuration and the git that would write (git's writer needs 2.32+)."""

    workers: int | None  # --workers
    writer: str | None  # --writer
    adapt: bool  # False: --no-adapt (or a run that never adapts)
    environ: Mapping[str, str]
    config: Mapping[str, str]
    git_version: tuple[int, int, int] = (0, 0, 0)
    processes: bool | None = None  # forced forked engine workers (True) or threads (False)


def plan_for(
    root: Path, asked: Asked, *, entries: int, nbytes: int, fs: FsInfo | None = None
) -> tuple[FsInfo, policy.WorkerPlan]:
    """The filesystem under ``root`` (detected unless given) and the plan for
    writing ``entries`` files of ``nbytes`` in all, as ``asked``."""
    explicit = policy.explicit_choice(asked.workers, asked.environ, asked.config)
    chosen = policy.explicit_writer(asked.writer, asked.environ, asked.config)
    if fs is None:
        fs = detect(str(root))
    tuned = _tuned(fs, asked)
    inputs = policy.Inputs(
        cpus=policy.CpuInfo.current(),
        entries=entries,
        nbytes=nbytes,
        explicit=explicit,
        tuned=tuned,
        allow_adapt=asked.adapt,
        writer=chosen,
        git_version=asked.git_version,
        processes=asked.processes,
        ceilings=policy.ceiling_for(asked.environ, asked.config, tuned),
    )
    return fs, policy.choose_workers(fs, inputs)


def _tuned(fs: FsInfo, asked: Asked) -> policy.Tuned | None:
    """A stored ``pcheckout tune`` result for ``fs``'s mount (this user's, else the shared
    file's for its export); an unreadable cache is none."""
    try:
        return tunecache.lookup(fs, tunecache.shared_path(asked.environ, asked.config))
    except (PcheckoutError, OSError, ValueError):
        return None
