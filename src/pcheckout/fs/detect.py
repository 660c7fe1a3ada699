"""Which filesystem holds a path, and what kind of storage is behind it.

Linux: the mount is found by mount id (``open(O_PATH)`` + ``/proc/self/fdinfo/<fd>`` ``mnt_id``,
Linux >= 3.15), falling back to the longest mount-point prefix; fstype, source and options come
from ``/proc/self/mountinfo``; ``statfs(2)`` ``f_type`` (through ctypes) is a cross-check and the
fallback when no table is readable; block-backed filesystems are followed through
``/sys/dev/block`` to their leaf disks to read ``queue/rotational``.

Elsewhere: :func:`psutil.disk_partitions` with ``all=True`` (its ``opts`` carry macOS ``local``
and Windows ``remote``).

Detection never triggers an automount (``stat``/``lstat`` and ``O_PATH`` opens do not; no
``O_DIRECTORY``, no trailing slash) and never hangs: every call on the path itself runs in a
daemon thread given ``timeout`` seconds.  A call stuck in the kernel on a dead hard-mounted NFS
server cannot be cancelled; the thread is abandoned (it does not keep the process alive) and the
result is classified from the mount table alone, which the notes say.

Spec and sources: the team's research notes ``fs-detection.md`` (sections cited as §n below).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import stat
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar

from pcheckout.errors import DetectError
from pcheckout.fs import mountinfo as mi

if TYPE_CHECKING:
    import rich.console

Kind = Literal["nfs", "smb", "network", "fuse", "tmpfs", "ssd", "hdd", "virtual", "overlay", "unknown"]

SYS_ROOT = "/sys"
PROC_FDINFO = "/proc/self/fdinfo"

#: Default seconds allowed for the calls on the path that can block on a dead network server.
#: A guess: local probes take well under a millisecond; NFS ``timeo`` defaults are 60 s, so
#: anything slower than a couple of seconds is a server that is not answering.
DEFAULT_TIMEOUT = 2.0

#: How deep to follow sysfs stacks (partition -> dm -> md -> loop -> backing fs ...).  Real stacks
#: are 3-4 deep; the limit only stops cycles in a corrupt or fake tree.
_MAX_DEVICE_DEPTH = 8

#: Overlay upper layers may themselves be overlays; stop recursing after this many levels.
_MAX_OVERLAY_DEPTH = 4

# --- statfs f_type magic numbers (research §2.1, from linux/magic.h, coreutils stat.c, ---------
# --- systemd missing_magic.h, Open MPI / ROMIO) -------------------------------------------------
F_TYPE_NAMES: dict[int, str] = {
    0x6969: "nfs",  # NFS_SUPER_MAGIC, same for v2/3/4
    0xFF534D42: "cifs",  # CIFS_SUPER_MAGIC (SMB1 / cifs_queryfs)
    0xFE534D42: "smb3",  # SMB2_SUPER_MAGIC (SMB2/3 / smb2_queryfs)
    0x517B: "smbfs",  # SMB_SUPER_MAGIC (old smbfs)
    0x00C36400: "ceph",
    0x65735546: "fuse",  # all fuse.*, fuseblk, virtiofs
    0x0BD00BD0: "lustre",
    0x47504653: "gpfs",
    0x19830326: "beegfs",  # a.k.a. fhgfs
    0x01021997: "9p",
    0xEF53: "ext4",  # ext2/3/4 share it
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0x2FC12FC1: "zfs",
    0xCA451A4E: "bcachefs",
    0xF2F52010: "f2fs",
    0x01021994: "tmpfs",
    0x858458F6: "ramfs",
    0x794C7630: "overlay",
    0x73717368: "squashfs",
    0xE0F5E1E2: "erofs",
    0x5346544E: "ntfs",
    0x7366746E: "ntfs3",
    0x4D44: "vfat",
    0x2011BAB0: "exfat",
    0x6B414653: "afs",  # kAFS
    0x5346414F: "afs",  # OpenAFS
    0x73757245: "coda",
    0x7461636F: "ocfs2",
    0x01161970: "gfs2",
    0x20030528: "orangefs",  # Open MPI / ROMIO value
    0x20030529: "orangefs",  # systemd's ORANGEFS_DEVREQ_MAGIC (research notes the discrepancy)
    0xAAD7AAEA: "panfs",
    0x0187: "autofs",
    0x9FA0: "proc",
    0x62656572: "sysfs",
    0x1CD1: "devpts",
    0x27E0EB: "cgroup",
    0x63677270: "cgroup2",
}

# --- fstype families ---------------------------------------------------------------------------
_NFS = frozenset({"nfs", "nfs4"})
_SMB = frozenset({"cifs", "smb3", "smb2", "smbfs", "smb"})
#: Other network/cluster filesystems: systemd fstype_is_network, gnulib's remote list, coreutils'
#: remote magics (research §5), plus FUSE clients of remote stores (sshfs, glusterfs, ...).
_NETWORK = frozenset(
    {
        "ceph", "ceph-fuse", "lustre", "gpfs", "beegfs", "fhgfs", "glusterfs", "9p", "afs",
        "openafs", "auristorfs", "coda", "ocfs2", "gfs", "gfs2", "orangefs", "pvfs2", "panfs",
        "ncp", "ncpfs", "davfs", "sshfs", "rclone", "s3fs", "gcsfuse", "juicefs", "virtiofs",
        "moosefs", "mfs", "lizardfs", "cvmfs", "snfs", "vxfs", "ibrix", "acfs",
    }
)  # fmt: skip
_TMPFS = frozenset({"tmpfs", "ramfs", "hugetlbfs", "devtmpfs"})
#: Filesystems that live on a block device (so the disk's media decides).
_BLOCK = frozenset(
    {
        "ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "bcachefs", "vfat", "msdos", "exfat",
        "ntfs", "ntfs3", "jfs", "reiserfs", "nilfs2", "hfsplus", "udf", "iso9660", "squashfs",
        "erofs", "zfs",
    }
)  # fmt: skip
#: Kernel API filesystems: never a checkout target.
_PSEUDO = frozenset(
    {
        "proc", "sysfs", "cgroup", "cgroup2", "devpts", "debugfs", "tracefs", "securityfs",
        "pstore", "bpf", "mqueue", "configfs", "fusectl", "binfmt_misc", "efivarfs",
        "selinuxfs", "nsfs", "rpc_pipefs", "nfsd",
    }
)  # fmt: skip
#: Disk name prefixes whose rotational flag says nothing about the media (research §4.1).
_VIRTUAL_DISK_PREFIXES = ("vd", "xvd", "nbd", "rbd")

#: Options that shape parallel-write throughput (research §3, nfs(5)); they go into the
#: per-mount cache key.  Addresses, ports, uuids and the like are left out on purpose.
_KEY_OPTIONS = frozenset(
    {
        "vers", "nfsvers", "minorversion", "proto", "nconnect", "max_connect", "rsize", "wsize",
        "sync", "async", "dirsync", "noac", "actimeo", "acregmin", "acregmax", "acdirmin",
        "acdirmax", "lookupcache", "cto", "nocto", "hard", "soft", "softerr", "local_lock",
        "write", "cache", "wsync", "nowsync", "upperdir", "ro",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Device:
    """A leaf block device behind a filesystem."""

    name: str  # "vda", "sda", "nvme0n1", "loop0", ...
    rotational: bool | None
    virtual: bool  # virtio/xen/nbd/rbd/... : rotational flag unreliable


@dataclass(frozen=True)
class FsInfo:
    path: str  # absolute path asked about
    probed_path: str  # nearest existing ancestor actually examined
    mount_point: str
    mount_id: int | None
    fstype: str  # e.g. "nfs4", "fuse.sshfs", "ext4"
    source: str
    options: dict[str, str | None] = field(hash=False)  # per-mount and super options merged
    kind: Kind
    upper_kind: Kind | None  # overlay: the kind of the upper layer's filesystem
    nfs_version: str | None  # "3", "4.0", "4.1", "4.2"
    f_type: int | None
    devices: tuple[Device, ...]
    latency_bound: bool | None
    notes: tuple[str, ...]  # human sentences: why, and how sure

    @property
    def mount_key(self) -> str:
        """Stable identity of the mount for a per-mount cache.

        fstype, source and the options that shape write throughput; never the mount id (reused
        after umount) nor addresses/ports/uuids that change between otherwise identical mounts.
        """
        opts = sorted(
            (k, v) for k, v in self.options.items() if k in _KEY_OPTIONS
        )
        return json.dumps(
            [self.fstype, self.source, [f"{k}={v}" if v is not None else k for k, v in opts]],
            separators=(",", ":"),
        )

    def to_json(self) -> dict[str, object]:
        """The stable ``detect --json`` object (documented in docs/json.md)."""
        return {
            "path": self.path,
            "probed_path": self.probed_path,
            "mount_point": self.mount_point,
            "mount_id": self.mount_id,
            "fstype": self.fstype,
            "source": self.source,
            "options": dict(self.options),
            "kind": self.kind,
            "upper_kind": self.upper_kind,
            "nfs_version": self.nfs_version,
            "f_type": self.f_type,
            "f_type_hex": None if self.f_type is None else f"0x{self.f_type:x}",
            "devices": [
                {"name": d.name, "rotational": d.rotational, "virtual": d.virtual}
                for d in self.devices
            ],
            "latency_bound": self.latency_bound,
            "mount_key": self.mount_key,
            "notes": list(self.notes),
        }


# --- time-limited calls ------------------------------------------------------------------------

T = TypeVar("T")


class _Timeout(Exception):
    pass


def call_with_timeout(fn: Callable[[], T], timeout: float) -> T:
    """Run ``fn`` in a daemon thread; raise ``TimeoutError`` if it has not returned in time.

    A thread blocked in the kernel (statfs on a dead hard NFS mount) cannot be interrupted; it is
    left behind as a daemon thread and does not keep the interpreter alive.
    """
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="pcheckout-detect", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"no answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


# --- statfs through ctypes ---------------------------------------------------------------------


class _Statfs(ctypes.Structure):
    # glibc struct statfs on LP64 Linux (x86_64, aarch64): research §2.2, checked with gcc here
    # (sizeof 120, f_type@0, f_fsid@56).  Only used where sizeof(long) == 8.
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


def statfs_f_type(path: str) -> int | None:
    """``statfs(path).f_type`` masked to 32 bits; ``None`` where the call is not available."""
    global _libc
    if not sys.platform.startswith("linux") or ctypes.sizeof(ctypes.c_long) != 8:
        return None
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    buf = _Statfs()
    if _libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(buf.f_type) & 0xFFFFFFFF


# --- mount id ----------------------------------------------------------------------------------


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
    """``path`` itself if it exists (``lstat``, no automount), else its nearest existing ancestor."""
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


# --- block devices through sysfs ---------------------------------------------------------------


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _is_virtual_disk(name: str, real: str) -> bool:
    if name.startswith(_VIRTUAL_DISK_PREFIXES):
        return True
    # virtio-scsi / virtio-blk / Xen devices show their bus in the sysfs device path.
    return any(part.startswith(("virtio", "xen", "vbd-")) for part in real.split("/"))


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
        Device(name=name, rotational=_rotational(block_dir), virtual=_is_virtual_disk(name, real)),
    )


def _devices_from_source(source: str, sys_root: str) -> tuple[Device, ...]:
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


def _devices_by_name(source: str) -> tuple[Device, ...]:
    """For a table from elsewhere: what the source's name alone tells (nothing is read)."""
    if not source.startswith("/dev/"):
        return ()
    name = os.path.basename(source)
    if name.startswith(_VIRTUAL_DISK_PREFIXES):
        return (Device(name=name, rotational=None, virtual=True),)
    return ()


