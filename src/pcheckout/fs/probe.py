"""Live probes of a path and its disks: statfs, the mount id, sysfs, each safe to call.

Nothing here triggers an automount (``lstat`` and ``O_PATH`` opens do not; no ``O_DIRECTORY``,
no trailing slash).  A call on the path itself can block forever on a dead hard-mounted NFS
server, so :mod:`pcheckout.fs.detect` runs :func:`probe_path` through :func:`call_with_timeout`.
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
import threading
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

from pcheckout.fs.kinds import Device, is_virtual_disk

SYS_ROOT = "/sys"
PROC_FDINFO = "/proc/self/fdinfo"

#: How deep to follow sysfs stacks (partition -> dm -> md -> loop -> backing fs ...).  Real stacks
#: are 3-4 deep; the limit only stops cycles in a corrupt or fake tree.
_MAX_DEVICE_DEPTH = 8

T = TypeVar("T")


# --- time-limited calls ------------------------------------------------------------------------


class _Outcome(Generic[T]):
    """What the thread of :func:`call_with_timeout` hands back: a value or an exception."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: tuple[T] | None = None  # a 1-tuple, so that a returned None is a result
        self.error: BaseException | None = None


def call_with_timeout(fn: Callable[[], T], timeout: float) -> T:
    """Run ``fn`` in a daemon thread; raise ``TimeoutError`` if it has not returned in time.

    A thread blocked in the kernel (statfs on a dead hard NFS mount) cannot be interrupted; it is
    left behind as a daemon thread and does not keep the interpreter alive.
    """
    outcome: _Outcome[T] = _Outcome()

    def run() -> None:
        try:
            outcome.result = (fn(),)
        except BaseException as exc:  # re-raised in the caller
            outcome.error = exc
        finally:
            outcome.done.set()

    threading.Thread(target=run, name="pcheckout-detect", daemon=True).start()
    if not outcome.done.wait(timeout):
        raise TimeoutError(f"no answer within {timeout:g} s")
    if outcome.error is not None:
        raise outcome.error
    assert outcome.result is not None  # run() sets one of the two before it sets done
    return outcome.result[0]


# --- statfs through ctypes ---------------------------------------------------------------------


class _Statfs(ctypes.Structure):
    # glibc struct statfs on LP64 Linux (x86_64, aarch64), bits/statfs.h; checked with gcc on the
    # dev VM (x86_64): sizeof 120, f_type@0, f_fsid@56.  Only used where sizeof(long) == 8.
    _fields_ = [
        ("f_type", ctypes.c_long),
        ("f_bsize", ctypes.c_long),
        ("f_blocks", ctypes.c_ulong),
        ("f_bfree", ctypes.c_ulong),
        ("f_bavail", ctypes.c_ulong),
        ("f_files", ctypes.c_ulong),
        ("f_ffree", ctypes.c_ulong),
        ("f_fsid", ctypes.c_int * 2),
        ("f_namelen", ctypes.c_long),
        ("f_frsize", ctypes.c_long),
        ("f_flags", ctypes.c_long),
        ("f_spare", ctypes.c_long * 4),
    ]


_libc: ctypes.CDLL | None = None


