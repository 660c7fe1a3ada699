#!/usr/bin/env python3
"""pcheckout's engine switching a populated work tree, this tree's ``src/`` against another's
(issue 26: a switch at 250,000 files).

    python3 scripts/bench_switch.py --baseline OLD/src [--dest tmpfs] \\
        [--files 250000,40000,5000] [--change 0.01] [--runs 9]

Per table (one generated ``source`` repository, scripts/genrepo.py: v2 changes ``--change``
of v1's files; one ``clone --no-checkout --shared`` of it on the destination), the two rows
take turns, the first rotating: ``git checkout -q -f v1`` (not timed), then ``pcheckout
checkout --writer pcheckout -q v2`` with that row's ``src/`` first on PYTHONPATH, timed from
fork to reaping.  Each run must leave ``git status --porcelain`` empty.  Medians (min-max).
OLD is a baseline's sources, e.g. ``git archive <commit> src | tar -x -C OLD``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import benchlib  # noqa: E402
import genrepo  # noqa: E402
from bench_writer import ENV, destination  # noqa: E402

PROJECT = HERE.parent


def _switch(work: Path, src: Path, env: dict[str, str]) -> float:
    subprocess.run(["git", "-C", str(work), "checkout", "-q", "-f", "v1"], check=True, env=env)
    cmd = [sys.executable, "-m", "pcheckout", "checkout", "-C", str(work)]
    timed = benchlib.run_timed(
        [*cmd, "--writer", "pcheckout", "-q", "v2"], {**env, "PYTHONPATH": str(src)}
    )
    if timed.returncode != 0:
        raise SystemExit(f"{src}: exit {timed.returncode}: {timed.stderr_tail}")
    status = subprocess.run(
        ["git", "-C", str(work), "status", "--porcelain"], capture_output=True, env=env
    )
    if status.stdout:
        raise SystemExit(f"{src}: the work tree is not clean after the switch")
    return timed.seconds


def table(source: Path, root: Path, rows: dict[str, Path], runs: int, env: dict[str, str]) -> str:
    work = root / "work"
    subprocess.run(
        ["git", "clone", "-q", "--no-checkout", "--shared", str(source), str(work)],
        check=True,
        env=env,
    )
    try:
        times: dict[str, list[float]] = {name: [] for name in rows}
        names = list(rows)
        for r in range(runs):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                times[name].append(_switch(work, rows[name], env))
        entries = subprocess.run(
            ["git", "-C", str(work), "ls-files"], capture_output=True, check=True, env=env
        ).stdout.count(b"\n")
    finally:
        benchlib.rmtree(work)
    out = [f"{source.name}: {entries:,} entries, {runs} rounds", "", "| row | median | min-max |"]
    out.append("|---|---:|---:|")
    for name, ts in times.items():
        out.append(f"| {name} | {statistics.median(ts):.3f} s | {min(ts):.3f}-{max(ts):.3f} s |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", required=True, help="another tree's src/ directory")
    p.add_argument("--dest", default="tmpfs", choices=["tmpfs", "ext4j"])
    p.add_argument("--files", default="250000,40000,5000")
    p.add_argument("--change", type=float, default=0.01)
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--repo-dir", default=str(PROJECT / "bench-out" / "repos"))
    p.add_argument("--scratch", default=str(PROJECT / "bench-out" / "scratch"))
    args = p.parse_args(argv)
    env = {**os.environ, **ENV}
    for k in ("PCHECKOUT_WORKERS", "PCHECKOUT_WRITER"):
        env.pop(k, None)
    rows = {"this tree": PROJECT / "src", "baseline": Path(args.baseline).resolve()}
    for src in rows.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    with destination(args.dest, scratch) as root:
        for files in (int(f) for f in args.files.split(",")):
            source = Path(args.repo_dir) / f"source-{files}-s1-c{args.change:g}"
            if not source.exists():
                spec = genrepo.RepoSpec(shape="source", files=files, seed=1, change=args.change)
                genrepo.generate(spec, source)
            print(table(source, root, rows, args.runs, env), flush=True)
            print(f"load average: {os.getloadavg()[0]:.1f}\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
