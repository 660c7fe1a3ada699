"""Git LFS checkouts: git (default and checkout.workers=N), git lfs pull, pcheckout.

Builds an LFS tree (about half the files in LFS, 5-50 KiB, and a few of several MiB) and the
same bytes committed as plain files, both packed, under --work (tmpfs by default); then for
each destination (tmpfs, and a latencyfs mount at --latency-ms over a directory of --work),
times fresh checkouts of a --no-checkout clone, the rows interleaved round after round
(medians of --runs):

* ``present``: the LFS objects copied into the clone's store first;
* ``missing``: the objects behind the clone's ``file://`` remote (git-lfs's standalone file
  transfer), with ``git lfs pull`` after a no-checkout clone as git-lfs's own way;
* ``plain``: the same tree without LFS.

Run it alone on the CPUs (``/work/wt/bin/cpu-exclusive`` here); prints one line per row and
writes JSON (--out).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import benchlib

PROJECT = Path(__file__).resolve().parent.parent
LFS_CONFIG = {
    "filter.lfs.process": "git-lfs filter-process",
    "filter.lfs.smudge": "git-lfs smudge -- %f",
    "filter.lfs.clean": "git-lfs clean -- %f",
    "filter.lfs.required": "true",
}


def _latencyfs() -> ModuleType:
    path = Path(__file__).resolve().parent / "latencyfs.py"
    spec = importlib.util.spec_from_file_location("latencyfs", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["latencyfs"] = mod
    spec.loader.exec_module(mod)
    return mod


def _git(env: dict[str, str], cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _files(n: int, big: int, seed: int) -> dict[str, tuple[bytes, bool]]:
    """path -> (bytes, in LFS): half the files LFS (5-50 KiB), ``big`` of several MiB."""
    rnd = random.Random(seed)
    out: dict[str, tuple[bytes, bool]] = {}
    for i in range(n):
        d = f"d{i % 40:02d}/s{i % 7}"
        if i % 2:
            out[f"{d}/asset{i:05d}.bin"] = (rnd.randbytes(rnd.randint(5, 50) * 1024), True)
        else:
            out[f"{d}/code{i:05d}.txt"] = (b"line %d\n" % i * rnd.randint(10, 300), False)
    for k in range(big):
        out[f"media/big{k}.bin"] = (rnd.randbytes((2 + k) * 1024 * 1024), True)
    return out


def _make(env: dict[str, str], repo: Path, files: dict[str, tuple[bytes, bool]], lfs: bool) -> None:
    _git(env, repo.parent, "init", "-q", "-b", "main", repo.name)
    if lfs:
        for k, v in LFS_CONFIG.items():
            _git(env, repo, "config", k, v)
        (repo / ".gitattributes").write_bytes(b"*.bin filter=lfs diff=lfs merge=lfs -text\n")
    for path, (data, _in_lfs) in files.items():
        full = repo / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
    _git(env, repo, "add", "-A")
    _git(env, repo, "commit", "-q", "-m", "tree")
    _git(env, repo, "gc", "-q")


def _clone(env: dict[str, str], src: Path, dest: Path, lfs: bool, objects: bool) -> None:
    benchlib.rmtree(dest)
    _git(env, dest.parent, "clone", "-q", "--no-checkout", src.as_uri(), str(dest))
    if lfs:
        for k, v in LFS_CONFIG.items():
            _git(env, dest, "config", k, v)
    if lfs and objects:
        shutil.copytree(src / ".git/lfs/objects", dest / ".git/lfs/objects")


def _rows(
    workers: list[int], lfs: bool, missing: bool, baseline: str | None = None
) -> dict[str, list[str]]:
    """Row name -> the command run in the clone."""
    py = sys.executable
    rows = {"git default": ["git", "checkout", "-q", "-f", "main"]}
    for n in workers:
        rows[f"git workers={n}"] = [
            "git",
            "-c",
            f"checkout.workers={n}",
            "checkout",
            "-q",
            "-f",
            "main",
        ]
    if lfs and missing:
        rows["git lfs pull"] = [
            "sh",
            "-c",
            "GIT_LFS_SKIP_SMUDGE=1 git checkout -q -f main && git lfs pull",
        ]
        # not a checkout: git-lfs's transfer alone, into the store on the destination
        rows["git lfs fetch"] = ["git", "lfs", "fetch", "origin", "main"]
    rows["pcheckout"] = [py, "-m", "pcheckout", "checkout", "-q"]
    if baseline is not None:  # another tree's pcheckout (its src directory), same command
        rows["pcheckout baseline"] = ["env", f"PYTHONPATH={baseline}", *rows["pcheckout"]]
    return rows


def _case(
    env: dict[str, str], src: Path, dest: Path, case: str, args: argparse.Namespace
) -> dict[str, float]:
    """Each row's median over ``args.runs`` rounds, the rows interleaved within a round."""
    lfs, missing = case != "plain", case == "missing"
    workers = [int(w) for w in args.workers.split(",") if w]
    rows = _rows(workers, lfs, missing, args.baseline)
    if args.rows:
        keep = args.rows.split(",")
        rows = {k: v for k, v in rows.items() if k in keep}
    times: dict[str, list[float]] = {row: [] for row in rows}
    for _ in range(args.runs):
        for row, cmd in rows.items():
            _clone(env, src, dest, lfs, objects=not missing)
            subprocess.run(["sync"], check=False)
            t = benchlib.run_timed(cmd, env, cwd=dest)
            if t.returncode != 0:
                raise SystemExit(f"{row} failed: {t.stderr_tail}")
            times[row].append(t.seconds)
    out: dict[str, float] = {}
    for row, ts in times.items():
        out[row] = statistics.median(ts)
        spread = f"{min(ts):.3f}-{max(ts):.3f}"
        print(f"{args.where:8} {case:8} {row:18} {out[row]:8.3f} s  ({spread})", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/dev/shm/pcheckout-bench-lfs"))
    ap.add_argument("--files", type=int, default=1200)
    ap.add_argument("--big", type=int, default=3, help="LFS files of several MiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", default="8,32", help="git checkout.workers rows")
    ap.add_argument("--latency-ms", type=float, default=1.0)
    ap.add_argument("--dests", default="tmpfs,latencyfs")
    ap.add_argument("--cases", default="present,missing,plain")
    ap.add_argument("--baseline", help="also time the pcheckout of this src directory")
    ap.add_argument("--rows", default="", help="only these rows (e.g. 'git workers=32,pcheckout')")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    for who in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{who}_NAME"], env[f"GIT_{who}_EMAIL"] = "bench", "bench@example.com"
    env["PYTHONPATH"] = str(PROJECT / "src")
    benchlib.rmtree(args.work)
    args.work.mkdir(parents=True)
    files = _files(args.files, args.big, seed=1)
    _make(env, args.work / "lfs-src", files, lfs=True)
    _make(env, args.work / "plain-src", files, lfs=False)
    results: dict[str, object] = {
        "machine": benchlib.machine_facts(),
        "args": vars(args) | {"work": str(args.work), "out": str(args.out)},
    }
    for where in args.dests.split(","):
        args.where = where
        base = args.work / "dest"
        mnt = args.work / "mnt"
        lfs_mod = None
        if where == "latencyfs":
            lfs_mod = _latencyfs()
            lfs_mod.mount(base, mnt, latency_ms=args.latency_ms)
        top = mnt if lfs_mod is not None else base
        top.mkdir(parents=True, exist_ok=True)
        try:
            for case in args.cases.split(","):
                src = args.work / ("plain-src" if case == "plain" else "lfs-src")
                results[f"{where}/{case}"] = _case(env, src, top / "clone", case, args)
        finally:
            if lfs_mod is not None:
                lfs_mod.umount(mnt)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
