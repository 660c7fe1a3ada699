from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyfakefs.fake_filesystem import FakeFilesystem
from rich.console import Console

from pcheckout.cli import render
from pcheckout.errors import DetectError
from pcheckout.fs import kinds, probe
from pcheckout.fs import mountinfo as mi
from pcheckout.fs.detect import FsInfo, detect
from pcheckout.fs.kinds import Device
from pcheckout.fs.probe import PathProbe, resolve_devices

FIXTURES = Path(__file__).parent / "fixtures" / "mountinfo"
LINUX = sys.platform.startswith("linux") and os.path.exists(mi.PROC_SELF_MOUNTINFO)


# --- classification from captured tables (no local system calls) ------------------------------

CASES = [
    # fixture, path, kind, nfs_version, fstype, latency_bound
    ("nfs3.txt", "/mnt/build/src", "nfs", "3", "nfs", True),
    ("nfs40.txt", "/mnt/nfs/test/x", "nfs", "4.0", "nfs4", True),
    ("nfs41.txt", "/home/alice", "nfs", "4.1", "nfs4", True),
    ("nfs42.txt", "/mnt/central/repo", "nfs", "4.2", "nfs4", True),
    ("cifs_smb3.txt", "/mnt/share/p", "smb", None, "cifs", True),
    ("lustre.txt", "/lustre/scratch/u", "network", None, "lustre", True),
    ("gpfs.txt", "/gpfs/fs1/proj", "network", None, "gpfs", True),
    ("cephfs.txt", "/mnt/cephfs/a", "network", None, "ceph", True),
    ("glusterfs.txt", "/mnt/gluster/a", "network", None, "fuse.glusterfs", True),
    ("sshfs.txt", "/home/alice/remote/w", "network", None, "fuse.sshfs", True),
    ("fuse_local.txt", "/mnt/local-fuse/a", "fuse", None, "fuse.bindfs", True),
    ("fuse_local.txt", "/mnt/windows/a", "fuse", None, "fuseblk", True),
    ("tmpfs_virtio.txt", "/mnt/scratch/a", "tmpfs", None, "tmpfs", False),
    ("tmpfs_virtio.txt", "/dev/shm/x", "tmpfs", None, "tmpfs", False),
    ("tmpfs_virtio.txt", "/mnt/hostshare/a", "network", None, "virtiofs", True),
    ("tmpfs_virtio.txt", "/mnt/9p/a", "network", None, "9p", True),
    ("zfs.txt", "/tank/git/repo", "virtual", None, "zfs", False),
    ("btrfs_subvol.txt", "/home/alice", "unknown", None, "btrfs", None),
    ("bind_overmount.txt", "/", "virtual", None, "ext4", False),  # /dev/vda1: virtio by name
    ("bind_overmount.txt", "/mnt/lazy/x", "unknown", None, "autofs", None),
    ("bind_overmount.txt", "/mnt/auto/x", "nfs", "4.1", "nfs4", True),  # stacked on autofs
    ("bind_overmount.txt", "/srv/alpha/x", "nfs", "3", "nfs", True),  # bind of a subdirectory
    ("bind_overmount.txt", "/mnt/stack/x", "tmpfs", None, "tmpfs", False),  # over-mount
    ("spaces.txt", "/media/alice/My Book/x", "unknown", None, "exfat", None),
    ("spaces.txt", "/mnt/with - dash/x", "tmpfs", None, "tmpfs", False),
    ("spaces.txt", "/srv/a-hyphen/x", "smb", None, "cifs", True),
    ("proc", "/proc/1", "unknown", None, "proc", None),
]


@pytest.mark.parametrize(("fixture", "path", "kind", "version", "fstype", "latency"), CASES)
def test_classify_fixture(
    fixture: str, path: str, kind: str, version: str | None, fstype: str, latency: bool | None
) -> None:
    table = FIXTURES / ("nfs3.txt" if fixture == "proc" else fixture)
    info = detect(path, mountinfo=table)
    got = (info.kind, info.nfs_version, info.fstype, info.latency_bound)
    assert got == (kind, version, fstype, latency)
    assert info.path == path and info.probed_path == path
    assert info.f_type is None  # nothing local was examined
    assert any("mount table" in n for n in info.notes)


def test_nfs_options_that_matter_are_kept_and_noted() -> None:
    info = detect("/mnt/central/repo", mountinfo=FIXTURES / "nfs42.txt")
    assert info.options["nconnect"] == "8"
    assert info.options["lookupcache"] == "pos"
    assert "sync" in info.options and "noac" in info.options
    assert any("nconnect=8" in n for n in info.notes)
    assert any("synchronous" in n for n in info.notes)


