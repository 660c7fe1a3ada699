#!/usr/bin/env python3
"""The directory-lock floor of a checkout on the latency filesystem.

Creating a file holds its parent directory's lock (the VFS ``i_rwsem``) for the whole
create, and on a FUSE or NFS mount a create is a round trip: the creates in one directory
run one at a time whatever the number of writers.  A tree whose largest directory holds N
files cannot be written faster than N creates in a row.  This measures that floor
directly: N empty files created in one directory by T threads (``open(O_CREAT|O_EXCL)`` +
``close``, what a checkout's create costs before any data), on a fresh mount per run,
median of ``--runs``.  Compare it with a checkout of a tree whose largest directory has N
files (``scripts/bench.py --shape bigdir``).

With ``--tree DIR`` (a checked-out work tree, e.g. the source repository ``genrepo.py``
made) it measures the floor of that whole tree instead: every file of DIR, its bytes read
into memory first, written as a checkout writes it (``open(O_CREAT|O_EXCL)``, ``write``,
``fstat``, ``close``; directories made on demand): the largest directory's files by
``--threads`` threads from the first moment, every other file by ``--other-threads``
threads over contiguous shares.  No git, no index: what remains of a checkout's time above
it is the checkout's own, not the mount's or the kernel's (on this rig the FUSE server
shares the client's CPUs, so the rest of the tree slows the largest directory's creates).

Usage::

    python3 scripts/bench_dirfloor.py --latency-ms 1 --files 1200 --threads 1,32
    python3 scripts/bench_dirfloor.py --latency-ms 1 --tree SRC --threads 64 --other-threads 16,32
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latencyfs  # noqa: E402

T = TypeVar("T")


def create_all(directory: Path, files: int, threads: int) -> float:
    """Seconds to create ``files`` empty files in ``directory`` with ``threads`` threads."""
    names = [os.fsencode(directory / f"f{i:06d}") for i in range(files)]
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    shares = [names[k::threads] for k in range(threads)]

    def work(share: list[bytes]) -> None:
        for name in share:
            os.close(os.open(name, flags, 0o666))

    pool = [threading.Thread(target=work, args=(s,)) for s in shares]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - t0


def read_tree(root: Path) -> list[tuple[bytes, bytes, int]]:
    """(relative path, bytes, permission) of every file under ``root`` but ``.git``."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_symlink():
                continue
            rel = os.fsencode(p.relative_to(root))
            perm = 0o777 if os.access(p, os.X_OK) else 0o666
            out.append((rel, p.read_bytes(), perm))
    return out


def write_tree(
    dest: Path, tree: list[tuple[bytes, bytes, int]], big_threads: int, other_threads: int
) -> tuple[float, float]:
    """Write ``tree`` under ``dest``: (seconds for all, seconds for the largest directory)."""
    parent = [rel.rpartition(b"/")[0] for rel, _, _ in tree]
    sizes: dict[bytes, int] = {}
    for p in parent:
        sizes[p] = sizes.get(p, 0) + 1
    big = max(sizes, key=sizes.__getitem__)
    bigs = [f for f, p in zip(tree, parent, strict=True) if p == big]
    rest = [f for f, p in zip(tree, parent, strict=True) if p != big]
    root = os.fsencode(dest)
    made: set[bytes] = set()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    ends: dict[str, float] = {}

    def write(share: list[tuple[bytes, bytes, int]], kind: str) -> None:
        for rel, data, perm in share:
            d = rel.rpartition(b"/")[0]
            if d and d not in made:
                os.makedirs(root + b"/" + d, exist_ok=True)
                made.add(d)
            fd = os.open(root + b"/" + rel, flags, perm)
            try:
                os.write(fd, data)
                os.fstat(fd)
            finally:
                os.close(fd)
        ends[kind] = max(ends.get(kind, 0.0), time.perf_counter())

    n, k = len(rest), other_threads
    shares = [(bigs[j::big_threads], "big") for j in range(big_threads)]
    shares += [(rest[n * j // k : n * (j + 1) // k], "rest") for j in range(k)]
    pool = [threading.Thread(target=write, args=share) for share in shares]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - t0, ends["big"] - t0


def on_fresh_mount(a: argparse.Namespace, base: Path, name: str, run: Callable[[Path], T]) -> T:
    """``run(directory)`` on a new, empty latency mount (removed after)."""
    backing, mnt = base / f"b{name}", base / f"m{name}"
    backing.mkdir()
    mnt.mkdir()
    try:
        with latencyfs.mounted(
            backing, mnt, latency_ms=a.latency_ms, cache_seconds=a.cache_seconds
        ):
            (mnt / "d").mkdir()
            return run(mnt / "d")
    finally:
        shutil.rmtree(backing)


def tree_floor(a: argparse.Namespace, base: Path) -> None:
    tree = read_tree(a.tree)
    for threads in (int(x) for x in a.threads.split(",")):
        for others in (int(x) for x in a.other_threads.split(",")):
            times, bigs = [], []
            for run in range(a.runs):
                t, b = on_fresh_mount(
                    a,
                    base,
                    f"{threads}-{others}-{run}",
                    lambda d: write_tree(d, tree, threads, others),  # noqa: B023 (run at once)
                )
                times.append(t)
                bigs.append(b)
            med = statistics.median(times)
            print(
                f"{len(tree)} files of {a.tree.name}, largest directory by {threads} threads, "
                f"the rest by {others}, {a.latency_ms:g} ms: median {med:.3f} s "
                f"(largest directory done at {statistics.median(bigs):.3f} s; runs "
                f"{', '.join(f'{t:.3f}' for t in times)})",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency-ms", type=float, default=1.0)
    ap.add_argument("--cache-seconds", type=float, default=3.0)
    ap.add_argument("--files", type=int, default=1200)
    ap.add_argument("--threads", default="1,32", help="comma list")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tree", type=Path, help="a work tree: measure its whole floor")
    ap.add_argument("--other-threads", default="32", help="comma list (with --tree)")
    a = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="pcheckout-dirfloor-", dir="/dev/shm"))
    try:
        if a.tree is not None:
            tree_floor(a, base)
            return 0
        for threads in (int(x) for x in a.threads.split(",")):
            times = [
                on_fresh_mount(
                    a,
                    base,
                    f"{threads}-{run}",
                    lambda d: create_all(d, a.files, threads),  # noqa: B023 (run at once)
                )
                for run in range(a.runs)
            ]
            med = statistics.median(times)
            print(
                f"{a.files} creates in one directory, {threads} threads, "
                f"{a.latency_ms:g} ms: median {med:.3f} s ({1e3 * med / a.files:.2f} ms "
                f"per create; runs {', '.join(f'{t:.3f}' for t in times)})",
                flush=True,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
