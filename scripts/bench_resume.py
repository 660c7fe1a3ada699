#!/usr/bin/env python3
"""Resume after SIGKILL against a fresh checkout, on the latency filesystem.

    python3 scripts/bench_resume.py [--files 4800] [--latency-ms 1.0] [--rounds 3]
        [--fractions 0.2,0.5,0.8] [--shape source]

Per round, interleaved: a fresh ``pcheckout checkout`` (timed, T); then for each
fraction f a fresh clone whose checkout is SIGKILLed f x T after it starts, and
the re-run of the same command (timed, R).  Prints the medians and R / T next to
issue 16's target, (1.25 - f).  Every work tree is a ``clone --shared`` onto a
fresh latency mount (objects stay on local disk, as with a work tree on NFS and
a local object store would not be; the checkout's reads of objects are not
what is measured).  Needs FUSE (docs/latencyfs.md).
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


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def _checkout(work: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pcheckout", "checkout", "-C", str(work), "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _timed(work: Path) -> float:
    t0 = time.monotonic()
    proc = _checkout(work)
    _out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"checkout failed: {err.decode(errors='replace')}")
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=4800)
    ap.add_argument("--shape", default="source")
    ap.add_argument("--latency-ms", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fractions", default="0.2,0.5,0.8")
    ns = ap.parse_args()
    fractions = [float(f) for f in ns.fractions.split(",")]
    base = Path(tempfile.mkdtemp(prefix="pcheckout-bench-resume-"))
    try:
        src = base / "src"
        subprocess.run(
            [
                sys.executable,
                str(HERE / "genrepo.py"),
                "--shape",
                ns.shape,
                "--files",
                str(ns.files),
                str(src),
            ],
            check=True,
            capture_output=True,
        )
        fresh: list[float] = []
        rerun: dict[float, list[float]] = {f: [] for f in fractions}
        n = 0

        def work_tree() -> tuple[Path, Path]:
            nonlocal n
            n += 1
            mnt = base / f"mnt{n}"
            latencyfs.mount(base / f"backing{n}", mnt, latency_ms=ns.latency_ms)
            work = mnt / "w"
            _git("clone", "-q", "--shared", "--no-checkout", str(src), str(work))
            return mnt, work

        for _ in range(ns.rounds):
            mnt, work = work_tree()
            try:
                fresh.append(_timed(work))
            finally:
                latencyfs.umount(mnt)
            t = statistics.median(fresh)
            for f in fractions:
                mnt, work = work_tree()
                try:
                    proc = _checkout(work)
                    time.sleep(f * t)
                    proc.send_signal(signal.SIGKILL)
                    proc.communicate()
                    rerun[f].append(_timed(work))
                finally:
                    latencyfs.umount(mnt)
        t = statistics.median(fresh)
        print(
            f"files={ns.files} latency={ns.latency_ms} ms rounds={ns.rounds} "
            f"load={os.getloadavg()[0]:.1f}"
        )
        print(f"fresh checkout: median {t:.2f} s ({', '.join(f'{x:.2f}' for x in fresh)})")
        print("| killed at | re-run (median) | re-run / fresh | target (1.25 - f) |")
        print("|---|---|---|---|")
        for f in fractions:
            r = statistics.median(rerun[f])
            print(
                f"| {f:.0%} | {r:.2f} s ({', '.join(f'{x:.2f}' for x in rerun[f])}) "
                f"| {r / t:.2f} | {1.25 - f:.2f} |"
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
