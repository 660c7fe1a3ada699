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

Usage::

    python3 scripts/bench_dirfloor.py --latency-ms 1 --files 1200 --threads 1,32
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latencyfs  # noqa: E402


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency-ms", type=float, default=1.0)
    ap.add_argument("--cache-seconds", type=float, default=3.0)
    ap.add_argument("--files", type=int, default=1200)
    ap.add_argument("--threads", default="1,32", help="comma list")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="pcheckout-dirfloor-", dir="/dev/shm"))
    try:
        for threads in (int(x) for x in a.threads.split(",")):
            times = []
            for run in range(a.runs):
                backing, mnt = base / f"b{threads}-{run}", base / f"m{threads}-{run}"
                backing.mkdir()
                mnt.mkdir()
                with latencyfs.mounted(
                    backing, mnt, latency_ms=a.latency_ms, cache_seconds=a.cache_seconds
                ):
                    (mnt / "d").mkdir()
                    times.append(create_all(mnt / "d", a.files, threads))
                shutil.rmtree(backing)
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