# --- classification ----------------------------------------------------------------------------


def _family(fstype: str) -> str:
    """``fuse.sshfs`` -> ``sshfs``, ``fuse.glusterfs`` -> ``glusterfs``; others unchanged."""
    base, _, sub = fstype.partition(".")
    if base in ("fuse", "fuseblk") and sub:
        return sub
    return fstype


def nfs_version(fstype: str, options: Mapping[str, str | None]) -> str | None:
    """``vers=`` (or ``nfsvers=``) first: the kernel prints ``vers=4.N`` for v4 (research §3)."""
    if _family(fstype) not in _NFS:
        return None
    vers = options.get("vers") or options.get("nfsvers")
    if vers:
        if vers == "4" and options.get("minorversion"):
            return f"4.{options['minorversion']}"
        return vers
    return "4" if fstype == "nfs4" else None


def _latency_bound(kind: Kind, upper: Kind | None) -> bool | None:
    if kind in ("nfs", "smb", "network", "fuse"):
        return True
    if kind in ("tmpfs", "ssd", "hdd", "virtual"):
        # A block device's latency is paid at writeback, not per create: creating files on a
        # local filesystem is CPU work (measured on a virtio disk, see policy.py).
        return False
    if kind == "overlay" and upper is not None:
        return _latency_bound(upper, None)  # writes land in the upper layer
    return None


