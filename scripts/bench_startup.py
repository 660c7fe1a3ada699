#!/usr/bin/env python3
"""Where a checkout's start-up goes, on the latency filesystem: A/B of pcheckout trees.

    python3 scripts/bench_startup.py [--files 4800] [--latency-ms 1.0] [--runs 7]
        [--kill-at SECONDS | --kill-files N] [--baseline SRC ...]

Each run is a fresh ``clone --shared --no-checkout`` onto a fresh latency mount and one
``pcheckout checkout -q`` of it (with ``--kill-at S``: the re-run after a first run was
SIGKILLed S seconds after it started, i.e. a resume; with ``--kill-files N``: once N
files are in the mount's backing directory, which is read directly, not through the
mount).  The timed run goes through a small wrapper that notes, from the interpreter's
start of the CLI module:

* ``S``: the writers' engine starts (imports, git rounds, listing, planning, a resume's
  proof of what it keeps);
* ``F1``: the first file is written (S plus the writers' own start: their cat-files);
* ``W1``: the last writer thread to write anything writes its first file (how long the
  writers take to be all at work);
* ``E``: the engine's last run returns (every file written);
* ``T``: the command returns.

With ``--kill-files`` the table also gives the engine's time per file left to write
(E - S over the entries the killed run had not written), against a fresh run's.

The variants (this tree's ``src/`` and each ``--baseline`` SRC, another pcheckout's
``src/``) run interleaved, the order reversed every other round; the medians are printed
per variant.  The wrapper's own imports (the engine's and the filesystem module) come
before the clock starts and so are not counted; the interpreter's start is not either.
Needs FUSE (docs/latencyfs.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import latencyfs  # noqa: E402  (scripts/ is not a package)
from bench import PROJECT, bench_env, compile_bytecode  # noqa: E402

#: ``python -c WRAPPER OUT ARGS...``: the CLI with the three marks appended to OUT.
WRAPPER = r"""
import sys, threading, time
from pcheckout.fs import files
from pcheckout.write import engine
t0 = time.perf_counter()
marks = {}
run, write_file = engine.Engine.run, files.Destination.write_file
def timed_run(self, *a, **k):
    marks.setdefault("S", time.perf_counter() - t0)
    try:
        return run(self, *a, **k)
    finally:
        marks["E"] = time.perf_counter() - t0
firsts = {}
def timed_write_file(self, *a, **k):
    out = write_file(self, *a, **k)
    t = time.perf_counter() - t0
    marks.setdefault("F1", t)
    firsts.setdefault(threading.current_thread().name, t)
    return out
engine.Engine.run, files.Destination.write_file = timed_run, timed_write_file
from pcheckout.cli.main import main
try:
    code = main(sys.argv[2:])
finally:
    marks["T"] = time.perf_counter() - t0
    if firsts:
        marks["W1"] = max(firsts.values())
    with open(sys.argv[1], "a") as f:
        f.write(" ".join(f"{k}={v:.4f}" for k, v in marks.items()) + "\n")
sys.exit(code)
"""

MARKS = ("S", "F1", "W1", "E", "T")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=4800)
    ap.add_argument("--shape", default="source")
    ap.add_argument("--latency-ms", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=7)
    kill = ap.add_mutually_exclusive_group()
    kill.add_argument("--kill-at", type=float, metavar="SECONDS",
                      help="time re-runs after a SIGKILL this long after the start")  # fmt: skip
    kill.add_argument("--kill-files", type=int, metavar="N",
                      help="time re-runs after a SIGKILL once N files are written")  # fmt: skip
    ap.add_argument("--baseline", type=Path, action="append", default=[], metavar="SRC")
    ns = ap.parse_args()
    variants = [("this tree", PROJECT / "src")] + [(str(b), b.resolve()) for b in ns.baseline]
    for _, src_dir in variants:
        compile_bytecode(src_dir)
    env0 = bench_env()
    base = Path(tempfile.mkdtemp(prefix="pcheckout-bench-startup-"))
    marks: dict[str, dict[str, list[float]]] = {v: {m: [] for m in MARKS} for v, _ in variants}
    per_file: dict[str, list[float]] = {v: [] for v, _ in variants}  # (E - S) / files left
    try:
        src = base / "src"
        gen = [sys.executable, str(HERE / "genrepo.py"), "--shape", ns.shape]
        subprocess.run([*gen, "--files", str(ns.files), str(src)], check=True, capture_output=True)
        k = 0
        for r in range(ns.runs):
            for label, src_dir in variants if r % 2 == 0 else variants[::-1]:
                k += 1
                mnt = base / f"mnt{k}"
                latencyfs.mount(base / f"backing{k}", mnt, latency_ms=ns.latency_ms)
                try:
                    work = mnt / "w"
                    clone = ["git", "clone", "-q", "--shared", "--no-checkout", str(src)]
                    subprocess.run([*clone, str(work)], check=True, capture_output=True, env=env0)
                    env = {**env0, "PYTHONPATH": str(src_dir)}
                    cli = ["checkout", "-C", str(work), "-q"]
                    left = ns.files
                    if ns.kill_at is not None or ns.kill_files is not None:
                        first = subprocess.Popen([sys.executable, "-m", "pcheckout", *cli],
                                                 env=env, stderr=subprocess.DEVNULL)  # fmt: skip
                        if ns.kill_at is not None:
                            time.sleep(ns.kill_at)
                        else:
                            while _files(base / f"backing{k}" / "w") < ns.kill_files:
                                if first.poll() is not None:
                                    break
                                time.sleep(0.002)
                        first.send_signal(signal.SIGKILL)
                        first.wait()
                        left = ns.files - _files(base / f"backing{k}" / "w")
                    out = base / f"marks{k}"
                    subprocess.run([sys.executable, "-c", WRAPPER, str(out), *cli], check=True,
                                   env=env)  # fmt: skip
                    got = dict(kv.split("=") for kv in out.read_text().split())
                    for m in MARKS:
                        if m in got:
                            marks[label][m].append(float(got[m]))
                    if "E" in got and left > 0:
                        per_file[label].append((float(got["E"]) - float(got["S"])) / left)
                finally:
                    latencyfs.umount(mnt)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    what = "fresh"
    if ns.kill_at is not None:
        what = f"re-run after a kill at {ns.kill_at} s"
    elif ns.kill_files is not None:
        what = f"re-run after a kill once {ns.kill_files} files were written"
    print(f"files={ns.files} latency={ns.latency_ms} ms runs={ns.runs}: {what}; "
          "medians (ms) from the CLI module's start")  # fmt: skip
    print("| pcheckout | engine starts (S) | first file (F1) | F1 - S | last writer's first "
          "file (W1) | engine per file left, us | returns (T), min-max |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, _ in variants:
        m = {k: statistics.median(v) * 1000 for k, v in marks[label].items() if v}
        t = marks[label]["T"]
        spread = f"{min(t) * 1000:.0f}-{max(t) * 1000:.0f}"
        us = statistics.median(per_file[label]) * 1e6 if per_file[label] else float("nan")
        print(f"| {label} | {m['S']:.0f} | {m['F1']:.0f} | {m['F1'] - m['S']:.0f} | "
              f"{m['W1']:.0f} | {us:.0f} | {m['T']:.0f}, {spread} |")  # fmt: skip
    return 0


def _files(root: Path) -> int:
    """Files under ``root`` (a mount's backing directory), ``.git`` aside."""
    n = 0
    for _dir, dirs, names in os.walk(root):
        if ".git" in dirs:
            dirs.remove(".git")
        n += len(names)
    return n


if __name__ == "__main__":
    sys.exit(main())
