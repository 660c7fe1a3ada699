"""Plan a write: the filesystem under the destination and the worker plan for it.

The one impure step of planning: detect the filesystem (``fs/detect.py``), look
up a stored ``pcheckout tune`` result for its mount, and hand both with the
counts to the pure ``policy.choose_workers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pcheckout.errors import PcheckoutError
from pcheckout.fs.detect import FsInfo, detect
from pcheckout.plan import policy, tunecache


def plan_for(
    root: Path,
    *,
    entries: int,
    nbytes: int,
    workers: int | None,
    environ: Mapping[str, str],
    config: Mapping[str, str],
    adapt: bool,
    fs: FsInfo | None = None,
    writer: str | None = None,
    git_version: tuple[int, int, int] = (0, 0, 0),
    processes: bool | None = None,
) -> tuple[FsInfo, policy.WorkerPlan]:
    """The filesystem under ``root`` (detected unless given) and the plan for
    writing ``entries`` files of ``nbytes`` in all; ``workers`` is ``--workers``
    (None: not given, or ``auto``), ``writer`` is ``--writer`` (likewise), and
    ``git_version`` the git that would write (git's writer needs 2.32+);
    ``processes`` forces forked engine workers or threads."""
    explicit = policy.explicit_choice(workers, environ, config)
    chosen = policy.explicit_writer(writer, environ, config)
    if fs is None:
        fs = detect(str(root))
    tuned = None
    if explicit is None or chosen is None:
        tuned = _tuned(fs)
    plan = policy.choose_workers(
        fs,
        cpus=policy.CpuInfo.current(),
        entries=entries,
        nbytes=nbytes,
        explicit=explicit,
        tuned=tuned,
        allow_adapt=adapt,
        writer=chosen,
        git_version=git_version,
        processes=processes,
    )
    return fs, plan


def _tuned(fs: FsInfo) -> policy.Tuned | None:
    """A stored ``pcheckout tune`` result for ``fs``'s mount; an unreadable cache is none."""
    try:
        return tunecache.lookup(fs)
    except (PcheckoutError, OSError, ValueError):
        return None
