#!/usr/bin/env python3
"""Resume after SIGKILL against a fresh checkout, on the latency filesystem.

    python3 scripts/bench_resume.py [--files 4800] [--latency-ms 1.0] [--rounds 3]
        [--fractions 0.2,0.5,0.8] [--shape source] [--git-workers 1,32] [--baseline SRC]

Per round, interleaved: a fresh ``pcheckout checkout`` (timed, T); then for each
fraction f a fresh clone whose checkout is SIGKILLed f x T after it starts, and
the re-run of the same command (timed, R).  Prints the medians and R / T next to
issue 16's target, (1.25 - f).  Every work tree is a ``clone --shared`` onto a
fresh latency mount (objects stay on local disk, as with a work tree on NFS and
a local object store would not be; the checkout's reads of objects are not
what is measured).  ``--git-workers`` adds, per round, a fresh ``git checkout``
(``checkout.workers=N``) of the same tree on a fresh mount: the yardstick, and
what shows a change of the filesystem itself.  The pcheckout measured is this
tree's ``src/`` (bytecode compiled first, as an installed copy has it), run with
bench.py's environment (no global git config, an empty tune cache).  ``--baseline
SRC`` (another pcheckout's ``src/``, e.g. a worktree of an older commit) times that
one too, each of its runs right after this tree's same run (A/B interleaved), with
its own table against its own fresh checkout.  Needs FUSE (docs/latencyfs.md).
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
from bench import PROJECT, bench_env, compile_bytecode, pcheckout_cmd  # noqa: E402

ENV = bench_env()


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, env=ENV)


def _checkout(work: Path, src: Path | None = None) -> subprocess.Popen[bytes]:
    """pcheckout from this tree, or (``src``) from another tree's ``src/``."""
    env = ENV
    if src is not None:
        env = {**ENV, "PYTHONPATH": str(src)}
    return subprocess.Popen(
        [*pcheckout_cmd(), "checkout", "-C", str(work), "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )


def _timed(work: Path, cmd: list[str] | None = None, src: Path | None = None) -> float:
    t0 = time.monotonic()
    if cmd is None:
        proc = _checkout(work, src)
    else:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    _out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"checkout failed: {err.decode(errors='replace')}")
    return time.monotonic() - t0


def _commit() -> str:
    """The commit measured, marked when the tree differs from it."""

    def out(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(PROJECT), *args], capture_output=True, text=True)
        return done.stdout.strip()

    head = out("rev-parse", "--short", "HEAD")
    dirty = out("status", "--porcelain", "--", "src", "scripts")
    return head + (" (with uncommitted changes)" if dirty else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=4800)
    ap.add_argument("--shape", default="source")
    ap.add_argument("--latency-ms", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fractions", default="0.2,0.5,0.8")
    ap.add_argument("--git-workers", default="", help="checkout.workers of git rows, e.g. 1,32")
    ap.add_argument("--baseline", type=Path, metavar="SRC", help="another pcheckout's src/")
    ns = ap.parse_args()
    fractions = [float(f) for f in ns.fractions.split(",")]
    git_workers = [int(x) for x in ns.git_workers.split(",") if x]
    bytecode = compile_bytecode()
    #: (label, src/ or None for this tree's)
    variants: list[tuple[str, Path | None]] = [("this tree", None)]
    if ns.baseline is not None:
        compile_bytecode(ns.baseline.resolve())
        variants.append((f"baseline {ns.baseline}", ns.baseline.resolve()))
    load0 = os.getloadavg()[0]
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
        fresh: dict[int, list[float]] = {v: [] for v in range(len(variants))}
        rerun = {(v, f): [] for v in range(len(variants)) for f in fractions}
        by_git: dict[int, list[float]] = {n: [] for n in git_workers}
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
            for w in git_workers:
                mnt, work = work_tree()
                cmd = ["git", "-C", str(work), "-c", f"checkout.workers={w}", "checkout", "-q",
                       "-f", "HEAD"]  # fmt: skip
                try:
                    by_git[w].append(_timed(work, cmd))
                finally:
                    latencyfs.umount(mnt)
            for v, (_label, vsrc) in enumerate(variants):
                mnt, work = work_tree()
                try:
                    fresh[v].append(_timed(work, src=vsrc))
                finally:
                    latencyfs.umount(mnt)
            for f in fractions:
                for v, (_label, vsrc) in enumerate(variants):
                    t = statistics.median(fresh[v])
                    mnt, work = work_tree()
                    try:
                        proc = _checkout(work, vsrc)
                        time.sleep(f * t)
                        proc.send_signal(signal.SIGKILL)
                        proc.communicate()
                        rerun[v, f].append(_timed(work, src=vsrc))
                    finally:
                        latencyfs.umount(mnt)
        print(
            f"commit {_commit()}; files={ns.files} latency={ns.latency_ms} ms "
            f"rounds={ns.rounds}; load average {load0:.1f} at the start, "
            f"{os.getloadavg()[0]:.1f} at the end; bytecode {bytecode}"
        )
        for w, runs in by_git.items():
            print(f"git checkout.workers={w} (fresh): median {statistics.median(runs):.2f} s "
                  f"({', '.join(f'{x:.2f}' for x in runs)})")  # fmt: skip
        for v, (label, _vsrc) in enumerate(variants):
            t = statistics.median(fresh[v])
            if len(variants) > 1:
                print(f"== {label}")
            print(f"fresh checkout: median {t:.2f} s ({', '.join(f'{x:.2f}' for x in fresh[v])})")
            print("| killed at | re-run (median) | re-run / fresh | target (1.25 - f) |")
            print("|---|---|---|---|")
            for f in fractions:
                runs = rerun[v, f]
                r = statistics.median(runs)
                print(
                    f"| {f:.0%} | {r:.2f} s ({', '.join(f'{x:.2f}' for x in runs)}) "
                    f"| {r / t:.2f} | {1.25 - f:.2f} |"
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