def _load_libc() -> ctypes.CDLL:
    """The C library already loaded into this process.

    ``CDLL(None)`` is ``dlopen(NULL)``: the interpreter's own symbols, libc's among them, with no
    file to find.  ``ctypes.util.find_library("c")`` runs ``ldconfig -p``, a process per run
    (docs/filesystems.md, step 4), so it is only the fallback for an interpreter that does not
    export ``statfs``.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if hasattr(libc, "statfs"):
        return libc
    # Imported here: ctypes.util is needed only on this fallback.
    from ctypes.util import find_library

    return ctypes.CDLL(find_library("c"), use_errno=True)


def statfs_f_type(path: str) -> int | None:
    """``statfs(path).f_type`` masked to 32 bits; ``None`` where the call is not available."""
    global _libc
    if not sys.platform.startswith("linux") or ctypes.sizeof(ctypes.c_long) != 8:
        return None
    if _libc is None:
        _libc = _load_libc()
    buf = _Statfs()
    if _libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(buf.f_type) & 0xFFFFFFFF


# --- the path: nearest existing ancestor, mount id ---------------------------------------------


def mount_id_of(path: str, fdinfo_dir: str = PROC_FDINFO) -> int | None:
    """The mount id of ``path`` via an ``O_PATH`` descriptor and ``/proc/self/fdinfo``.

    ``O_PATH`` without ``O_DIRECTORY`` does not trigger an automount of the last component.
    ``None`` when ``O_PATH`` or fdinfo ``mnt_id`` (Linux >= 3.15) are missing.
    """
    o_path = getattr(os, "O_PATH", None)
    if o_path is None:
        return None
    fd = os.open(path, o_path | os.O_CLOEXEC)
    try:
        with open(os.path.join(fdinfo_dir, str(fd)), "rb") as f:
            for line in f:
                if line.startswith(b"mnt_id:"):
                    return int(line.split(b":", 1)[1])
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def nearest_existing(path: str) -> str:
    """``path`` itself if it exists (``lstat``, no automount), else its nearest existing
    ancestor."""
    probe = path
    while True:
        try:
            os.lstat(probe)
            return probe
        except OSError:  # ENOENT, ENOTDIR, EACCES on a component, ELOOP ...: go up
            parent = os.path.dirname(probe)
            if parent == probe:
                return probe
            probe = parent


class PathProbe(NamedTuple):
    """What the system says about a path: where it was examined, its mount id, its f_type."""

    probed_path: str  # the path itself or its nearest existing ancestor
    mount_id: int | None
    f_type: int | None
    f_type_error: str | None  # why statfs failed, when it did


def probe_path(path: str) -> PathProbe:
    """Examine ``path`` (or its nearest existing ancestor); may block on a dead server."""
    probed = nearest_existing(path)
    try:
        mnt_id = mount_id_of(probed)
    except OSError:
        mnt_id = None
    try:
        f_type, err = statfs_f_type(probed), None
    except OSError as exc:
        f_type, err = None, exc.strerror
    return PathProbe(probed, mnt_id, f_type, err)


# --- block devices through sysfs ---------------------------------------------------------------


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _rotational(block_dir: str) -> bool | None:
    value = _read_text(os.path.join(block_dir, "queue", "rotational"))
    if value == "1":
        return True
    if value == "0":
        return False
    return None


def resolve_devices(
    major: int, minor: int, *, sys_root: str = SYS_ROOT, _depth: int = 0
) -> tuple[Device, ...]:
    """Leaf disks behind ``major:minor``: partition -> disk, dm/md -> slaves, loop -> backing.

    Empty when the number is not a block device sysfs knows (``0:N`` anonymous devices).
    """
    if major == 0 or _depth > _MAX_DEVICE_DEPTH:
        return ()
    link = os.path.join(sys_root, "dev", "block", f"{major}:{minor}")
    if not os.path.exists(link):
        return ()
    return _leaves(os.path.realpath(link), sys_root, _depth)


def _leaves(block_dir: str, sys_root: str, depth: int) -> tuple[Device, ...]:
    if depth > _MAX_DEVICE_DEPTH:
        return ()
    name = os.path.basename(block_dir)
    if os.path.exists(os.path.join(block_dir, "partition")):
        # ../../block/sda/sda1 -> sda (util-linux lib/sysfs.c)
        return _leaves(os.path.dirname(block_dir), sys_root, depth + 1)
    slaves_dir = os.path.join(block_dir, "slaves")
    try:
        slaves = sorted(os.listdir(slaves_dir))
    except OSError:
        slaves = []
    if slaves:  # dm (LVM, crypt, dm partitions), md RAID
        found: list[Device] = []
        for slave in slaves:
            target = os.path.realpath(os.path.join(slaves_dir, slave))
            for dev in _leaves(target, sys_root, depth + 1):
                if dev not in found:
                    found.append(dev)
        if found:
            return tuple(found)
    backing = _read_text(os.path.join(block_dir, "loop", "backing_file"))
    if backing:
        # A loop device is as fast as the filesystem holding its backing file.
        try:
            st = os.stat(backing.removesuffix(" (deleted)"))
            below = resolve_devices(
                os.major(st.st_dev), os.minor(st.st_dev), sys_root=sys_root, _depth=depth + 1
            )
        except OSError:
            below = ()
        if below:
            return below
        # Backing file on tmpfs/network/unknown: the loop flag is all we have, and unreliable.
        return (Device(name=name, rotational=_rotational(block_dir), virtual=True),)
    real = os.path.realpath(block_dir)
    return (
        Device(name=name, rotational=_rotational(block_dir), virtual=is_virtual_disk(name, real)),
    )


def devices_from_source(source: str, sys_root: str = SYS_ROOT) -> tuple[Device, ...]:
    """btrfs & co. report an anonymous ``0:N`` in mountinfo; the source ``/dev/...`` is real."""
    if not source.startswith("/dev/"):
        return ()
    try:
        st = os.stat(source)
    except OSError:
        return ()
    if not stat.S_ISBLK(st.st_mode):
        return ()
    return resolve_devices(os.major(st.st_rdev), os.minor(st.st_rdev), sys_root=sys_root)
