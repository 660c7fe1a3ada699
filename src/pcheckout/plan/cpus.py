"""The CPUs this process may use: the affinity mask, a cgroup's CPU quota, the cores.

* **Affinity** (``sched_getaffinity``): ``taskset`` and a container's cpuset (cgroup v1
  ``cpuset.cpus`` and v2 ``cpuset.cpus.effective`` both shrink it).
* **Quota**: cgroup v2 ``cpu.max`` (``"QUOTA PERIOD"`` or ``"max PERIOD"``) and cgroup v1
  ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (``-1``: none), the lowest along the path
  from the process's cgroup up to the hierarchy's mount (a parent's limit binds its
  children): kernel Documentation/admin-guide/cgroup-v2.rst (*cpu.max*) and
  Documentation/scheduler/sched-bwc.rst.  A quota of 1.5 CPUs counts as 2 (rounded up, as
  the JDK's container support and Go's GOMAXPROCS do since Go 1.25): a checkout's processes
  wait on I/O part of the time, and 1 would leave half a CPU unused.
* **Cores**: distinct SMT sibling sets among the allowed CPUs (sysfs topology).

Everything is read under ``root`` (``/`` here; tests pass a directory of fixture files).
Off Linux psutil counts the machine's CPUs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import NamedTuple

from pcheckout.errors import PcheckoutError
from pcheckout.fs import mountinfo


class CpuLimit(NamedTuple):
    """A cgroup's CPU quota: how many CPUs' worth of time per period, and where it is set."""

    cpus: float
    where: str  # e.g. "cgroup v2 cpu.max 150000 100000 (/sys/fs/cgroup/ci/job)"


class CpuInfo(NamedTuple):
    logical: int
    physical: int | None
    #: Which limit set ``logical``, for ``--dry-run``: "" (the affinity mask), or a sentence
    #: naming the cgroup quota and the mask it cut.
    limited_by: str = ""

    @classmethod
    def current(cls, root: str = "/") -> CpuInfo:
        """The CPUs this process may run on (see the module docstring)."""
        if not hasattr(os, "sched_getaffinity"):
            # Imported here: psutil costs ~12 ms, 4% of a 5k-file tmpfs checkout.
            import psutil

            logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
            return cls(logical=logical, physical=psutil.cpu_count(logical=False))
        allowed = os.sched_getaffinity(0)
        cores = linux_cores(allowed, os.path.join(root, "sys/devices/system/cpu"))
        online = os.cpu_count() or len(allowed)
        mask = ""
        if len(allowed) < online:
            mask = f"the affinity mask: {len(allowed)} of {online} CPUs (taskset or a cpuset)"
        return limited(cls(len(allowed) or 1, cores, mask), cgroup_limit(root))

    def describe(self) -> str:
        """One line for ``--dry-run`` and ``detect``: the count and what set it."""
        cores = "" if self.physical is None else f", {self.physical} core"
        cores += "s" if self.physical not in (None, 1) else ""
        if not self.limited_by:
            return (
                f"{self.logical}{cores} (neither an affinity mask nor a cgroup quota limits them)"
            )
        return f"{self.logical}{cores} (limited by {self.limited_by})"

    def to_json(self) -> dict[str, object]:
        """``detect --json``'s and the checkout's ``cpus`` (docs/json.md)."""
        return {"logical": self.logical, "physical": self.physical, "limited_by": self.limited_by}

    @property
    def cpu_bound_workers(self) -> int:
        """seed 000: physical cores (half the logical CPUs if unknown), capped at 20."""
        cores = self.physical if self.physical else max(1, self.logical // 2)
        return max(1, min(cores, CPU_BOUND_CAP))


#: CPU-bound cap: seed 000 (Jeff King, "index-pack: adjust default threading cap", git 2020)
#: found no gain past 20 threads on a 40-core/80-thread machine.
CPU_BOUND_CAP = 20


def limited(cpus: CpuInfo, limit: CpuLimit | None) -> CpuInfo:
    """``cpus`` cut to a cgroup quota that allows fewer CPUs than the mask (cores likewise)."""
    if limit is None:
        return cpus
    n = max(1, math.ceil(limit.cpus - 1e-9))
    if n >= cpus.logical:
        return cpus
    physical = None if cpus.physical is None else min(cpus.physical, n)
    why = (
        f"{limit.where}: {limit.cpus:g} CPUs' time, counted as {n} "
        f"(of {cpus.logical} in the affinity mask)"
    )
    return CpuInfo(n, physical, why)


def linux_cores(cpus: set[int], sysfs: str = "/sys/devices/system/cpu") -> int | None:
    """Physical cores among ``cpus``: distinct SMT sibling sets (``core_cpus_list``, called
    ``thread_siblings_list`` before Linux 5.6).  None when sysfs does not say."""
    cores = set()
    for cpu in cpus:
        for name in ("core_cpus_list", "thread_siblings_list"):
            try:
                with open(f"{sysfs}/cpu{cpu}/topology/{name}", "rb") as f:
                    cores.add(f.read().strip())
                break
            except OSError:
                continue
        else:
            return None
    return len(cores) or None


def cgroup_limit(root: str = "/") -> CpuLimit | None:
    """The tightest CPU quota on this process's cgroups (v2 and v1), or None."""
    try:
        with open(os.path.join(root, "proc/self/cgroup"), encoding="utf-8") as f:
            memberships = [line.rstrip("\n").split(":", 2) for line in f]
        table = mountinfo.read(os.path.join(root, "proc/self/mountinfo"))
    except (OSError, ValueError, PcheckoutError):
        return None
    found = []
    for entry in table:
        for parts in memberships:
            if len(parts) != 3:
                continue
            _, controllers, path = parts
            if entry.fstype == "cgroup2" and controllers == "":
                found.append(_walk(root, entry, path, _v2_quota))
            elif (
                entry.fstype == "cgroup"
                and "cpu" in controllers.split(",")
                and "cpu" in entry.super_options
            ):
                found.append(_walk(root, entry, path, _v1_quota))
    limits = [x for x in found if x is not None]
    return min(limits, key=lambda x: x.cpus, default=None)