def test_sshfs_is_a_network_filesystem_with_its_traits_noted() -> None:
    info = detect("/home/alice/remote/w", mountinfo=FIXTURES / "sshfs.txt")
    assert (info.kind, info.latency_bound) == ("network", True)
    note = next(n for n in info.notes if n.startswith("fuse.sshfs is an SFTP client"))
    assert "at most 10 requests at a time" in note and "whole seconds" in note


def test_smb_dialect_is_not_an_nfs_version() -> None:
    info = detect("/mnt/share", mountinfo=FIXTURES / "cifs_smb3.txt")
    assert info.nfs_version is None
    assert any("3.1.1" in n for n in info.notes)


def test_overlay_reports_its_upper_layer_kind() -> None:
    table = FIXTURES / "overlay_docker.txt"
    docker = detect("/var/lib/docker/overlay2/3f4c0e1b9a7d/merged/app", mountinfo=table)
    assert docker.kind == "overlay"
    assert docker.upper_kind == "unknown"  # upper is on ext4 on nvme, media not examined
    assert docker.latency_bound is None
    on_tmpfs = detect("/srv/tmp-overlay/x", mountinfo=table)
    on_tmpfs_seen = (on_tmpfs.kind, on_tmpfs.upper_kind, on_tmpfs.latency_bound)
    assert on_tmpfs_seen == ("overlay", "tmpfs", False)
    read_only = detect("/srv/ro-overlay/x", mountinfo=table)
    assert read_only.upper_kind is None
    assert any("read-only" in n for n in read_only.notes)


def test_btrfs_subvolume_is_found_by_mount_point() -> None:
    info = detect("/home/alice/src", mountinfo=FIXTURES / "btrfs_subvol.txt")
    assert info.mount_id == 31
    assert info.options["subvol"] == "/@home"


def test_mount_key_ignores_addresses_but_not_versions() -> None:
    a = detect("/mnt/nfs/test", mountinfo=FIXTURES / "nfs40.txt")
    moved = FsInfo(
        **{
            **a._asdict(),
            "mount_id": 999,
            "options": {**a.options, "clientaddr": "10.9.9.9", "addr": "10.1.1.1"},
        }
    )
    assert moved.mount_key == a.mount_key
    upgraded = FsInfo(**{**a._asdict(), "options": {**a.options, "vers": "4.2"}})
    assert upgraded.mount_key != a.mount_key
    assert "192.168.1.1:/srv/test" in a.mount_key and "vers=4.0" in a.mount_key


def test_to_json_has_the_documented_keys() -> None:
    info = detect("/mnt/build", mountinfo=FIXTURES / "nfs3.txt")
    data = json.loads(json.dumps(info.to_json()))
    keys = """path probed_path mount_point mount_id fstype source options kind upper_kind
        nfs_version f_type devices latency_bound notes mount_key"""
    for key in keys.split():
        assert key in data
    assert data["kind"] == "nfs" and data["nfs_version"] == "3"
    assert data["options"]["nconnect"] == "4"


def test_missing_table_file_is_a_detect_error(tmp_path: Path) -> None:
    with pytest.raises(DetectError):
        detect("/x", mountinfo=tmp_path / "absent")


def test_relative_path_is_made_absolute() -> None:
    info = detect("some/dir", mountinfo=FIXTURES / "nfs3.txt")
    assert info.path == os.path.abspath("some/dir")


# --- statfs magic table ------------------------------------------------------------------------


def test_magic_numbers_classify_like_their_fstypes() -> None:
    assert kinds.classify_fstype(kinds.F_TYPE_NAMES[0x6969]) == "nfs"
    assert kinds.classify_fstype(kinds.F_TYPE_NAMES[0xFE534D42]) == "smb"
    assert kinds.classify_fstype(kinds.F_TYPE_NAMES[0x65735546]) == "fuse"
    assert kinds.classify_fstype(kinds.F_TYPE_NAMES[0x01021994]) == "tmpfs"
    assert kinds.classify_fstype(kinds.F_TYPE_NAMES[0x0BD00BD0]) == "network"


# --- block devices through a fake /sys (pyfakefs) ----------------------------------------------


_SATA = "pci0000:00/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0"


