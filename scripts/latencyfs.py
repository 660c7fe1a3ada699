#!/usr/bin/env python3
"""Build, mount and unmount latencyfs, the latency-injecting FUSE filesystem.

    python3 scripts/latencyfs.py mount BACKING_DIR MOUNTPOINT [--latency-ms 1.0]
        [--data-latency-ms X] [--max-inflight N] [--cache-seconds 3] [--stats FILE]
        [--casefold]
    python3 scripts/latencyfs.py umount MOUNTPOINT
    python3 scripts/latencyfs.py stats FILE
    python3 scripts/latencyfs.py build

``mount`` builds the binary when it is missing or older than its sources,
creates both directories, starts the daemon in the background and returns once
the mount answers requests.  It prints nothing on success; errors go to stderr
and the exit status is 1.  The same operations are importable: :func:`build`,
:func:`mount`, :func:`umount`, the context manager :func:`mounted` and
:func:`read_stats`.

See docs/latencyfs.md for what the filesystem imitates and how fast it is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

try:
    from pcheckout.errors import PcheckoutError
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from pcheckout.errors import PcheckoutError
from pcheckout.fs import mountinfo

SOURCE_DIR = Path(__file__).resolve().parent / "latencyfs"
BINARY = SOURCE_DIR / "latencyfs"
SOURCES = (SOURCE_DIR / "latencyfs.c", SOURCE_DIR / "Makefile")
FSTYPE = "fuse.latencyfs"

# How long to wait for a mount to appear or disappear.  Mounting takes a few
# milliseconds here; the first request can wait for the daemon's INIT.  Ten
# seconds is a generous guess that only matters when something is broken.
MOUNT_TIMEOUT_S = 10.0
# Poll interval while waiting; a guess, small against the timeout.
POLL_S = 0.005


class LatencyFsError(PcheckoutError):
    """latencyfs could not be built, mounted or unmounted."""


def _need_tools() -> None:
    missing = [t for t in ("make", "cc", "pkg-config", "fusermount3") if not shutil.which(t)]
    if missing:
        raise LatencyFsError(f"latencyfs needs {', '.join(missing)} on PATH")
    probe = subprocess.run(["pkg-config", "--exists", "fuse3"], capture_output=True, check=False)
    if probe.returncode != 0:
        raise LatencyFsError("latencyfs needs the libfuse3 headers (Debian: libfuse3-dev)")


def _stale() -> bool:
    if not BINARY.exists():
        return True
    built = BINARY.stat().st_mtime_ns
    return any(src.stat().st_mtime_ns > built for src in SOURCES)


def build() -> Path:
    """Build the daemon with make if it is missing or stale; return its path."""
    if not _stale():
        return BINARY
    _need_tools()
    done = subprocess.run(
        ["make", "-C", str(SOURCE_DIR), "--no-print-directory", "latencyfs"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise LatencyFsError(f"building latencyfs failed:\n{done.stdout}{done.stderr}".rstrip())
    return BINARY


def _fstype_at(mountpoint: str) -> str | None:
    """The fstype of the topmost mount at ``mountpoint`` (absolute), if any."""
    table = mountinfo.read()
    here = table.at(mountpoint)
    return table.topmost(here).fstype if here else None


def _abs(path: str | os.PathLike[str]) -> str:
    # Resolve the parent only: stat() on a dead FUSE mountpoint fails.
    p = os.path.abspath(os.fspath(path))
    return os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))


def is_mounted(mountpoint: str | os.PathLike[str]) -> bool:
    """Whether a latencyfs is mounted at ``mountpoint``."""
    return _fstype_at(_abs(mountpoint)) == FSTYPE


def _ms(name: str, value: float) -> str:
    if not math.isfinite(value) or value < 0:
        raise LatencyFsError(f"{name} must be a non-negative number, not {value!r}")
    return repr(float(value))


def _count(name: str, value: object, least: int = 1) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        what = "a positive integer" if least else "a count"
        raise LatencyFsError(f"{name} must be {what}, not {value!r}")
    return str(value)


class Options(NamedTuple):
    """How a mount behaves (the keywords of :func:`mount`; docs/latencyfs.md).

    ``latency_ms`` is charged to every metadata request, ``data_latency_ms``
    (default: the same) to every read and write; ``max_inflight`` is the
    server's slots (requests served at once; default: unlimited);
    ``cache_seconds`` is the kernel's entry/attribute timeout (0 = no caching).
    ``threads`` and ``max_background`` override the daemon's tuning.
    ``fault_errno`` (``"EIO"``, ``"ESTALE"``, ...) makes the requests named by
    ``fault_ops`` (``"create,write,flush,mkdir,symlink"``; default create) on
    names containing ``fault_match`` fail, ``fault_times`` times in all
    (default: always).  ``stats``: a file the daemon counts its requests in
    (:func:`read_stats`).  ``slots_name`` (``"/name"``): the ``max_inflight`` slots are a
    named semaphore shared by every mount given the same name (one server behind many
    client mounts; :func:`unlink_slots` removes it).  ``casefold``: names match ignoring
    (ASCII) case and keep the case they were created with, as on an SMB share, NTFS or APFS.
    """

    latency_ms: float = 1.0
    data_latency_ms: float | None = None
    max_inflight: int | None = None
    cache_seconds: float = 3.0
    threads: int | None = None
    max_background: int | None = None
    fault_errno: str | None = None
    fault_ops: str | None = None
    fault_match: str | None = None
    fault_times: int | None = None
    stats: str | os.PathLike[str] | None = None
    slots_name: str | None = None
    casefold: bool = False

    def argv(self) -> list[str]:
        """The daemon's options; LatencyFsError for a value it would refuse."""
        args = ["--latency-ms", _ms("latency_ms", self.latency_ms)]
        args += ["--cache-seconds", _ms("cache_seconds", self.cache_seconds)]
        if self.data_latency_ms is not None:
            args += ["--data-latency-ms", _ms("data_latency_ms", self.data_latency_ms)]
        for name in ("max_inflight", "threads", "max_background"):
            value = getattr(self, name)
            if value is not None:
                args += ["--" + name.replace("_", "-"), _count(name, value)]
        if self.fault_errno is not None:
            args += ["--fault-errno", self.fault_errno]
            if self.fault_ops is not None:
                args += ["--fault-ops", self.fault_ops]
            if self.fault_match is not None:
                args += ["--fault-match", self.fault_match]
            if self.fault_times is not None:
                args += ["--fault-times", _count("fault_times", self.fault_times, least=0)]
        if self.stats is not None:
            args += ["--stats", _abs(self.stats)]
        if self.slots_name is not None:
            if not self.slots_name.startswith("/") or "/" in self.slots_name[1:]:
                raise LatencyFsError(f"slots_name must be '/name', not {self.slots_name!r}")
            args += ["--slots-name", self.slots_name]
        if self.casefold:
            args.append("--casefold")
        return args


