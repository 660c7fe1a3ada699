#!/usr/bin/env python3
"""Blobless and sparse checkouts: pcheckout against git, interleaved, medians.

Every run starts from a fresh ``git clone --filter=blob:none --no-checkout file://SERVER W``
made outside the timer in the destination's backing directory (the server is a bare copy
of ``--repo`` on local disk with ``uploadpack.allowFilter``), optionally followed by
``git sparse-checkout set --cone DIRS`` (which, in a no-checkout clone, writes only the
config and the pattern file). On ``fuseMS`` destinations a fresh latency mount
(scripts/latencyfs.py) is made over the backing directory for every run and the timed
command runs through it: the client on the mount, the server on local disk. Timed: the
checkout command alone (``pcheckout checkout -C W`` or
``git -C W -c checkout.workers=N checkout -q -f HEAD``), fetch included; checked after:
``git status --porcelain`` is empty. Rows run round-robin, the start row rotating.

    python3 scripts/bench_monorepo.py --repo bench-out/repos/source-2000-s1.git \\
        --dest fuse1 --git-workers 1,32 --runs 5
    python3 scripts/bench_monorepo.py --repo ... --dest fuse1 --sparse DIR,DIR --runs 5
    python3 scripts/bench_monorepo.py --repo ... --dest fuse1 --no-filter --sparse DIR,DIR \\
        --same-pack --runs 7

``--same-pack`` (with ``--sparse``) is the fair comparison for the sparse cone: every row
also runs, interleaved, as a full (not sparse) checkout of a second server whose HEAD is a
commit on top of ``--repo``'s HEAD keeping only what the cone writes (the top-level files
and the cone's directories).  Both repositories hold the same objects (the clone's pack
has every blob of the full tree), and both checkouts write the same files with the same
blobs: what differs is only the sparse checkout itself (the patterns, the 5x longer tree
listing, the skip-worktree index entries).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import benchlib  # noqa: E402
import latencyfs  # noqa: E402
from bench import bench_env, compile_bytecode, pcheckout_cmd  # noqa: E402

#: Suffix of the rows run on the cone-only commit (``--same-pack``).
SAME_PACK = " (same pack, cone-only tree)"


def _git(*args: str, cwd: Path | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


def make_server(repo: Path, where: Path) -> Path:
    server = where / "server.git"
    _git("clone", "-q", "--bare", "--no-local", str(repo), str(server))
    _git("-C", str(server), "config", "uploadpack.allowFilter", "true")
    _git("-C", str(server), "config", "uploadpack.allowAnySHA1InWant", "true")
    return server


def cone_only_server(full: Path, where: Path, cone: list[str]) -> Path:
    """A copy of the server ``full`` whose HEAD is a new commit on top of its HEAD keeping
    exactly the entries git's own ``sparse-checkout set --cone`` checkout of ``cone``
    writes (asked of git in a scratch clone)."""
    scratch = where / "cone-scratch"
    _git("clone", "-q", "--no-checkout", f"file://{full}", str(scratch))
    _git("-C", str(scratch), "sparse-checkout", "set", "--cone", *cone)
    _git("-C", str(scratch), "checkout", "-q", "-f", "HEAD")
    tags = _git("-C", str(scratch), "ls-files", "-t", "-z").split(b"\0")
    drop = [t[2:] for t in tags if t.startswith(b"S ")]
    shutil.rmtree(scratch)
    server = where / "cone-only.git"
    _git("clone", "-q", "--bare", "--no-local", str(full), str(server))
    env = {**os.environ, "GIT_INDEX_FILE": str(where / "cone-only.index")}
    subprocess.run(["git", "-C", str(server), "read-tree", "HEAD"], env=env, check=True)
    (where / "empty").mkdir()  # update-index wants a work tree; it reads nothing from it
    subprocess.run(["git", f"--git-dir={server}", f"--work-tree={where / 'empty'}",
                    "update-index", "--force-remove", "-z", "--stdin"],
                   input=b"\0".join(drop) + b"\0", env=env, check=True)  # fmt: skip
    tree = subprocess.run(["git", "-C", str(server), "write-tree"], env=env, check=True,
                          capture_output=True).stdout.strip().decode()  # fmt: skip
    commit = _git("-C", str(server), "-c", "user.name=bench", "-c", "user.email=bench@example",
                  "commit-tree", tree, "-p", "HEAD", "-m", "keep the cone only")  # fmt: skip
    branch = _git("-C", str(server), "symbolic-ref", "HEAD").strip().decode()
    _git("-C", str(server), "update-ref", branch, commit.strip().decode())
    _git("-C", str(server), "repack", "-a", "-d", "-q")
    return server


def prepare(server: Path, backing: Path, sparse: list[str], blobless: bool = True) -> Path:
    work = backing / "w"
    flt = ["--filter=blob:none"] if blobless else []
    _git("clone", "-q", *flt, "--no-checkout", f"file://{server}", str(work))
    if sparse:
        _git("-C", str(work), "sparse-checkout", "set", "--cone", *sparse)
    return work


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", type=Path, required=True, help="bare repository served")
    p.add_argument("--dest", default="tmpfs", help="tmpfs or fuseMS (e.g. fuse1)")
    p.add_argument("--git-workers", default="1,32", help="checkout.workers values for git rows")
    p.add_argument("--pcheckout-workers", default="", help="extra pcheckout --workers rows")
    p.add_argument("--pcheckout-rows", default="",
                   help="extra pcheckout rows: argument strings separated by ';' "
                        "(e.g. '--writer pcheckout')")  # fmt: skip
    p.add_argument("--sparse", default="", help="cone directories, comma-separated")
    p.add_argument("--same-pack", action="store_true",
                   help="with --sparse: every row also as a full checkout of a commit keeping "
                        "only the cone (same objects), interleaved")  # fmt: skip
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--no-filter", action="store_true", help="full clones instead of blobless")
    p.add_argument("--server-dir", type=Path, default=Path("/var/tmp"),
                   help="local disk for the server copy")  # fmt: skip
    p.add_argument("--out", type=Path, help="JSON with every run")
    args = p.parse_args()
    sparse = [d for d in args.sparse.split(",") if d]
    env = bench_env()
    compile_bytecode()
    rows: list[tuple[str, list[str]]] = [("pcheckout auto", [*pcheckout_cmd(), "checkout", "-q"])]
    for n in [x for x in args.pcheckout_workers.split(",") if x]:
        rows.append((f"pcheckout --workers {n}", [*pcheckout_cmd(), "checkout", "-q", "-j", n]))
    for extra in [x.split() for x in args.pcheckout_rows.split(";") if x.strip()]:
        rows.append((f"pcheckout {' '.join(extra)}", [*pcheckout_cmd(), "checkout", "-q", *extra]))
    for n in [x for x in args.git_workers.split(",") if x]:
        rows.append((f"git checkout.workers={n}", ["git", "-c", f"checkout.workers={n}",
                                                   "checkout", "-q", "-f", "HEAD"]))  # fmt: skip
    if args.same_pack and not sparse:
        p.error("--same-pack needs --sparse")
    cases = [("", sparse)] + ([(SAME_PACK, [])] if args.same_pack else [])
    cells = [(name + case, cmd, case, cone) for case, cone in cases for name, cmd in rows]
    latency = float(args.dest[4:]) if args.dest.startswith("fuse") else None
    base = Path(tempfile.mkdtemp(prefix="pcheckout-mono-", dir="/dev/shm"))
    server_base = Path(tempfile.mkdtemp(prefix="pcheckout-mono-server-", dir=args.server_dir))
    results: dict[str, list[float]] = {name: [] for name, *_ in cells}
    counts: dict[str, str] = {}
    try:
        servers = {"": make_server(args.repo, server_base)}
        if args.same_pack:
            servers[SAME_PACK] = cone_only_server(servers[""], server_base, sparse)
        for r in range(args.runs):
            order = cells[r % len(cells) :] + cells[: r % len(cells)]
            for name, cmd, case, cone in order:
                backing = base / "backing"
                mnt = base / "mnt"
                benchlib.rmtree(backing)
                backing.mkdir()
                prepare(servers[case], backing, cone, blobless=not args.no_filter)
                if latency is not None:
                    latencyfs.mount(backing, mnt, latency_ms=latency)
                    work = mnt / "w"
                else:
                    work = backing / "w"
                try:
                    if name.startswith("git"):
                        full = ["git", "-C", str(work), *cmd[1:]]
                    else:
                        full = [*cmd, "-C", str(work)]
                    t = benchlib.run_timed(full, env)
                    if t.returncode != 0:
                        print(f"{name}: failed: {t.stderr_tail}", file=sys.stderr)
                        continue
                    status = _git("-C", str(work), "status", "--porcelain")
                    if status:
                        print(f"{name}: status not clean: {status[:200]!r}", file=sys.stderr)
                        continue
                    files = _git("-C", str(work), "ls-files", "-t").decode().splitlines()
                    counts[name] = (
                        f"{sum(1 for f in files if f.startswith('H '))} written, "
                        f"{sum(1 for f in files if f.startswith('S '))} skip"
                    )
                    results[name].append(t.seconds)
                    print(f"round {r + 1} {name}: {t.seconds:.3f} s", file=sys.stderr)
                finally:
                    if latency is not None:
                        latencyfs.umount(mnt)
    finally:
        benchlib.rmtree(base)
        shutil.rmtree(server_base, ignore_errors=True)
    kind = "full clone" if args.no_filter else "blobless"
    for case, cone in cases:
        names = [name + case for name, _ in rows]
        git_rows = [n for n in names if n.startswith("git") and results[n]]
        best = min(git_rows, key=lambda n: statistics.median(results[n])) if git_rows else None
        what = (
            f", sparse cone {' '.join(cone)}" if cone
            else f", full checkout of a commit keeping only the cone {' '.join(sparse)}"
            if case else ""
        )  # fmt: skip
        print(f"\n*{args.dest}, {args.repo.name}, {kind}{what}; {args.runs} runs*\n")
        print(f"| row | median s | min s | max s | ÷ {best or 'git'} | files |")
        print("|---|---:|---:|---:|---:|---|")
        for name in names:
            secs = results[name]
            if not secs:
                print(f"| {name} | failed | | | | |")
                continue
            med = statistics.median(secs)
            ratio = med / statistics.median(results[best]) if best else float("nan")
            print(
                f"| {name} | {med:.3f} | {min(secs):.3f} | {max(secs):.3f} | {ratio:.3f} | "
                f"{counts.get(name, '')} |"
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"argv": sys.argv, "dest": args.dest, "runs": results,
                                        "machine": benchlib.machine_facts(),
                                        "git": benchlib.git_version()}, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