def _disk(fs: FakeFilesystem, name: str, rotational: str, *, bus: str = _SATA, dev: str) -> str:
    real = f"/sys/devices/{bus}/block/{name}"
    fs.create_file(f"{real}/queue/rotational", contents=rotational + "\n")
    fs.create_symlink(f"/sys/dev/block/{dev}", real)
    fs.create_symlink(f"/sys/block/{name}", real)
    return real


def _partition(fs: FakeFilesystem, disk_real: str, name: str, dev: str) -> None:
    real = f"{disk_real}/{name}"
    fs.create_file(f"{real}/partition", contents="1\n")
    fs.create_symlink(f"/sys/dev/block/{dev}", real)


def test_partition_resolves_to_its_disk(fs: FakeFilesystem) -> None:
    sda = _disk(fs, "sda", "0", dev="8:0")
    _partition(fs, sda, "sda1", "8:1")
    assert resolve_devices(8, 1) == (Device("sda", False, False),)


def test_dm_walks_slaves_to_leaf_disks(fs: FakeFilesystem) -> None:
    sda = _disk(fs, "sda", "0", dev="8:0")
    _partition(fs, sda, "sda2", "8:2")
    _disk(fs, "sdb", "1", dev="8:16")
    dm = "/sys/devices/virtual/block/dm-0"
    fs.create_file(f"{dm}/queue/rotational", contents="1\n")
    fs.create_symlink(f"{dm}/slaves/sda2", f"{sda}/sda2")
    fs.create_symlink(f"{dm}/slaves/sdb", "/sys/block/sdb")
    fs.create_symlink("/sys/dev/block/253:0", dm)
    devices = resolve_devices(253, 0)
    assert devices == (Device("sda", False, False), Device("sdb", True, False))
    c = kinds.classify_block("ext4", "/dev/mapper/vg-root", devices, True)
    assert c.kind == "hdd"  # one spinning disk in the set makes it hdd


def test_virtio_disk_is_virtual_whatever_its_flag_says(fs: FakeFilesystem) -> None:
    _disk(fs, "vda", "1", bus="pci0000:00/0000:00:02.0/virtio1", dev="254:0")
    devices = resolve_devices(254, 0)
    assert devices == (Device("vda", True, True),)
    assert kinds.classify_block("ext4", "/dev/vda", devices, True).kind == "virtual"


def test_scsi_disk_behind_virtio_scsi_is_virtual(fs: FakeFilesystem) -> None:
    virtio_scsi = "pci0000:00/0000:00:04.0/virtio2/host0/target0:0:0/0:0:0:0"
    _disk(fs, "sda", "1", bus=virtio_scsi, dev="8:0")
    assert resolve_devices(8, 0) == (Device("sda", True, True),)


def test_nvme_ssd(fs: FakeFilesystem) -> None:
    nvme_bus = "pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0"
    nvme = _disk(fs, "nvme0n1", "0", bus=nvme_bus, dev="259:0")
    _partition(fs, nvme, "nvme0n1p2", "259:2")
    devices = resolve_devices(259, 2)
    assert devices == (Device("nvme0n1", False, False),)
    assert kinds.classify_block("xfs", "/dev/nvme0n1p2", devices, True).kind == "ssd"


def test_loop_with_unresolvable_backing_file_is_virtual(fs: FakeFilesystem) -> None:
    loop = "/sys/devices/virtual/block/loop3"
    fs.create_file(f"{loop}/queue/rotational", contents="0\n")
    fs.create_file(f"{loop}/loop/backing_file", contents="/srv/images/disk.img (deleted)\n")
    fs.create_symlink("/sys/dev/block/7:3", loop)
    assert resolve_devices(7, 3) == (Device("loop3", False, True),)


def test_anonymous_and_unknown_devices_resolve_to_nothing(fs: FakeFilesystem) -> None:
    fs.create_dir("/sys/dev/block")
    assert resolve_devices(0, 45) == ()
    assert resolve_devices(8, 99) == ()
    c = kinds.classify_block("btrfs", "/dev/sda2", (), True)
    assert c.kind == "virtual" and "could not be resolved" in c.notes[0]


def test_device_cycle_does_not_recurse_forever(fs: FakeFilesystem) -> None:
    a, b = "/sys/devices/virtual/block/dm-1", "/sys/devices/virtual/block/dm-2"
    fs.create_symlink(f"{a}/slaves/dm-2", b)
    fs.create_symlink(f"{b}/slaves/dm-1", a)
    fs.create_symlink("/sys/dev/block/253:1", a)
    assert isinstance(resolve_devices(253, 1), tuple)


# --- never hang --------------------------------------------------------------------------------


