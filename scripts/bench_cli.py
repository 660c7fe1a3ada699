#!/usr/bin/env python3
"""The command line's start-up, A/B of pcheckout trees: `detect --json`, `checkout --dry-run`.

    python3 scripts/bench_cli.py [--runs 21] [--files 1000] [--baseline SRC ...]

Each run is one ``python -m pcheckout`` process: ``detect --json`` of a directory, and
``checkout -C W --dry-run`` of a fresh ``clone --no-checkout`` of a generated repository
(``--files`` entries, on tmpfs where there is one).  The variants (this tree's ``src/`` and
each ``--baseline`` SRC, another pcheckout's ``src/``, bytecode compiled first) run
interleaved, the order reversed every other round; the medians of wall time and of the
process's CPU time (user + system, its children included) are printed per variant.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import PROJECT, bench_env, compile_bytecode  # noqa: E402  (scripts/ is not a package)


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err}")
    if proc.stderr:
        proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--baseline", type=Path, action="append", default=[], metavar="SRC")
    ns = ap.parse_args()
    variants = [("this tree", PROJECT / "src")] + [(str(b), b.resolve()) for b in ns.baseline]
    for _, src_dir in variants:
        compile_bytecode(src_dir)
    env0 = bench_env()
    tmp = "/dev/shm" if os.path.isdir("/dev/shm") else None
    base = Path(tempfile.mkdtemp(prefix="pcheckout-bench-cli-", dir=tmp))
    commands = {
        "detect --json": lambda work: ["detect", "--json", str(work)],
        "checkout --dry-run": lambda work: ["checkout", "-C", str(work), "--dry-run"],
    }
    samples = {(v, c): ([], []) for v, _ in variants for c in commands}  # (wall, cpu)
    try:
        src = base / "src"
        gen = [sys.executable, str(HERE / "genrepo.py"), "--files", str(ns.files), str(src)]
        subprocess.run(gen, check=True, capture_output=True)
        work = base / "w"
        clone = ["git", "clone", "-q", "--no-checkout", str(src), str(work)]
        subprocess.run(clone, check=True, capture_output=True, env=env0)
        for r in range(ns.runs + 1):  # the first round warms the page cache: not recorded
            for label, src_dir in variants if r % 2 == 0 else variants[::-1]:
                env = {**env0, "PYTHONPATH": str(src_dir)}
                for name, args in commands.items():
                    wall, cpu = _timed([sys.executable, "-m", "pcheckout", *args(work)], env)
                    if r:
                        samples[(label, name)][0].append(wall)
                        samples[(label, name)][1].append(cpu)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{ns.runs} runs each, interleaved; medians (ms)")
    print(f"{'variant':<40} {'command':<20} {'wall':>7} {'cpu':>7}")
    for (label, name), (wall, cpu) in samples.items():
        w, c = statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3
        print(f"{label:<40} {name:<20} {w:>7.1f} {c:>7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
