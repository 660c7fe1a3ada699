"""Helpers for scripts/bench.py: timing a command with its rusage, peak-RSS polling, machine
facts. Kept free of benchmark policy so it can be reused (and read) on its own."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

try:
    from pcheckout.fs import mountinfo
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from pcheckout.fs import mountinfo

# Interval of the RSS poller (10 ms: short enough to catch a checkout's steady state, long
# enough that polling a handful of processes costs well under 1 % of one core).
RSS_POLL_SECONDS = 0.01
# Lines of stderr kept from a failed command.
STDERR_TAIL_LINES = 8


@dataclass(frozen=True)
class Timed:
    seconds: float
    returncode: int
    user_s: float
    sys_s: float
    # ru_maxrss of the command: the largest single process among it and its waited-for
    # descendants (Linux reports KiB).
    maxrss_kib: int
    # Filled only when polling was asked for: peak of the sum of RSS over the process tree.
    peak_tree_rss_kib: int | None
    stderr_tail: str


class _TreeRssPoller(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(name="rss-poller", daemon=True)
        self.pid = pid
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self.stop.is_set():
            total = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
            self.peak = max(self.peak, total // 1024)
            self.stop.wait(RSS_POLL_SECONDS)


def run_timed(
    cmd: list[str], env: dict[str, str], cwd: Path | None = None, poll_rss: bool = False
) -> Timed:
    """Run ``cmd``; time from just before fork to its reaping. stdout is discarded, stderr
    goes to a temp file (never an undrained pipe) and its tail is kept."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err
        )
        poller = _TreeRssPoller(proc.pid) if poll_rss else None
        if poller:
            poller.start()
        try:
            _pid, status, ru = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        t1 = time.perf_counter()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if poller:
            poller.stop.set()
            poller.join()
        err.seek(0)
        tail = err.read().decode(errors="backslashreplace").splitlines()[-STDERR_TAIL_LINES:]
    return Timed(
        seconds=t1 - t0,
        returncode=proc.returncode,
        user_s=ru.ru_utime,
        sys_s=ru.ru_stime,
        maxrss_kib=ru.ru_maxrss,
        peak_tree_rss_kib=poller.peak if poller else None,
        stderr_tail="\n".join(tail),
    )


def fs_type(path: Path) -> str:
    """Filesystem type of the visible mount holding ``path`` (longest mount-point prefix)."""
    entry = mountinfo.read().find_by_prefix(str(path.resolve()))
    return entry.fstype if entry is not None else "?"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def machine_facts() -> dict[str, Any]:
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "ram_bytes": psutil.virtual_memory().total,
        "kernel": platform.release(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "loadavg_start": os.getloadavg(),
    }


def git_version() -> str:
    return subprocess.run(
        ["git", "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