def test_call_with_timeout_gives_up_on_a_stuck_call() -> None:
    release = threading.Event()
    with pytest.raises(TimeoutError):
        probe.call_with_timeout(lambda: release.wait(30), 0.05)
    release.set()
    assert probe.call_with_timeout(lambda: 42, 5) == 42
    with pytest.raises(ZeroDivisionError):
        probe.call_with_timeout(lambda: 1 // 0, 5)


@pytest.mark.skipif(not LINUX, reason="needs Linux /proc")
def test_detect_survives_a_probe_that_never_answers() -> None:
    release = threading.Event()

    def stuck(path: str) -> PathProbe:
        release.wait(30)
        raise OSError("released")

    try:
        info = detect("/", timeout=0.05, probe=stuck)
    finally:
        release.set()
    assert info.mount_point == "/"
    assert any("did not answer" in n for n in info.notes)


@pytest.mark.skipif(not LINUX, reason="needs Linux /proc")
def test_detect_survives_a_failing_probe() -> None:
    def failing(path: str) -> PathProbe:
        raise PermissionError(13, "Permission denied", path)

    info = detect("/", probe=failing)
    assert info.mount_point == "/" and any("Permission denied" in n for n in info.notes)


# --- off Linux ---------------------------------------------------------------------------------


class _Part:
    def __init__(self, device: str, mountpoint: str, fstype: str, opts: str) -> None:
        self.device, self.mountpoint, self.fstype, self.opts = device, mountpoint, fstype, opts


def test_psutil_fallback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import psutil

    parts = [
        _Part("/dev/disk3s1", "/", "apfs", "local,journaled"),
        _Part("//alice@nas/share", "/Volumes/share", "smbfs", "nodev,nosuid"),
        _Part("nas:/export", "/Volumes/nfs", "nfs", "nodev,nosuid"),
        _Part("map auto_home", "/System/Volumes/Data/home", "autofs", "automounted"),
    ]
    monkeypatch.setattr(psutil, "disk_partitions", lambda all=False: parts)
    monkeypatch.setattr(mi, "PROC_SELF_MOUNTINFO", str(tmp_path / "no-proc"))
    monkeypatch.setattr(sys, "platform", "darwin")
    assert detect("/Volumes/share/x").kind == "smb"
    assert detect("/Volumes/nfs/x").kind == "nfs"
    local = detect("/Users/alice")
    assert local.kind == "unknown" and local.mount_point == "/"
    assert detect("/System/Volumes/Data/home/x").kind == "network"  # not marked local


# --- rendering ---------------------------------------------------------------------------------


def test_render_plain_and_rich() -> None:
    info = detect("/mnt/build", mountinfo=FIXTURES / "nfs3.txt")
    out = io.StringIO()
    render.fs_info(Console(file=out, force_terminal=False, width=80), info)
    text = out.getvalue()
    assert "kind: nfs" in text and "NFS version: 3" in text and "note: " in text
    out = io.StringIO()
    render.fs_info(Console(file=out, force_terminal=True, width=100), info)
    assert "10.117.49.202:/export/build" in out.getvalue()


# --- this machine's real mounts ----------------------------------------------------------------

needs_linux = pytest.mark.skipif(not LINUX, reason="needs Linux /proc/self/mountinfo")
needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to mount"
)


@needs_linux
def test_root_is_found_by_mount_id() -> None:
    info = detect("/")
    table = mi.read()
    assert info.mount_point == "/"
    assert info.mount_id is not None
    entry = table.by_id(info.mount_id)
    assert entry is not None and entry.mount_point == "/"
    assert any("mount id" in n for n in info.notes)
    if info.f_type is not None and info.fstype.startswith("ext"):
        assert info.f_type == 0xEF53


@needs_linux
def test_nonexistent_destination_uses_nearest_ancestor(tmp_path: Path) -> None:
    info = detect(tmp_path / "not" / "yet" / "there")
    assert info.probed_path == str(tmp_path)
    assert info.path == str(tmp_path / "not" / "yet" / "there")
    assert any("nearest existing ancestor" in n for n in info.notes)


@needs_linux
def test_dev_shm_is_tmpfs() -> None:
    entry = mi.read().find_by_prefix("/dev/shm")
    if entry is None or entry.fstype != "tmpfs" or not os.path.isdir("/dev/shm"):
        pytest.skip("/dev/shm is not a tmpfs here")
    info = detect("/dev/shm")
    assert (info.kind, info.latency_bound, info.f_type) == ("tmpfs", False, 0x01021994)


