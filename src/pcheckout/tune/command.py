"""``pcheckout tune`` as the core runs it: a :class:`TuneRequest` in, a record out.

The command line only parses into the request and prints the record; everything it decides
(which step runs, the checks, the mount, whether to measure first) is here.  The steps:

* :func:`measure`: the workload at each count, the knee, the writers at the knee, stored
  (and with ``shared``, in that file by the mount's export);
* :func:`forget`: the stored result for this mount dropped;
* :func:`plan_git_config` then :func:`apply_git_config`: plain git's per-mount config, shown
  between the two (or :func:`remove_git_config`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pcheckout.errors import UsageError
from pcheckout.fs.detect import FsInfo, detect
from pcheckout.git.runner import Git
from pcheckout.plan import tunecache
from pcheckout.plan.tunecache import TuneResult
from pcheckout.tune import gitconfig
from pcheckout.tune.workload import TuneOptions, run_tune

Say = Callable[[str], None]


@dataclass(frozen=True)
class TuneRequest:
    """What ``pcheckout tune`` is asked: the measurement's options and what to do."""

    measure: TuneOptions
    writers: bool = True  # time the two writers at the knee (--no-writers: False)
    forget: bool = False  # drop the stored result for this mount instead
    git_config: bool = False  # write plain git's per-mount config
    remove: bool = False  # with git_config: take it out again
    measure_missing: bool = True  # with git_config: measure when nothing is stored
    dry_run: bool = False  # with git_config: show it, write nothing
    shared: str | None = None  # also store the result there, by the mount's export

    @property
    def path(self) -> str:
        return self.measure.path


class Forgotten(NamedTuple):
    """``tune --forget``: whether there was a stored result for the mount."""

    dropped: bool
    mount_key: str
    mount_point: str

    def to_json(self) -> dict[str, Any]:
        return {
            "forgotten": self.dropped,
            "mount_key": self.mount_key,
            "mount_point": self.mount_point,
        }


class GitConfigRemoved(NamedTuple):
    """``tune --git-config --remove``: what was taken out (on a dry run: would be)."""

    mount_point: str
    removed: list[str]
    dry_run: bool

    def to_json(self) -> dict[str, Any]:
        return {"mount_point": self.mount_point, "removed": self.removed, "dry_run": self.dry_run}


class GitConfigWritten(NamedTuple):
    """``tune --git-config``: the config planned, and whether writing it changed anything."""

    planned: gitconfig.MountConfig
    changed: bool
    dry_run: bool

    def to_json(self) -> dict[str, Any]:
        p = self.planned
        return {
            "mount_point": p.mount_point,
            "key": p.change.key,
            "file": str(p.change.owned),
            "workers": p.plan.workers,
            "threshold": p.threshold,
            "reason": p.plan.reason,
            "needed": p.change.needed,
            "changed": self.changed,
            "dry_run": self.dry_run,
        }


def check(request: TuneRequest) -> FsInfo:
    """The request's checks (usage errors, before anything runs), then the filesystem."""
    if request.measure.max_workers < 1:
        raise UsageError("--max-workers must be at least 1")
    if not os.path.isdir(request.path):
        raise UsageError(f"not a directory: {request.path}")
    if (request.remove or not request.measure_missing or request.dry_run) and not (
        request.git_config
    ):
        raise UsageError("--remove, --no-measure and --dry-run go with --git-config")
    fs = detect(request.path)
    if request.shared and tunecache.export_key(fs) is None:
        raise UsageError(f"--shared: {fs.fstype} at {fs.mount_point} is not a network export")
    return fs


def measure(
    request: TuneRequest, fs: FsInfo, progress: Say | None = None, note: Say | None = None
) -> TuneResult:
    """Measure the mount (and the writers, unless ``request.writers`` is off), store it."""
    from pcheckout.tune import writers  # whole checkouts: only a measurement runs them

    compare = writers.comparer(request.measure, progress, note) if request.writers else None
    result = tunecache.with_ceiling(
        run_tune(request.measure, fs=fs, progress=progress, writers=compare)
    )
    if request.shared:
        tunecache.store_shared(result, fs, Path(request.shared))
    return result


def export_of(fs: FsInfo) -> str:
    """The export a shared result is stored under (``--shared``)."""
    return tunecache.export_key(fs) or fs.source


def forget(fs: FsInfo) -> Forgotten:
    return Forgotten(tunecache.forget(fs), fs.mount_key, fs.mount_point)


def _mount(request: TuneRequest, fs: FsInfo) -> str:
    return fs.mount_point or os.path.abspath(request.path)


def remove_git_config(request: TuneRequest, fs: FsInfo) -> GitConfigRemoved:
    git = Git(Path(request.path))
    mount = _mount(request, fs)
    removed = gitconfig.remove(git, mount, dry_run=request.dry_run)
    return GitConfigRemoved(mount, removed, request.dry_run)


def plan_git_config(request: TuneRequest, fs: FsInfo) -> gitconfig.MountConfig:
    """Plain git under this mount gets the count pcheckout would give git's writer there (a
    stored tune result, measured now if there is none, or the policy without measuring)."""
    git = Git(Path(request.path))
    tuned = tunecache.lookup(fs)
    if tuned is None and request.measure_missing:
        measure(request, fs)
        tuned = tunecache.lookup(fs)
    return gitconfig.for_mount(git, fs, _mount(request, fs), tuned)


def apply_git_config(request: TuneRequest, planned: gitconfig.MountConfig) -> GitConfigWritten:
    changed = False if request.dry_run else gitconfig.apply(planned.git, planned.change)
    return GitConfigWritten(planned, changed, request.dry_run)