@dataclass(frozen=True)
class _Classified:
    kind: Kind
    devices: tuple[Device, ...]
    notes: tuple[str, ...]


def _classify_block(fstype: str, source: str, devices: tuple[Device, ...], looked: bool) -> _Classified:
    if _family(fstype) == "zfs":
        return _Classified(
            "virtual",
            devices,
            (f"zfs dataset {source!r}: the pool's disks are not resolved (needs zpool); "
             "treated as a virtual disk.",),
        )
    if not devices:
        why = (
            "the block device could not be resolved through /sys"
            if looked
            else "the block device was not examined (mount table from elsewhere)"
        )
        return _Classified(
            "unknown" if not looked else "virtual",
            devices,
            (f"{fstype} on {source or 'an unnamed device'}: {why}"
             + ("; treated as a virtual disk." if looked else "."),),
        )
    names = ", ".join(d.name for d in devices)
    if any(d.rotational and not d.virtual for d in devices):
        return _Classified("hdd", devices, (f"{fstype} on {names}: rotational disk.",))
    if any(d.virtual for d in devices):
        flags = ", ".join(f"{d.name} rotational={_flag(d.rotational)}" for d in devices)
        return _Classified(
            "virtual",
            devices,
            (f"{fstype} on a virtual disk ({flags}); a virtual disk's rotational flag says "
             "nothing about the media behind it.",),
        )
    if all(d.rotational is False for d in devices):
        return _Classified("ssd", devices, (f"{fstype} on {names}: non-rotational disk.",))
    return _Classified("unknown", devices, (f"{fstype} on {names}: media type not reported.",))