class Mounts:
    """Mounts made by a test; all are undone in teardown, last first."""

    def __init__(self) -> None:
        self.points: list[Path] = []
        self.loops: list[str] = []

    def mount(self, *args: str) -> Path:
        target = Path(args[-1])
        target.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(["mount", *args], capture_output=True, text=True)
        if res.returncode != 0:
            pytest.skip(f"mount {' '.join(args[:-1])} failed here: {res.stderr.strip()}")
        self.points.append(target)
        return target

    def cleanup(self) -> None:
        for p in reversed(self.points):
            if subprocess.run(["umount", str(p)], capture_output=True).returncode != 0:
                subprocess.run(["umount", "-l", str(p)], capture_output=True)
        for loop in self.loops:
            subprocess.run(["losetup", "-d", loop], capture_output=True)


@pytest.fixture
def mounts() -> Iterator[Mounts]:
    m = Mounts()
    try:
        yield m
    finally:
        m.cleanup()


def _line(mount_id: int | None) -> mi.MountEntry:
    assert mount_id is not None
    entry = mi.read().by_id(mount_id)
    assert entry is not None
    return entry


@needs_linux
@needs_root
def test_fresh_tmpfs_mount(mounts: Mounts, tmp_path: Path) -> None:
    d = mounts.mount("-t", "tmpfs", "-o", "size=1m", "pc-fresh", str(tmp_path / "t"))
    info = detect(d / "repo" / "not-yet")
    assert info.kind == "tmpfs" and info.mount_point == str(d)
    assert info.probed_path == str(d)
    assert _line(info.mount_id).source == "pc-fresh"
    assert info.f_type == 0x01021994


@needs_linux
@needs_root
def test_bind_and_over_mount(mounts: Mounts, tmp_path: Path) -> None:
    t = mounts.mount("-t", "tmpfs", "-o", "size=1m", "pc-under", str(tmp_path / "t"))
    (t / "sub").mkdir()
    b = mounts.mount("--bind", str(t / "sub"), str(tmp_path / "b"))
    bound = detect(b)
    assert _line(bound.mount_id).root == "/sub"
    assert bound.kind == "tmpfs" and bound.mount_point == str(b)
    mounts.mount("-t", "tmpfs", "-o", "size=1m", "pc-over", str(t))
    over = detect(t)
    assert _line(over.mount_id).source == "pc-over"
    assert over.source == "pc-over"


@needs_linux
@needs_root
def test_overlay_with_tmpfs_upper(mounts: Mounts, tmp_path: Path) -> None:
    t = mounts.mount("-t", "tmpfs", "-o", "size=1m", "pc-upper", str(tmp_path / "t"))
    for d in ("lower", "upper", "work"):
        (t / d).mkdir()
    layers = f"lowerdir={t}/lower,upperdir={t}/upper,workdir={t}/work"
    m = mounts.mount("-t", "overlay", "-o", layers, "pc-ovl", str(tmp_path / "m"))
    info = detect(m / "x")
    assert (info.kind, info.upper_kind, info.latency_bound) == ("overlay", "tmpfs", False)
    assert info.f_type == 0x794C7630


@needs_linux
@needs_root
@pytest.mark.parametrize("mkfs", ["mkfs.ext4", "mkfs.xfs", "mkfs.btrfs"])
def test_loop_device_filesystem(mounts: Mounts, tmp_path: Path, mkfs: str) -> None:
    tool = shutil.which(mkfs)
    if tool is None:
        pytest.skip(f"{mkfs} is not installed")
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(128 * 1024 * 1024)  # xfs and btrfs refuse much smaller images
    force = "-F" if mkfs == "mkfs.ext4" else "-f"
    res = subprocess.run([tool, "-q", force, str(img)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"{mkfs} failed: {res.stderr.strip()[:200]}")
    loop = subprocess.run(["losetup", "--find", "--show", str(img)], capture_output=True, text=True)
    if loop.returncode != 0:
        pytest.skip(f"no loop device: {loop.stderr.strip()}")
    mounts.loops.append(loop.stdout.strip())
    d = mounts.mount(loop.stdout.strip(), str(tmp_path / "l"))
    info = detect(d)
    assert info.fstype == mkfs.removeprefix("mkfs.")
    assert info.mount_point == str(d)
    # A loop device is as fast as the filesystem that holds its image.
    backing = detect(img)
    if backing.devices:
        assert info.devices == backing.devices
        assert info.kind == backing.kind
    else:
        assert info.devices and info.devices[0].name.startswith("loop")
        assert info.kind == "virtual"
