"""The CPU count under containers: cgroup v2 cpu.max and v1 CFS quotas, read from fixture
trees laid out as /proc and /sys/fs/cgroup are (CpuInfo.current(root=...))."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import clone_no_checkout, make_repo

from pcheckout.plan.cpus import CpuInfo, CpuLimit, cgroup_limit, limited

V2_MOUNT = "30 23 0:26 {root} /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V1_MOUNTS = (
    "31 23 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
    "32 23 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
)


def _tree(tmp: Path, cgroup: str, mounts: str, files: dict[str, str]) -> str:
    (tmp / "proc/self").mkdir(parents=True)
    (tmp / "proc/self/cgroup").write_text(cgroup)
    (tmp / "proc/self/mountinfo").write_text(mounts)
    for rel, text in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    return str(tmp)


def test_v2_cpu_max_of_the_process_cgroup(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        "0::/ci/job7\n",
        V2_MOUNT.format(root="/"),
        {
            "sys/fs/cgroup/ci/job7/cpu.max": "150000 100000\n",
            "sys/fs/cgroup/ci/cpu.max": "max 100000\n",
        },
    )
    got = cgroup_limit(root)
    assert got == CpuLimit(1.5, "cgroup v2 cpu.max 150000 100000 (/sys/fs/cgroup/ci/job7)")


def test_a_parent_limit_binds_its_children(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        "0::/ci/job7\n",
        V2_MOUNT.format(root="/"),
        {
            "sys/fs/cgroup/ci/job7/cpu.max": "400000 100000\n",
            "sys/fs/cgroup/ci/cpu.max": "100000 100000\n",
        },
    )
    limit = cgroup_limit(root)
    assert limit is not None and limit.cpus == 1.0 and limit.where.endswith("(/sys/fs/cgroup/ci)")


def test_no_quota_no_limit(tmp_path: Path) -> None:
    root = _tree(
        tmp_path, "0::/\n", V2_MOUNT.format(root="/"), {"sys/fs/cgroup/cpu.max": "max 100000\n"}
    )
    assert cgroup_limit(root) is None
    assert cgroup_limit(str(tmp_path / "nothing-here")) is None  # no /proc: no limit


def test_a_cgroup_namespace_sees_its_own_cgroup_as_the_root(tmp_path: Path) -> None:
    """In a container /proc/self/cgroup says "0::/" and the mount is the container's cgroup:
    its own cpu.max is at the mount point."""
    root = _tree(
        tmp_path, "0::/\n", V2_MOUNT.format(root="/"), {"sys/fs/cgroup/cpu.max": "50000 100000"}
    )
    limit = cgroup_limit(root)
    assert limit is not None and limit.cpus == 0.5


def test_a_mount_of_part_of_the_hierarchy(tmp_path: Path) -> None:
    """A mount whose root is /kubepods shows /kubepods/pod1 at /sys/fs/cgroup/pod1."""
    root = _tree(
        tmp_path,
        "0::/kubepods/pod1\n",
        V2_MOUNT.format(root="/kubepods"),
        {"sys/fs/cgroup/pod1/cpu.max": "200000 100000"},
    )
    limit = cgroup_limit(root)
    assert limit is not None and limit.cpus == 2.0
    other = _tree(
        tmp_path / "o", "0::/system/x\n", V2_MOUNT.format(root="/kubepods"), {}
    )  # the process's cgroup is not under this mount
    assert cgroup_limit(other) is None


def test_v1_cfs_quota(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n",
        V1_MOUNTS,
        {
            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "250000\n",
            "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        },
    )
    limit = cgroup_limit(root)
    assert limit is not None and limit.cpus == 2.5
    assert limit.where.startswith("cgroup v1 cpu.cfs_quota_us 250000 / cfs_period_us 100000")


@pytest.mark.parametrize("text", ["", "garbage", "0 100000", "-5 100000", "100 0", "1 2 3"])
def test_unreadable_quotas_are_no_limit(tmp_path: Path, text: str) -> None:
    root = _tree(tmp_path, "0::/\n", V2_MOUNT.format(root="/"), {"sys/fs/cgroup/cpu.max": text})
    assert cgroup_limit(root) is None


def test_a_quota_cuts_the_count_rounded_up_and_says_so() -> None:
    mask = CpuInfo(8, 4)
    assert limited(mask, None) == mask
    assert limited(mask, CpuLimit(16.0, "x")) == mask  # looser than the mask: the mask
    one = limited(mask, CpuLimit(0.5, "cgroup v2 cpu.max 50000 100000 (/sys/fs/cgroup)"))
    assert (one.logical, one.physical) == (1, 1)
    assert one.limited_by == (
        "cgroup v2 cpu.max 50000 100000 (/sys/fs/cgroup): 0.5 CPUs' time, counted as 1 "
        "(of 8 in the affinity mask)"
    )
    assert limited(mask, CpuLimit(2.5, "q")).logical == 3
    assert limited(mask, CpuLimit(2.0, "q")).logical == 2


def test_current_reads_the_quota_under_root(tmp_path: Path) -> None:
    root = _tree(
        tmp_path, "0::/\n", V2_MOUNT.format(root="/"), {"sys/fs/cgroup/cpu.max": "100000 100000"}
    )
    here = CpuInfo.current(root)
    if len(os.sched_getaffinity(0)) > 1:
        assert here.logical == 1 and "cpu.max 100000 100000" in here.limited_by
    assert CpuInfo.current().logical >= 1


def test_the_line_and_the_json_name_what_set_the_count() -> None:
    free = CpuInfo(4, 2)
    assert free.describe() == "4, 2 cores (neither an affinity mask nor a cgroup quota limits them)"
    assert free.to_json() == {"logical": 4, "physical": 2, "limited_by": ""}
    cut = limited(free, CpuLimit(0.5, "cgroup v2 cpu.max 50000 100000 (/sys/fs/cgroup/ci)"))
    assert cut.describe().startswith("1, 1 core (limited by cgroup v2 cpu.max 50000 100000")
    assert CpuInfo(3, None).describe().startswith("3 (")


# --- a real process under a real limit ---------------------------------------------------------


def _dry_run(w: Path, preexec: Callable[[], None] | None = None) -> dict[str, Any]:
    """``checkout --dry-run --json`` in a process set up by ``preexec`` (before exec)."""
    done = subprocess.run(
        [sys.executable, "-m", "pcheckout", "checkout", "-C", str(w), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        preexec_fn=preexec,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    """A fresh clone of 200 files on the local disk (CPU-bound: the count is the CPUs')."""
    src = make_repo(tmp_path, {b"f%03d" % i: b"x\n" for i in range(200)})
    return clone_no_checkout(src, tmp_path / "w")


def test_an_affinity_mask_is_named(worktree: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs to leave one out")
    got = _dry_run(worktree, lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}))
    assert got["cpus"]["logical"] == 1
    assert got["cpus"]["limited_by"].startswith("the affinity mask: 1 of ")
    assert "CPUs limited by the affinity mask" in got["reason"]
    assert _dry_run(worktree)["cpus"]["limited_by"] == ""


