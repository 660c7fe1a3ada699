"""pcheckout clone vs git clone onto the latency filesystem, side by side.

Rows, each run in every round (order rotated per round), every run into a new
directory on a fresh latencyfs mount (1 ms by default):

- ``git clone`` (git's default, ``checkout.workers=1``) and
  ``git -c checkout.workers=N clone`` for each N of ``--workers``;
- ``pcheckout clone`` with no flags;
- ``git clone --no-checkout`` and ``pcheckout clone --no-checkout``: the clone
  phase alone;
- with ``--stage-ab``: only pcheckout with and without staging the git dir
  (``PCHECKOUT_CLONE_STAGE=never``, see src/pcheckout/clone/stage.py), both phases
  and the clone phase alone, beside git's rows for the clone phase and the
  last ``--workers`` count.

Every command gets the source as a local path with ``--shared`` by default (no
pack is made or copied: the clone phase is git's own metadata work on the
mount), or ``--url file`` for a ``file://`` URL (git makes and indexes a pack).
Each run gets its own mount, removed (with its backing directory) after it, so
no timed run follows a deletion on the mount.  Prints a markdown table.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import benchlib

PROJECT = Path(__file__).resolve().parent.parent
ISOLATED_GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _latencyfs() -> ModuleType:
    path = Path(__file__).resolve().parent / "latencyfs.py"
    spec = importlib.util.spec_from_file_location("latencyfs", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["latencyfs"] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", type=Path, help="the source repository (bare or not)")
    ap.add_argument("--latency-ms", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", default="8,16,32", help="git checkout.workers rows")
    ap.add_argument(
        "--url",
        choices=("shared", "file"),
        default="shared",
        help="'shared': PATH with --shared; 'file': file://PATH",
    )
    ap.add_argument(
        "--stage-ab",
        action="store_true",
        help="pcheckout with and without staging (PCHECKOUT_CLONE_STAGE=never), git clone "
        "--no-checkout and the last --workers row only",
    )
    ap.add_argument(
        "--base",
        type=Path,
        default=Path("/dev/shm") if os.path.isdir("/dev/shm") else Path(tempfile.gettempdir()),
        help="where the backing dir goes",
    )
    args = ap.parse_args()

    import compileall

    compileall.compile_dir(str(PROJECT / "src" / "pcheckout"), quiet=1)
    lfs = _latencyfs()
    src = str(args.repo.resolve())
    source = ["--shared", src] if args.url == "shared" else ["file://" + src]
    env = {**os.environ, **ISOLATED_GIT_ENV, "PYTHONPATH": str(PROJECT / "src")}
    pc = [sys.executable, "-m", "pcheckout", "clone", "-q"]
    rows: dict[str, list[str]] = {"git clone": ["git", "clone", "-q"]}
    for n in args.workers.split(","):
        rows[f"git -c checkout.workers={n} clone"] = [
            "git",
            "-c",
            f"checkout.workers={n}",
            "clone",
            "-q",
        ]
    rows["pcheckout clone"] = pc
    rows["git clone --no-checkout"] = ["git", "clone", "-q", "--no-checkout"]
    rows["pcheckout clone --no-checkout"] = [*pc, "--no-checkout"]
    envs = {name: env for name in rows}
    if args.stage_ab:
        del rows["git clone"]
        for n in args.workers.split(",")[:-1]:
            del rows[f"git -c checkout.workers={n} clone"]
        no_stage = {**env, "PCHECKOUT_CLONE_STAGE": "never"}
        for name in ("pcheckout clone", "pcheckout clone --no-checkout"):
            rows[f"{name} (not staged)"] = rows[name]
            envs[f"{name} (not staged)"] = no_stage
    times: dict[str, list[float]] = {name: [] for name in rows}
    names = list(rows)
    print(f"load before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="bench-clone-", dir=args.base) as tmp:
        for r in range(args.runs):
            order = names[r % len(names) :] + names[: r % len(names)]
            for k, name in enumerate(order):
                # a fresh mount per run: the daemon keeps a descriptor per inode the
                # kernel remembers, and a few thousand-file trees exhaust them
                backing = Path(tmp) / f"backing-{r}-{k}"
                mnt = Path(tempfile.mkdtemp(prefix="bench-clone-mnt-"))
                with lfs.mounted(backing, mnt, latency_ms=args.latency_ms):
                    cmd = [*rows[name], *source, "w"]
                    t = benchlib.run_timed(cmd, envs.get(name, env), cwd=mnt)
                os.rmdir(mnt)
                benchlib.rmtree(backing)
                if t.returncode != 0:
                    print(f"{name} failed: {t.stderr_tail}", file=sys.stderr)
                    return 1
                times[name].append(t.seconds)
            print(f"round {r + 1}/{args.runs} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    med = {n: statistics.median(v) for n, v in times.items()}
    git_default = med.get("git clone", float("nan"))
    best_name = min((n for n in names if n.startswith("git -c")), key=lambda n: med[n])
    # (with --stage-ab the only git -c row is the given one)
    print(f"load after: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print(
        f"source: {args.url}, latency {args.latency_ms} ms, {args.runs} runs, "
        f"git {benchlib.git_version()}"
    )
    print()
    print("| row | median s | min s | max s | ÷ git clone | ÷ git best |")
    print("|---|---|---|---|---|---|")
    for n in names:
        v = times[n]
        print(
            f"| {n} | {med[n]:.3f} | {min(v):.3f} | {max(v):.3f} | "
            f"{med[n] / git_default:.3f} | {med[n] / med[best_name]:.3f} |"
        )
    print()
    print(f"git best: {best_name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