#: Reads one cgroup directory's quota (``_v2_quota``, ``_v1_quota``).
_Reader = Callable[[str], "CpuLimit | None"]


def _walk(root: str, entry: mountinfo.MountEntry, path: str, read: _Reader) -> CpuLimit | None:
    """The lowest quota from the process's cgroup directory up to the hierarchy's mount."""
    inner = entry.root.rstrip("/")
    if inner and not (path == inner or path.startswith(inner + "/")):
        return None  # this mount shows another part of the hierarchy
    rel = path[len(inner) :].strip("/")
    top = os.path.join(root, entry.mount_point.lstrip("/"))
    best: CpuLimit | None = None
    while True:
        here = os.path.join(top, rel) if rel else top
        got = read(here)
        if got is not None and (best is None or got.cpus < best.cpus):
            shown = "/" + os.path.relpath(here, root) if root != "/" else here
            best = CpuLimit(got.cpus, f"{got.where} ({shown})")
        if not rel:
            return best
        rel = os.path.dirname(rel)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _v2_quota(directory: str) -> CpuLimit | None:
    text = _read(os.path.join(directory, "cpu.max"))
    parts = (text or "").split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1])
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return CpuLimit(quota / period, f"cgroup v2 cpu.max {quota} {period}")


def _v1_quota(directory: str) -> CpuLimit | None:
    quota_text = _read(os.path.join(directory, "cpu.cfs_quota_us"))
    period_text = _read(os.path.join(directory, "cpu.cfs_period_us"))
    try:
        quota, period = int(quota_text or "-1"), int(period_text or "0")
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return CpuLimit(quota / period, f"cgroup v1 cpu.cfs_quota_us {quota} / cfs_period_us {period}")
