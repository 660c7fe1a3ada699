"""What a filesystem type, a statfs magic number or a set of disks says about parallel writes.

Pure tables and functions: nothing here reads the system.  :mod:`pcheckout.fs.probe` gathers
the facts, :mod:`pcheckout.fs.detect` puts them together; the kinds, their evidence and the
worker counts they lead to are tabled in ``docs/filesystems.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple

#: What a filesystem is, for writing a checkout (the rows of docs/filesystems.md).
Kind = Literal[
    "nfs", "smb", "network", "fuse", "tmpfs", "ssd", "hdd", "virtual", "overlay", "unknown"
]

# --- statfs f_type magic numbers: linux/magic.h, coreutils stat.c, systemd missing_magic.h, ---
# --- Open MPI / ROMIO ---------------------------------------------------------------------------
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
    0x20030529: "orangefs",  # systemd's ORANGEFS_DEVREQ_MAGIC (the two sources disagree)
    0xAAD7AAEA: "panfs",
    0x0187: "autofs",
    0x9FA0: "proc",
    0x62656572: "sysfs",
    0x1CD1: "devpts",
    0x27E0EB: "cgroup",
    0x63677270: "cgroup2",
}

# --- fstype families ---------------------------------------------------------------------------


def _names(table: str) -> frozenset[str]:
    """The names of a table written as words (one long list stays readable)."""
    return frozenset(table.split())


_NFS = frozenset({"nfs", "nfs4"})
_SMB = frozenset({"cifs", "smb3", "smb2", "smbfs", "smb"})
#: Other network/cluster filesystems: systemd fstype_is_network, gnulib's remote list, coreutils'
#: remote magics, plus FUSE clients of remote stores (sshfs, glusterfs, ...).
_NETWORK = _names(
    """
        ceph ceph-fuse lustre gpfs beegfs fhgfs glusterfs 9p afs openafs auristorfs coda
        ocfs2 gfs gfs2 orangefs pvfs2 panfs ncp ncpfs davfs sshfs rclone s3fs gcsfuse
        juicefs virtiofs moosefs mfs lizardfs cvmfs snfs vxfs ibrix acfs
    """
)
_TMPFS = frozenset({"tmpfs", "ramfs", "hugetlbfs", "devtmpfs"})
#: Filesystems that live on a block device (so the disk's media decides).
_BLOCK = _names(
    """
        ext2 ext3 ext4 xfs btrfs f2fs bcachefs vfat msdos exfat ntfs ntfs3 jfs reiserfs
        nilfs2 hfsplus udf iso9660 squashfs erofs zfs
    """
)
#: Kernel API filesystems: never a checkout target.
_PSEUDO = _names(
    """
        proc sysfs cgroup cgroup2 devpts debugfs tracefs securityfs pstore bpf mqueue
        configfs fusectl binfmt_misc efivarfs selinuxfs nsfs rpc_pipefs nfsd
    """
)
#: Disk name prefixes whose rotational flag says nothing about the media (docs/filesystems.md,
#: the ``virtual`` row: the dev VM's virtio disk reports rotational=1).
_VIRTUAL_DISK_PREFIXES = ("vd", "xvd", "nbd", "rbd")
#: fstypes off Linux (psutil's names) that :func:`classify_fstype` does not know.
_OTHER_FUSE = frozenset({"macfuse", "osxfuse", "osxfusefs", "fusefs"})
_OTHER_NETWORK = frozenset({"afpfs", "webdav"})

#: Options that shape parallel-write throughput (nfs(5), mount.cifs(8), overlay's upperdir);
#: they go into the per-mount cache key.  Addresses, ports, uuids and the like are left out on
#: purpose.
KEY_OPTIONS = _names(
    """
        vers nfsvers minorversion proto nconnect max_connect rsize wsize sync async dirsync
        noac actimeo acregmin acregmax acdirmin acdirmax lookupcache cto nocto hard soft
        softerr local_lock write cache wsync nowsync upperdir ro
    """
)
#: NFS options worth naming in a note (the subset of nfs(5) that changes how writes overlap).
_NFS_NOTE_OPTIONS = _names(
    "nconnect max_connect rsize wsize proto lookupcache actimeo sync noac nocto soft hard"
)


class Device(NamedTuple):
    """A leaf block device behind a filesystem."""

    name: str  # "vda", "sda", "nvme0n1", "loop0", ...
    rotational: bool | None
    virtual: bool  # virtio/xen/nbd/rbd/... : rotational flag unreliable


# --- fstypes -----------------------------------------------------------------------------------


def family(fstype: str) -> str:
    """``fuse.sshfs`` -> ``sshfs``, ``fuse.glusterfs`` -> ``glusterfs``; others unchanged."""
    base, _, sub = fstype.partition(".")
    if base in ("fuse", "fuseblk") and sub:
        return sub
    return fstype


def is_block_backed(fstype: str) -> bool:
    """Whether the fstype lives on a block device, so that the disk's media decides its kind."""
    return family(fstype) in _BLOCK