def _flag(value: bool | None) -> str:
    return "?" if value is None else str(int(value))


def classify_fstype(fstype: str) -> Kind | None:
    """The kind that the fstype alone decides; ``None`` for block-backed and unknown types."""
    fam = _family(fstype)
    if fam in _NFS:
        return "nfs"
    if fam in _SMB:
        return "smb"
    if fam in _NETWORK:
        return "network"
    if fstype.startswith(("fuse.", "fuseblk")) or fstype == "fuse":
        return "fuse"
    if fam in _TMPFS:
        return "tmpfs"
    if fam == "overlay":
        return "overlay"
    return None


# --- detection ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Probe:
    probed_path: str
    mount_id: int | None
    f_type: int | None
    f_type_error: str | None


def _probe(path: str) -> _Probe:
    probed = nearest_existing(path)
    try:
        mnt_id = mount_id_of(probed)
    except OSError:
        mnt_id = None
    try:
        f_type, err = statfs_f_type(probed), None
    except OSError as exc:
        f_type, err = None, exc.strerror
    return _Probe(probed, mnt_id, f_type, err)


def detect(
    path: str | os.PathLike[str],
    *,
    mountinfo: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> FsInfo:
    """Describe the filesystem that holds (or would hold) ``path``.

    ``mountinfo=None``: this machine (``/proc/self/mountinfo`` + statfs + sysfs, or psutil off
    Linux).  ``mountinfo=FILE``: classify from a table captured elsewhere, by longest prefix on
    the path string; nothing local about the path is examined.
    """
    abspath = os.path.abspath(os.fspath(path))
    if mountinfo is not None:
        table = mi.read(mountinfo)
        return _from_table(abspath, table, os.fspath(mountinfo))
    if os.path.exists(mi.PROC_SELF_MOUNTINFO):
        return _detect_linux(abspath, timeout, 0)
    return _detect_psutil(abspath)


def _from_table(path: str, table: mi.MountTable, origin: str, depth: int = 0) -> FsInfo:
    entry = table.find_by_prefix(path)
    if entry is None:
        raise DetectError(f"no mount in {origin} holds {path}")
    notes = [
        f"Classified from the mount table {origin} by longest mount-point prefix; "
        "the path, its disks and statfs were not examined on this machine.",
    ]
    upper: Kind | None = None
    base = classify_fstype(entry.fstype)
    if base is None and _family(entry.fstype) in _BLOCK:
        c = _classify_block(entry.fstype, entry.source, _devices_by_name(entry.source), False)
        kind, devices = c.kind, c.devices
        notes += c.notes
        if devices and devices[0].virtual:
            notes.append(f"{devices[0].name} is a virtual disk by its name.")
    else:
        kind, devices = (base or "unknown"), ()
        notes += _fstype_notes(entry)
    if kind == "overlay":
        upper, more = _overlay_upper_from_table(entry, table, origin, depth)
        notes += more
    return _build(path, path, entry, entry.mount_id, kind, upper, None, devices, notes)


def _overlay_upper_from_table(
    entry: mi.MountEntry, table: mi.MountTable, origin: str, depth: int
) -> tuple[Kind | None, list[str]]:
    upperdir = entry.options.get("upperdir")
    if not upperdir:
        return None, ["overlay without an upper layer (read-only); writes will fail."]
    if depth >= _MAX_OVERLAY_DEPTH:
        return None, ["overlay upper layers nest too deep; upper kind not determined."]
    upper = _from_table(upperdir, table, origin, depth + 1)
    return upper.kind, [f"Writes go to the upper layer {upperdir}, which is {upper.kind}."]


def _fstype_notes(entry: mi.MountEntry) -> list[str]:
    fam = _family(entry.fstype)
    kind = classify_fstype(entry.fstype)
    if kind == "nfs":
        opts = entry.options
        ver = nfs_version(entry.fstype, opts)
        out = [f"NFS {ver or '(version not shown)'} from {entry.source}."]
        if opts.get("vers") is None and opts.get("nfsvers") is None:
            out.append("No vers= option in the table; the NFS version is a guess.")
        tuning = [
            f"{k}={v}" if v is not None else k
            for k, v in opts.items()
            if k in ("nconnect", "max_connect", "rsize", "wsize", "proto", "lookupcache",
                     "actimeo", "sync", "noac", "nocto", "soft", "hard")
        ]  # fmt: skip
        if tuning:
            out.append("Options that matter for parallel writes: " + ", ".join(tuning) + ".")
        if "sync" in opts or "noac" in opts:
            out.append("sync/noac make every write synchronous: more writers in flight help.")
        return out
    if kind == "smb":
        dialect = entry.options.get("vers")
        return [f"SMB/CIFS share {entry.source}" + (f", dialect {dialect}." if dialect else ".")]
    if kind == "network":
        if fam == "virtiofs":
            return ["virtiofs is a host directory shared into this VM over the FUSE protocol; "
                    "treated as a network filesystem (an inference)."]
        return [f"{entry.fstype} is a network or cluster filesystem ({entry.source})."]
    if kind == "fuse":
        if entry.fstype.startswith("fuseblk"):
            return [f"{entry.fstype} is a FUSE daemon over a block device ({entry.source}); "
                    "the daemon, not the disk, sets the pace."]
        return [f"{entry.fstype} is served by a FUSE daemon ({entry.source or 'no source'}); "
                "every call crosses to user space."]
    if kind == "tmpfs":
        return [f"{entry.fstype} keeps files in RAM: writing is CPU-bound."]
    if kind == "overlay":
        return ["overlay: reads may come from lower layers, writes go to the upper layer."]
    if fam == "autofs":
        return ["An automount point that has not been mounted; detection does not trigger "
                "automounts, so the filesystem that would appear here is unknown."]
    if fam in _PSEUDO:
        return [f"{entry.fstype} is a kernel pseudo-filesystem, not a place for a checkout."]
    return [f"{entry.fstype} is not a filesystem type pcheckout knows."]


def _build(
    path: str,
    probed: str,
    entry: mi.MountEntry,
    mount_id: int | None,
    kind: Kind,
    upper: Kind | None,
    f_type: int | None,
    devices: tuple[Device, ...],
    notes: list[str],
) -> FsInfo:
    return FsInfo(
        path=path,
        probed_path=probed,
        mount_point=entry.mount_point,
        mount_id=mount_id,
        fstype=entry.fstype,
        source=entry.source,
        options=entry.options,
        kind=kind,
        upper_kind=upper,
        nfs_version=nfs_version(entry.fstype, entry.options),
        f_type=f_type,
        devices=devices,
        latency_bound=_latency_bound(kind, upper),
        notes=tuple(notes),
    )


def _detect_linux(path: str, timeout: float, depth: int) -> FsInfo:
    table = mi.read()
    notes: list[str] = []
    try:
        probe = call_with_timeout(lambda: _probe(path), timeout)
    except TimeoutError:
        probe = None
        notes.append(
            f"Looking at {path} did not answer within {timeout:g} s (a network server that is "
            "down?); classified from the mount table by path prefix only. The stuck call was "
            "left in a background thread."
        )
    except OSError as exc:
        probe = None
        notes.append(f"Looking at {path} failed ({exc.strerror or exc}); classified from the "
                     "mount table by path prefix only.")
    entry: mi.MountEntry | None = None
    mount_id: int | None = None
    probed = path
    f_type: int | None = None
    if probe is not None:
        probed = probe.probed_path
        if probed != path:
            notes.append(f"{path} does not exist yet; judged by its nearest existing "
                         f"ancestor {probed}.")
        f_type = probe.f_type
        if probe.mount_id is not None:
            entry = table.by_id(probe.mount_id)
            if entry is not None:
                mount_id = entry.mount_id
                notes.append(f"Mount found by mount id {mount_id} (exact).")
    if entry is None:
        real = probed
        if probe is not None:
            try:
                real = call_with_timeout(lambda: os.path.realpath(probed), timeout)
            except (TimeoutError, OSError):
                real = probed
        entry = table.find_by_prefix(real)
        if entry is None:
            if f_type is not None:
                return _from_f_type(path, probed, f_type, notes)
            raise DetectError(f"cannot tell which filesystem holds {path}: no mount matches")
        mount_id = entry.mount_id
        notes.append("Mount found by longest mount-point prefix (mount id unavailable); "
                     "a bind mount of a file or an unusual namespace could mislead this.")
    if f_type is not None:
        magic_name = F_TYPE_NAMES.get(f_type)
        notes.extend(_cross_check(entry.fstype, f_type, magic_name))
    elif probe is not None and probe.f_type_error:
        notes.append(f"statfs failed ({probe.f_type_error}); no f_type cross-check.")

    upper: Kind | None = None
    devices: tuple[Device, ...] = ()
    base = classify_fstype(entry.fstype)
    if base is None and _family(entry.fstype) in _BLOCK:
        devices = resolve_devices(entry.major, entry.minor)
        if not devices:
            devices = _devices_from_source(entry.source, SYS_ROOT)
            if devices:
                notes.append(f"mountinfo shows an anonymous device {entry.major}:{entry.minor} "
                             f"(usual for btrfs); resolved through the source {entry.source}.")
        c = _classify_block(entry.fstype, entry.source, devices, True)
        kind: Kind = c.kind
        notes += c.notes
    else:
        kind = base or "unknown"
        notes += _fstype_notes(entry)
        if entry.fstype.startswith("fuseblk"):
            devices = resolve_devices(entry.major, entry.minor) or _devices_from_source(
                entry.source, SYS_ROOT
            )
    if kind == "overlay":
        upperdir = entry.options.get("upperdir")
        if not upperdir:
            notes.append("overlay without an upper layer (read-only); writes will fail.")
        elif depth >= _MAX_OVERLAY_DEPTH:
            notes.append("overlay upper layers nest too deep; upper kind not determined.")
        else:
            up = _detect_linux(upperdir, timeout, depth + 1)
            upper = up.kind
            devices = up.devices
            notes.append(f"Writes go to the upper layer {upperdir}: {up.fstype} on "
                         f"{up.mount_point}, which is {up.kind}.")
    return _build(path, probed, entry, mount_id, kind, upper, f_type, devices, notes)


def _cross_check(fstype: str, f_type: int, magic_name: str | None) -> list[str]:
    if magic_name is None:
        return [f"statfs f_type 0x{f_type:x} is not in pcheckout's table."]
    by_magic = classify_fstype(magic_name)
    by_type = classify_fstype(fstype)
    if by_magic == by_type or (by_magic is None and by_type is None):
        return []
    if by_type == "network" and by_magic == "fuse":
        return []  # fuse.sshfs & co.: the magic cannot name the daemon
    return [f"statfs says {magic_name} (f_type 0x{f_type:x}) but the mount table says "
            f"{fstype}; the mount table was used."]


def _from_f_type(path: str, probed: str, f_type: int, notes: list[str]) -> FsInfo:
    name = F_TYPE_NAMES.get(f_type, f"0x{f_type:x}")
    kind = classify_fstype(name) or ("virtual" if name in _BLOCK else "unknown")
    notes = [*notes, f"No mount table entry matched; classified from statfs f_type alone "
             f"({name}), which cannot tell NFS versions or FUSE daemons apart."]
    return FsInfo(
        path=path, probed_path=probed, mount_point="", mount_id=None, fstype=name, source="",
        options={}, kind=kind, upper_kind=None, nfs_version=None, f_type=f_type, devices=(),
        latency_bound=_latency_bound(kind, None), notes=tuple(notes),
    )  # fmt: skip


def _detect_psutil(path: str) -> FsInfo:
    """Off Linux: psutil's partition list; macOS marks local mounts ``local``, Windows ``remote``."""
    import psutil

    parts = psutil.disk_partitions(all=True)
    norm = os.path.normcase(path)
    best = None
    for p in parts:
        mp = os.path.normcase(p.mountpoint)
        inside = norm == mp or norm.startswith(mp.rstrip("\\/") + os.sep) or mp in ("/", os.sep)
        if inside and (best is None or len(mp) > len(os.path.normcase(best.mountpoint))):
            best = p
    if best is None:
        raise DetectError(f"cannot tell which filesystem holds {path}: no partition matches")
    opts = mi.parse_options(best.opts)
    fstype = best.fstype.lower()
    kind = classify_fstype(fstype)
    notes = ["No /proc/self/mountinfo here; classified from psutil.disk_partitions(all=True)."]
    if kind is None:
        if fstype in ("macfuse", "osxfuse", "osxfusefs", "fusefs"):
            kind = "fuse"
        elif fstype in ("smbfs", "afpfs", "webdav"):
            kind = "smb" if fstype == "smbfs" else "network"
        elif "remote" in opts or (sys.platform == "darwin" and "local" not in opts):
            kind = "network"
            notes.append("The system marks this mount as not local.")
        else:
            kind = "unknown"
            notes.append("A local disk; its media (SSD or HDD) is not determined on this OS.")
    return FsInfo(
        path=path, probed_path=path, mount_point=best.mountpoint, mount_id=None, fstype=fstype,
        source=best.device, options=opts, kind=kind, upper_kind=None,
        nfs_version=nfs_version(fstype, opts), f_type=None, devices=(),
        latency_bound=_latency_bound(kind, None), notes=tuple(notes),
    )  # fmt: skip


# --- rendering ---------------------------------------------------------------------------------


def _rows(info: FsInfo) -> list[tuple[str, str]]:
    kind = info.kind + (f" (upper layer: {info.upper_kind})" if info.upper_kind else "")
    devices = ", ".join(
        f"{d.name} (rotational={_flag(d.rotational)}{', virtual' if d.virtual else ''})"
        for d in info.devices
    )
    opts = ",".join(k if v is None else f"{k}={v}" for k, v in info.options.items())
    rows = [
        ("path", info.path),
        ("examined", info.probed_path),
        ("mount point", info.mount_point),
        ("filesystem", info.fstype),
        ("source", info.source),
        ("kind", kind),
        ("latency-bound", {True: "yes", False: "no", None: "unknown"}[info.latency_bound]),
    ]
    if info.nfs_version:
        rows.append(("NFS version", info.nfs_version))
    if info.f_type is not None:
        rows.append(("statfs f_type", f"0x{info.f_type:x}"))
    if devices:
        rows.append(("devices", devices))
    rows.append(("options", opts))
    return rows


def render(console: rich.console.Console, info: FsInfo) -> None:
    """``pcheckout detect``: a rich table on a terminal, plain ``key: value`` lines otherwise."""
    if not console.is_terminal:
        for key, value in _rows(info):
            console.print(f"{key}: {value}", markup=False, highlight=False, soft_wrap=True)
        for note in info.notes:
            console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in _rows(info):
        table.add_row(key, Text(value))
    console.print(table)
    for note in info.notes:
        console.print(Text("• " + note, style="dim"))