def _cpu_cgroup() -> tuple[Path, str] | None:
    """A cgroup hierarchy with the cpu controller this (root) process can make a child in:
    (its directory, the quota file's format), or None."""
    if os.geteuid() != 0:
        return None
    v1 = Path("/sys/fs/cgroup/cpu")
    if (v1 / "cpu.cfs_quota_us").is_file() and os.access(v1, os.W_OK):
        return v1, "v1"
    v2 = Path("/sys/fs/cgroup")
    try:
        enabled = (v2 / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    return (v2, "v2") if "cpu" in enabled and os.access(v2, os.W_OK) else None


def test_a_cgroup_quota_is_named_by_a_real_dry_run(worktree: Path) -> None:
    found = _cpu_cgroup()
    if found is None:
        pytest.skip("needs root and a cgroup hierarchy with the cpu controller to make a child in")
    top, version = found
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs for a quota of one to cut")
    group = top / f"pcheckout-test-{os.getpid()}"
    group.mkdir()
    try:
        if version == "v1":
            (group / "cpu.cfs_period_us").write_text("100000")
            (group / "cpu.cfs_quota_us").write_text("50000")
        else:
            (group / "cpu.max").write_text("50000 100000")
        procs = group / "cgroup.procs"
        got = _dry_run(worktree, lambda: procs.write_text(str(os.getpid())))
    finally:
        group.rmdir()  # the process has exited: the group is empty
    quota = "cpu.cfs_quota_us 50000" if version == "v1" else "cpu.max 50000 100000"
    assert got["cpus"]["logical"] == 1, got["cpus"]
    assert f"cgroup {version} {quota}" in got["cpus"]["limited_by"]
    assert group.name in got["cpus"]["limited_by"] and "0.5 CPUs' time" in got["reason"]