def classify_fstype(fstype: str) -> Kind | None:
    """The kind that the fstype alone decides; ``None`` for block-backed and unknown types."""
    fam = family(fstype)
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


def classify_f_type(f_type: int) -> tuple[str, Kind]:
    """A statfs magic number alone: the fstype it names (or its hex) and the kind."""
    name = F_TYPE_NAMES.get(f_type, f"0x{f_type:x}")
    return name, classify_fstype(name) or ("virtual" if name in _BLOCK else "unknown")


def nfs_version(fstype: str, options: Mapping[str, str | None]) -> str | None:
    """``vers=`` (or ``nfsvers=``) first: the kernel prints ``vers=4.N`` for v4 (nfs(5))."""
    if family(fstype) not in _NFS:
        return None
    vers = options.get("vers") or options.get("nfsvers")
    if vers:
        if vers == "4" and options.get("minorversion"):
            return f"4.{options['minorversion']}"
        return vers
    return "4" if fstype == "nfs4" else None


def latency_bound(kind: Kind, upper: Kind | None) -> bool | None:
    """Whether each file operation waits on something slower than the CPU (a server, a daemon)."""
    if kind in ("nfs", "smb", "network", "fuse"):
        return True
    if kind in ("tmpfs", "ssd", "hdd", "virtual"):
        # A block device's latency is paid at writeback, not per create: creating files on a
        # local filesystem is CPU work (measured on a virtio disk, see policy.py).
        return False
    if kind == "overlay" and upper is not None:
        return latency_bound(upper, None)  # writes land in the upper layer
    return None


def classify_partition(
    fstype: str, options: Mapping[str, str | None], platform: str
) -> tuple[Kind, list[str]]:
    """Off Linux, a psutil partition: macOS marks local mounts ``local``, Windows ``remote``."""
    kind = classify_fstype(fstype)
    if kind is not None:
        return kind, []
    if fstype in _OTHER_FUSE:
        return "fuse", []
    if fstype in _OTHER_NETWORK:
        return "network", []
    if "remote" in options or (platform == "darwin" and "local" not in options):
        return "network", ["The system marks this mount as not local."]
    return "unknown", ["A local disk; its media (SSD or HDD) is not determined on this OS."]


# --- disks -------------------------------------------------------------------------------------


def is_virtual_disk(name: str, device_path: str) -> bool:
    """A disk whose rotational flag is unreliable, by its name or its sysfs device path."""
    if name.startswith(_VIRTUAL_DISK_PREFIXES):
        return True
    # virtio-scsi / virtio-blk / Xen devices show their bus in the sysfs device path.
    return any(part.startswith(("virtio", "xen", "vbd-")) for part in device_path.split("/"))


def devices_by_name(source: str) -> tuple[Device, ...]:
    """For a table from elsewhere: what the source's name alone tells (nothing is read)."""
    if not source.startswith("/dev/"):
        return ()
    name = source.rpartition("/")[2]
    if name.startswith(_VIRTUAL_DISK_PREFIXES):
        return (Device(name=name, rotational=None, virtual=True),)
    return ()


def rotational_flag(value: bool | None) -> str:
    """``1``, ``0`` or ``?``: how the notes and ``pcheckout detect`` show a rotational flag."""
    return "?" if value is None else str(int(value))


class Classified(NamedTuple):
    """A block-backed filesystem's kind, the disks it was judged by, and why."""

    kind: Kind
    devices: tuple[Device, ...]
    notes: tuple[str, ...]


def classify_block(
    fstype: str, source: str, devices: tuple[Device, ...], looked: bool
) -> Classified:
    """The kind of a block-backed filesystem from its leaf disks.

    ``looked``: the disks were read through sysfs; otherwise they come from the source's name in
    a table captured elsewhere (:func:`devices_by_name`).
    """
    if family(fstype) == "zfs":
        note = (
            f"zfs dataset {source!r}: the pool's disks are not resolved (needs zpool); "
            "treated as a virtual disk."
        )
        return Classified("virtual", devices, (note,))
    if not devices:
        why = (
            "the block device could not be resolved through /sys"
            if looked
            else "the block device was not examined (mount table from elsewhere)"
        )
        note = f"{fstype} on {source or 'an unnamed device'}: {why}"
        note += "; treated as a virtual disk." if looked else "."
        return Classified("virtual" if looked else "unknown", devices, (note,))
    names = ", ".join(d.name for d in devices)
    if any(d.rotational and not d.virtual for d in devices):
        return Classified("hdd", devices, (f"{fstype} on {names}: rotational disk.",))
    if any(d.virtual for d in devices):
        flags = ", ".join(f"{d.name} rotational={rotational_flag(d.rotational)}" for d in devices)
        notes = [
            f"{fstype} on a virtual disk ({flags}); a virtual disk's rotational flag says "
            "nothing about the media behind it."
        ]
        if not looked:
            notes.append(f"{devices[0].name} is a virtual disk by its name.")
        return Classified("virtual", devices, tuple(notes))
    if all(d.rotational is False for d in devices):
        return Classified("ssd", devices, (f"{fstype} on {names}: non-rotational disk.",))
    return Classified("unknown", devices, (f"{fstype} on {names}: media type not reported.",))


