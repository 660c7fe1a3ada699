#!/usr/bin/env python3
"""``pcheckout clone``'s start-up, A/B of pcheckout trees: a small local clone, and the import.

    python3 scripts/bench_clone_startup.py [--runs 21] [--files 200] [--baseline SRC ...]

Each run is one ``python -m pcheckout clone -q SRC DEST`` process (and one with
``--no-checkout``: git's clone phase alone) of a generated repository of ``--files``
entries into a fresh destination, both on tmpfs where there is one, and one ``python -X
importtime -c "import pcheckout.clone"`` (the package's cumulative import time, as that
process reports it).  The variants (this tree's ``src/`` and each ``--baseline`` SRC,
another pcheckout's ``src/``, bytecode compiled first) run interleaved, the order reversed
every other round, the first round not recorded; the medians are printed per variant.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import PROJECT, bench_env, compile_bytecode  # noqa: E402  (scripts/ is not a package)
from bench_cli import _timed  # noqa: E402


def _import_us(env: dict[str, str]) -> int:
    """``import pcheckout.clone``'s cumulative time (us), from ``-X importtime``."""
    cmd = [sys.executable, "-X", "importtime", "-c", "import pcheckout.clone"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    for line in done.stderr.splitlines():  # "import time: self | cumulative | name"
        fields = [f.strip() for f in line.removeprefix("import time:").split("|")]
        if len(fields) == 3 and fields[2] == "pcheckout.clone":
            return int(fields[1])
    raise SystemExit("no pcheckout.clone line in -X importtime's output")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--baseline", type=Path, action="append", default=[], metavar="SRC")
    ns = ap.parse_args()
    variants = [("this tree", PROJECT / "src")] + [(str(b), b.resolve()) for b in ns.baseline]
    for _, src_dir in variants:
        compile_bytecode(src_dir)
    env0 = bench_env()
    tmp = "/dev/shm" if os.path.isdir("/dev/shm") else None
    base = Path(tempfile.mkdtemp(prefix="pcheckout-bench-clone-startup-", dir=tmp))
    rows: dict[str, list[str]] = {"clone": [], "clone --no-checkout": ["--no-checkout"]}
    wall: dict[tuple[str, str], list[float]] = {(v, r): [] for v, _ in variants for r in rows}
    imports: dict[str, list[int]] = {v: [] for v, _ in variants}
    try:
        src = base / "src"
        gen = [sys.executable, str(HERE / "genrepo.py"), "--files", str(ns.files), str(src)]
        subprocess.run(gen, check=True, capture_output=True)
        for r in range(ns.runs + 1):  # the first round warms the page cache: not recorded
            for label, src_dir in variants if r % 2 == 0 else variants[::-1]:
                env = {**env0, "PYTHONPATH": str(src_dir)}
                for row, extra in rows.items():
                    dest = base / "dest"
                    cmd = [sys.executable, "-m", "pcheckout", "clone", "-q", *extra]
                    seconds, _cpu = _timed([*cmd, str(src), str(dest)], env)
                    shutil.rmtree(dest)
                    if r:
                        wall[(label, row)].append(seconds)
                us = _import_us(env)
                if r:
                    imports[label].append(us)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{ns.runs} runs each, interleaved, {ns.files} files; medians")
    print(f"{'variant':<40} {'what':<30} {'median':>9}")
    for label, _ in variants:
        for row in rows:
            ms = statistics.median(wall[(label, row)]) * 1e3
            print(f"{label:<40} {'pcheckout ' + row:<30} {ms:>6.1f} ms")
        ms = statistics.median(imports[label]) / 1e3
        print(f"{label:<40} {'import pcheckout.clone':<30} {ms:>6.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
