"""Helpers for tests that kill pcheckout: a CLI run started at a barrier, a kill
after the N-th file written, and the processes a run leaves behind."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import psutil

#: A bound that only catches hangs (behaviour is asserted, never speed).
HANG_S = 30.0
#: How long a cat-file or forked writer may outlive a killed parent ("a moment").
OUTLIVE_S = 3.0

#: ``python -c RUNNER BARRIER ARGS...``: the CLI's main() once BARRIER exists, so
#: two runs started side by side begin within a millisecond of each other.
RUNNER = r"""
import os, sys, time
barrier = sys.argv[1]
from pcheckout.cli.main import main
while not os.path.exists(barrier):
    time.sleep(0.0005)
sys.exit(main(sys.argv[2:]))
"""


def start_cli(args: list[str], barrier: Path | None = None) -> subprocess.Popen[str]:
    if barrier is None:
        cmd = [sys.executable, "-m", "pcheckout", *args]
    else:
        cmd = [sys.executable, "-c", RUNNER, str(barrier), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def count_written(work: Path) -> int:
    """Files and symlinks under ``work`` outside .git (a partial one counts)."""
    n = 0
    stack = [os.fsencode(work)]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        if e.name != b".git":
                            stack.append(e.path)
                    else:
                        n += 1
        except FileNotFoundError:
            continue
    return n


def kill_after(proc: subprocess.Popen[str], work: Path, n: int) -> bool:
    """SIGKILL ``proc`` once ``n`` files are on disk (True), or let it finish
    if it gets there first (False)."""
    deadline = time.monotonic() + HANG_S
    while proc.poll() is None:
        if count_written(work) >= n:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            return True
        if time.monotonic() > deadline:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"no {n} files written within {HANG_S} s")
        time.sleep(0.0005)
    proc.communicate()
    return False


def leftovers(work: Path) -> list[psutil.Process]:
    """Live processes whose command line names ``work`` (git -C WORK cat-file,
    forked writers running the CLI for WORK), waited for up to OUTLIVE_S."""
    deadline = time.monotonic() + OUTLIVE_S
    while True:
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            try:
                if p.info["status"] != psutil.STATUS_ZOMBIE and str(work) in " ".join(
                    p.info["cmdline"] or []
                ):
                    found.append(p)
            except psutil.Error:
                pass
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def latencyfs_module() -> ModuleType | None:
    """scripts/latencyfs.py, or None if FUSE cannot be used here (the reason
    is :func:`fuse_unavailable`)."""
    if fuse_unavailable() is not None:
        return None
    script = Path(__file__).resolve().parent.parent / "scripts" / "latencyfs.py"
    spec = importlib.util.spec_from_file_location("latencyfs_script", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fuse_unavailable() -> str | None:
    if not os.path.exists("/dev/fuse") or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not usable"
    for tool in ("fusermount3", "make", "cc", "pkg-config"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    if subprocess.run(["pkg-config", "--exists", "fuse3"], check=False).returncode != 0:
        return "libfuse3 headers are missing"
    return None