# --- note texts --------------------------------------------------------------------------------


def fstype_notes(fstype: str, source: str, options: Mapping[str, str | None]) -> list[str]:
    """Why a filesystem that is not block-backed has its kind, and what its options mean."""
    fam = family(fstype)
    kind = classify_fstype(fstype)
    if kind == "nfs":
        ver = nfs_version(fstype, options)
        out = [f"NFS {ver or '(version not shown)'} from {source}."]
        if options.get("vers") is None and options.get("nfsvers") is None:
            out.append("No vers= option in the table; the NFS version is a guess.")
        tuning = [
            f"{k}={v}" if v is not None else k for k, v in options.items() if k in _NFS_NOTE_OPTIONS
        ]
        if tuning:
            out.append("Options that matter for parallel writes: " + ", ".join(tuning) + ".")
        if "sync" in options or "noac" in options:
            out.append("sync/noac make every write synchronous: more writers in flight help.")
        return out
    if kind == "smb":
        dialect = options.get("vers")
        return [f"SMB/CIFS share {source}" + (f", dialect {dialect}." if dialect else ".")]
    if kind == "network":
        if fam == "virtiofs":
            return [
                "virtiofs is a host directory shared into this VM over the FUSE protocol; "
                "treated as a network filesystem (an inference)."
            ]
        if fam == "sshfs":
            return [f"{fstype} is an SFTP client ({source}): {SSHFS_NOTE}"]
        return [f"{fstype} is a network or cluster filesystem ({source})."]
    if kind == "fuse":
        if fstype.startswith("fuseblk"):
            return [
                f"{fstype} is a FUSE daemon over a block device ({source}); "
                "the daemon, not the disk, sets the pace."
            ]
        return [
            f"{fstype} is served by a FUSE daemon ({source or 'no source'}); "
            "every call crosses to user space."
        ]
    if kind == "tmpfs":
        return [f"{fstype} keeps files in RAM: writing is CPU-bound."]
    if kind == "overlay":
        return ["overlay: reads may come from lower layers, writes go to the upper layer."]
    if fam == "autofs":
        return [
            "An automount point that has not been mounted; detection does not trigger "
            "automounts, so the filesystem that would appear here is unknown."
        ]
    if fam in _PSEUDO:
        return [f"{fstype} is a kernel pseudo-filesystem, not a place for a checkout."]
    return [f"{fstype} is not a filesystem type pcheckout knows."]


def cross_check_notes(fstype: str, f_type: int) -> list[str]:
    """A statfs magic number that disagrees with the mount table's fstype is worth a note."""
    magic_name = F_TYPE_NAMES.get(f_type)
    if magic_name is None:
        return [f"statfs f_type 0x{f_type:x} is not in pcheckout's table."]
    by_magic = classify_fstype(magic_name)
    by_type = classify_fstype(fstype)
    if by_magic == by_type or (by_magic is None and by_type is None):
        return []
    if by_type == "network" and by_magic == "fuse":
        return []  # fuse.sshfs & co.: the magic cannot name the daemon
    return [
        f"statfs says {magic_name} (f_type 0x{f_type:x}) but the mount table says "
        f"{fstype}; the mount table was used."
    ]


#: sshfs's traits that shape a checkout, as measured with sshfs 3.7.3 on libfuse 3.14
#: (docs/filesystems.md, *sshfs*; docs/benchmarks.md).
SSHFS_NOTE = (
    "each request is a round trip over one SFTP connection per mount (max_conns=N opens "
    "more); sshfs 3.7 on libfuse 3.12 or later serves at most 10 requests at a time (its "
    "FUSE threads), whatever the number of writers; file times are whole seconds."
)
OVERLAY_READ_ONLY = "overlay without an upper layer (read-only); writes will fail."
OVERLAY_TOO_DEEP = "overlay upper layers nest too deep; upper kind not determined."


def overlay_upper_note(upperdir: str, fstype: str, mount_point: str, kind: Kind) -> str:
    """Where an overlay's writes land, and what kind of filesystem that is."""
    return f"Writes go to the upper layer {upperdir}: {fstype} on {mount_point}, which is {kind}."
