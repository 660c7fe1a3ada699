#!/usr/bin/env python3
"""How many writers a filesystem client serves at once: sshfs against latencyfs.

    python3 scripts/bench_fsclient.py [--ms 1.0] [--threads 1,4,8,16,32,64] [--files 1600]
        [--runs 3] [--sshfs-options max_conns=4]

N Python threads write ``--files`` small files (2,500 bytes, the source shape's median) the
way a checkout does: ``open(O_CREAT|O_EXCL)``, write, ``fstat``, close, each thread in its
own directory (so no directory lock is shared).  On a fresh mount each time, interleaved
over ``--runs`` rounds: sshfs (scripts/sshfsmount.py) at ``--ms`` of round trip, latencyfs
(scripts/latencyfs.py) at ``--ms`` per request.  Printed per thread count: the median files
per second on each, the requests the server counted per file, and, for sshfs, the most
threads its process had while the writers ran (its FUSE workers plus two) and the CPU the
SFTP side used (sshfs, the delay line, sftp-server: CPU seconds over the writers' wall time,
in CPUs), which tells a client that waits on the round trip from one short of CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import latencyfs  # noqa: E402
import sshfsmount  # noqa: E402

DATA = b"x" * 2500


def write_files(root: Path, threads: int, files: int) -> float:
    """The writers' wall time."""
    per = files // threads
    dirs = [root / f"t{i}" for i in range(threads)]
    for d in dirs:
        d.mkdir()

    def work(d: Path) -> None:
        for i in range(per):
            fd = os.open(d / f"f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, DATA)
            os.fstat(fd)
            os.close(fd)

    pool = [threading.Thread(target=work, args=(d,)) for d in dirs]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return time.perf_counter() - t0


def _sshfs_threads(stop: threading.Event, mnt: Path, out: list[int]) -> None:
    """The most threads of the sshfs process serving ``mnt``, sampled every 10 ms."""
    pid = None
    for p in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            if cmd[0].endswith(b"sshfs") and os.fsencode(str(mnt)) in cmd:
                pid = p
    while pid and not stop.wait(0.01):
        with contextlib.suppress(OSError):
            out.append(len(os.listdir(f"/proc/{pid}/task")))


def _sftp_side(mnt: Path, scratch: Path) -> list[str]:
    """The pids of sshfs serving ``mnt``, the delay line counting into ``scratch`` and its
    sftp-server children."""
    mine, line = [], []
    for p in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            if cmd[0].endswith(b"sshfs") and os.fsencode(str(mnt)) in cmd:
                mine.append(p)
            elif b"serve" in cmd and any(os.fsencode(str(scratch)) in c for c in cmd):
                line.append(p)
    for p in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            ppid = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1]
            if ppid in line:
                mine.append(p)
    return mine + line


def _cpu_s(pids: list[str]) -> float:
    """User and system CPU seconds the processes have used so far."""
    ticks = 0
    for p in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def one(
    kind: str, mount: Callable[[], contextlib.AbstractContextManager[Any]], n: int, a: Any
) -> dict[str, float]:
    scratch: Path = a.scratch
    stop, seen = threading.Event(), [0]
    with mount() as mnt:
        watch = threading.Thread(target=_sshfs_threads, args=(stop, mnt, seen))
        pids = _sftp_side(mnt, scratch) if kind == "sshfs" else []
        if kind == "sshfs":
            watch.start()
        before, cpu0 = _counted(kind, scratch), _cpu_s(pids)
        seconds = write_files(mnt, n, a.files)
        cpu = _cpu_s(pids) - cpu0
        stop.set()
        if kind == "sshfs":
            watch.join()
    requests = _counted(kind, scratch) - before
    shutil.rmtree(scratch / "backing", ignore_errors=True)
    files = (a.files // n) * n
    return {
        "files_s": files / seconds,
        "req_file": requests / files,
        "threads": max(seen),
        "sftp_cpus": cpu / seconds,
    }


def _counted(kind: str, scratch: Path) -> int:
    if kind == "sshfs":
        return sshfsmount.requests(sshfsmount.read_stats(scratch / "stats"))
    path = scratch / "lstats"
    return latencyfs.requests(latencyfs.read_stats(path)) if path.exists() else 0


def mounts(a: Any) -> dict[str, Callable[[], contextlib.AbstractContextManager[Any]]]:
    s: Path = a.scratch
    sshfs = lambda: sshfsmount.mounted(  # noqa: E731
        s / "backing", s / "m", rtt_ms=a.ms, options=a.sshfs_options, stats=s / "stats"
    )
    lfs = lambda: latencyfs.mounted(  # noqa: E731
        s / "backing", s / "m", latency_ms=a.ms, stats=s / "lstats"
    )
    return {"sshfs": sshfs, "latencyfs": lfs}


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    path = Path("/dev/shm") / f"pcheckout-fsclient-{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ms", type=float, default=1.0)
    ap.add_argument("--threads", default="1,4,8,16,32,64")
    ap.add_argument("--files", type=int, default=1600)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sshfs-options", default=None)
    a = ap.parse_args(argv)
    counts = [int(x) for x in a.threads.split(",")]
    print(f"load {os.getloadavg()[0]:.2f}; {a.ms} ms; sshfs options {a.sshfs_options or '-'}")
    got: dict[tuple[str, int], list[dict[str, float]]] = {}
    with scratch_dir() as a.scratch:
        kinds = mounts(a)
        for r in range(a.runs):
            for n in counts if r % 2 == 0 else counts[::-1]:
                for kind, mount in kinds.items():
                    got.setdefault((kind, n), []).append(one(kind, mount, n, a))
    head = "| writers | sshfs files/s | latencyfs files/s | sshfs requests/file | "
    print(head + "latencyfs requests/file | sshfs threads | SFTP side's CPUs |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in counts:
        s, lf = got[("sshfs", n)], got[("latencyfs", n)]

        def med(runs: list[dict[str, float]], key: str) -> float:
            return statistics.median(x[key] for x in runs)

        print(
            f"| {n} | {med(s, 'files_s'):.0f} | {med(lf, 'files_s'):.0f} | "
            f"{med(s, 'req_file'):.2f} | {med(lf, 'req_file'):.2f} | "
            f"{max(x['threads'] for x in s):.0f} | {med(s, 'sftp_cpus'):.2f} |"
        )
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