def unlink_slots(name: str) -> None:
    """Remove the named semaphore of ``slots_name`` (Linux keeps it in /dev/shm)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(f"/dev/shm/sem.{name.lstrip('/')}")


def mount(
    backing: str | os.PathLike[str], mountpoint: str | os.PathLike[str], **options: Any
) -> None:
    """Mount a latencyfs over ``backing`` at ``mountpoint``; return once it is live.

    ``options`` are :class:`Options`' fields (``latency_ms=0.5, max_inflight=16``, ...).
    """
    try:
        args = Options(**options).argv()
    except TypeError as exc:
        raise LatencyFsError(str(exc)) from exc
    if not Path("/dev/fuse").exists():
        raise LatencyFsError("/dev/fuse does not exist: FUSE is not available here")
    binary = build()
    backing_abs = _abs(backing)
    target = _abs(mountpoint)
    if _fstype_at(target) is not None:
        raise LatencyFsError(f"{target} is already a mount point")
    for directory in (backing_abs, target):
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise LatencyFsError(f"cannot create directory {directory}: {exc.strerror}") from exc

    # The daemon forks after the mount exists; the parent's exit status says
    # whether mounting worked, and its stderr says why not.
    done = subprocess.run(
        [str(binary), *args, backing_abs, target],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        raise LatencyFsError(f"mounting latencyfs at {target} failed: {detail}")

    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while _fstype_at(target) != FSTYPE:
        if time.monotonic() > deadline:
            raise LatencyFsError(f"latencyfs at {target} did not appear")
        time.sleep(POLL_S)
    try:
        os.statvfs(target)  # answered by the daemon: it is serving requests
    except OSError as exc:
        with contextlib.suppress(LatencyFsError):
            umount(target)
        raise LatencyFsError(f"latencyfs at {target} does not answer: {exc}") from exc


#: The first line of a stats file (``--stats``), and where its counters start.
STATS_MAGIC = b"latencyfs stats 1"
STATS_OFFSET = 4096


def read_stats(path: str | os.PathLike[str]) -> dict[str, int]:
    """The counters of a ``--stats`` file, by name: requests served per operation
    (``lookup``, ``create``, ``write_buf``, ...), ``slot_waits`` (requests that found
    every server slot taken), ``slot_wait_ns`` (their time waiting) and ``slot_busy_ns``
    (the time slots were held: latency, operation and reply).  Read while
    mounted or after; subtract two readings for what happened in between."""
    data = Path(path).read_bytes()
    names = data[:STATS_OFFSET].split(b"\0", 1)[0].decode().split()
    head = STATS_MAGIC.decode().split()
    if names[: len(head)] != head:
        raise LatencyFsError(f"{path} is not a latencyfs stats file")
    names = names[len(head) :]
    values = struct.unpack_from(f"={len(names)}Q", data, STATS_OFFSET)
    return dict(zip(names, values, strict=True))


def requests(stats: dict[str, int]) -> int:
    """The latency-bearing requests among ``stats`` (every counter but the slot waits)."""
    return sum(v for k, v in stats.items() if not k.startswith("slot_"))


def umount(mountpoint: str | os.PathLike[str]) -> None:
    """Unmount the latencyfs at ``mountpoint`` (lazily if busy); wait until gone.

    Does nothing when no latencyfs is mounted there.
    """
    target = _abs(mountpoint)
    if not is_mounted(target):
        return
    if not shutil.which("fusermount3"):
        raise LatencyFsError("fusermount3 is not on PATH")
    done = subprocess.run(
        ["fusermount3", "-u", target], capture_output=True, text=True, check=False
    )
    if done.returncode != 0 and is_mounted(target):
        # busy (an open file, a shell inside it): detach now, free later
        lazy = subprocess.run(
            ["fusermount3", "-u", "-z", target], capture_output=True, text=True, check=False
        )
        if lazy.returncode != 0 and is_mounted(target):
            raise LatencyFsError(
                f"unmounting {target} failed: {(lazy.stderr or done.stderr).strip()}"
            )
    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while is_mounted(target):
        if time.monotonic() > deadline:
            raise LatencyFsError(f"latencyfs at {target} is still mounted")
        time.sleep(POLL_S)


@contextlib.contextmanager
def mounted(
    backing: str | os.PathLike[str], mountpoint: str | os.PathLike[str], **options: Any
) -> Iterator[Path]:
    """Mount for the duration of a ``with`` block; yields the mount point."""
    mount(backing, mountpoint, **options)
    try:
        yield Path(_abs(mountpoint))
    finally:
        umount(mountpoint)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="latencyfs.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_mount = sub.add_parser("mount", help="build if needed, mount in the background")
    p_mount.add_argument("backing")
    p_mount.add_argument("mountpoint")
    p_mount.add_argument("--latency-ms", type=float, default=1.0)
    p_mount.add_argument("--data-latency-ms", type=float, default=None)
    p_mount.add_argument("--max-inflight", type=int, default=None)
    p_mount.add_argument("--cache-seconds", type=float, default=3.0)
    p_mount.add_argument("--threads", type=int, default=None, help=argparse.SUPPRESS)
    p_mount.add_argument("--max-background", type=int, default=None, help=argparse.SUPPRESS)
    p_mount.add_argument(
        "--fault-errno",
        default=None,
        help="answer this errno (EIO, ESTALE, ...) instead of serving requests",
    )
    p_mount.add_argument(
        "--fault-ops",
        default=None,
        help="requests that fail: create,mkdir,symlink,write,flush (create)",
    )
    p_mount.add_argument(
        "--fault-match", default=None, help="only names or backing paths containing this"
    )
    p_mount.add_argument(
        "--fault-times",
        type=int,
        default=None,
        help="fail this many requests in all (default: every one)",
    )
    p_mount.add_argument("--stats", default=None, help="count the requests served in this file")
    p_mount.add_argument(
        "--slots-name", default=None, help="share the --max-inflight slots with other mounts"
    )
    p_mount.add_argument(
        "--casefold", action="store_true", help="case-insensitive, case-preserving names"
    )
    p_stats = sub.add_parser("stats", help="print a --stats file's counters as JSON")
    p_stats.add_argument("file")
    p_umount = sub.add_parser("umount", help="unmount and wait until gone")
    p_umount.add_argument("mountpoint")
    sub.add_parser("build", help="build the daemon only")
    ns = parser.parse_args(argv)
    try:
        if ns.cmd == "build":
            build()
        elif ns.cmd == "umount":
            umount(ns.mountpoint)
        elif ns.cmd == "stats":
            print(json.dumps(read_stats(ns.file), indent=1))
        else:
            options = {name: getattr(ns, name) for name in Options._fields}
            mount(ns.backing, ns.mountpoint, **options)
    except OSError as exc:
        print(f"latencyfs: error: {exc}", file=sys.stderr)
        return 1
    except LatencyFsError as exc:
        print(f"latencyfs: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
