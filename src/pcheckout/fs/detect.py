"""Which filesystem holds a path, and what kind of storage is behind it.

One pipeline, whatever the facts come from (:func:`detect`):

1. **Locate** the mount.  On the local system: probe the path
   (:func:`~pcheckout.fs.probe.probe_path`: its nearest existing ancestor, its mount id through
   ``O_PATH`` + ``/proc/self/fdinfo``, its statfs ``f_type``), find that mount id in
   ``/proc/self/mountinfo``, else the longest mount-point prefix of the resolved path, else the
   ``f_type`` alone.  From a table captured
   elsewhere (``mountinfo=FILE``): the longest prefix on the path string; nothing local is
   examined.
2. **Disks**, for block-backed filesystems: their leaf disks through ``/sys/dev/block`` on this
   machine, or what the source's name tells for a captured table.
3. **Classify**: :mod:`pcheckout.fs.kinds` turns the fstype, options and disks into a kind, with
   notes that say why and how sure.
4. **Overlay**: the upper layer, where writes land, goes through the same pipeline.

Off Linux: :func:`psutil.disk_partitions` with ``all=True`` (its ``opts`` carry macOS ``local``
and Windows ``remote``).

Detection never triggers an automount and never hangs: the probes on the path run in a daemon
thread given ``timeout`` seconds.  A call stuck in the kernel on a dead hard-mounted NFS server
cannot be cancelled; the thread is abandoned (it does not keep the process alive) and the result
is classified from the mount table alone, which the notes say.  The steps, the kinds and their
evidence: ``docs/filesystems.md``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NamedTuple

from pcheckout.errors import DetectError
from pcheckout.fs import mountinfo as mi
from pcheckout.fs.kinds import (
    KEY_OPTIONS,
    OVERLAY_READ_ONLY,
    OVERLAY_TOO_DEEP,
    Device,
    Kind,
    classify_block,
    classify_f_type,
    classify_fstype,
    classify_partition,
    cross_check_notes,
    devices_by_name,
    fstype_notes,
    is_block_backed,
    latency_bound,
    nfs_version,
    overlay_upper_note,
)
from pcheckout.fs.probe import (
    PathProbe,
    call_with_timeout,
    devices_from_source,
    probe_path,
    resolve_devices,
)

__all__ = ["DEFAULT_TIMEOUT", "Device", "FsInfo", "Kind", "Prober", "detect"]

#: Default seconds allowed for the calls on the path that can block on a dead network server.
#: A guess: local probes take well under a millisecond; NFS ``timeo`` defaults are 60 s, so
#: anything slower than a couple of seconds is a server that is not answering.
DEFAULT_TIMEOUT = 2.0

#: Overlay upper layers may themselves be overlays; stop recursing after this many levels.
_MAX_OVERLAY_DEPTH = 4

#: Examines a path on the local system (:func:`~pcheckout.fs.probe.probe_path`; tests pass others).
Prober = Callable[[str], PathProbe]


class FsInfo(NamedTuple):
    path: str  # absolute path asked about
    probed_path: str  # nearest existing ancestor actually examined
    mount_point: str
    mount_id: int | None
    fstype: str  # e.g. "nfs4", "fuse.sshfs", "ext4"
    source: str
    options: dict[str, str | None]  # per-mount and super options merged
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
        import json  # only here: the rest of a checkout never needs it

        opts = sorted((k, v) for k, v in self.options.items() if k in KEY_OPTIONS)
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


def detect(
    path: str | os.PathLike[str],
    *,
    mountinfo: str | os.PathLike[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    probe: Prober = probe_path,
) -> FsInfo:
    """Describe the filesystem that holds (or would hold) ``path``.

    ``mountinfo=None``: the local system (``/proc/self/mountinfo`` + statfs + sysfs, or psutil
    off Linux).  ``mountinfo=FILE``: classify from a table captured elsewhere, by longest prefix
    on the path string; nothing local about the path is examined.  ``probe`` examines the path
    on the local system, within ``timeout`` seconds.
    """
    abspath = os.path.abspath(os.fspath(path))
    if mountinfo is not None:
        captured = _Source(mi.read(mountinfo), os.fspath(mountinfo), timeout, probe)
        return _detect(abspath, captured, 0)
    if os.path.exists(mi.PROC_SELF_MOUNTINFO):
        return _detect(abspath, _Source(mi.read(), None, timeout, probe), 0)
    return _detect_psutil(abspath)


# --- the pipeline ------------------------------------------------------------------------------


class _Source(NamedTuple):
    """Where the facts come from: a mount table, and the live probes when the table is local."""

    table: mi.MountTable
    captured: str | None  # the file of a table captured elsewhere; None: the local system's
    timeout: float
    probe: Prober


class _Located(NamedTuple):
    """The mount table line that holds the path, and how it was found."""

    probed_path: str
    entry: mi.MountEntry
    f_type: int | None
    notes: list[str]


class _MagicOnly(NamedTuple):
    """No table line holds the path; statfs answered."""

    probed_path: str
    f_type: int
    notes: list[str]


def _detect(path: str, src: _Source, depth: int) -> FsInfo:
    found = _locate(path, src)
    if isinstance(found, _MagicOnly):
        fstype, magic_kind = classify_f_type(found.f_type)
        return _fs_info(
            _Facts(
                path,
                found.probed_path,
                mount_point="",
                mount_id=None,
                fstype=fstype,
                source="",
                options={},
                kind=magic_kind,
                f_type=found.f_type,
                notes=[
                    *found.notes,
                    f"No mount table entry matched; classified from statfs f_type alone "
                    f"({fstype}), which cannot tell NFS versions or FUSE daemons apart.",
                ],
            )
        )
    entry = found.entry
    notes = list(found.notes)
    devices: tuple[Device, ...] = ()
    by_type = classify_fstype(entry.fstype)
    if by_type is None and is_block_backed(entry.fstype):
        devices, how = _block_devices(entry, src)
        notes += how
        c = classify_block(entry.fstype, entry.source, devices, src.captured is None)
        kind = c.kind
        notes += c.notes
    else:
        kind = by_type or "unknown"
        notes += fstype_notes(entry.fstype, entry.source, entry.options)
        if entry.fstype.startswith("fuseblk"):
            devices, _ = _block_devices(entry, src)
    upper: Kind | None = None
    if kind == "overlay":
        upperdir = entry.options.get("upperdir")
        if not upperdir:
            notes.append(OVERLAY_READ_ONLY)
        elif depth >= _MAX_OVERLAY_DEPTH:
            notes.append(OVERLAY_TOO_DEEP)
        else:
            up = _detect(upperdir, src, depth + 1)
            upper, devices = up.kind, up.devices
            notes.append(overlay_upper_note(upperdir, up.fstype, up.mount_point, up.kind))
    return _fs_info(
        _Facts(
            path,
            found.probed_path,
            mount_point=entry.mount_point,
            mount_id=entry.mount_id,
            fstype=entry.fstype,
            source=entry.source,
            options=entry.options,
            kind=kind,
            upper=upper,
            f_type=found.f_type,
            devices=devices,
            notes=notes,
        )
    )


def _locate(path: str, src: _Source) -> _Located | _MagicOnly:
    if src.captured is not None:
        entry = src.table.find_by_prefix(path)
        if entry is None:
            raise DetectError(f"no mount in {src.captured} holds {path}")
        note = (
            f"Classified from the mount table {src.captured} by longest mount-point prefix; "
            "the path, its disks and statfs were not examined on this machine."
        )
        return _Located(path, entry, None, [note])

    notes: list[str] = []
    probe: PathProbe | None = None
    try:
        probe = call_with_timeout(lambda: src.probe(path), src.timeout)
    except TimeoutError:
        notes.append(
            f"Looking at {path} did not answer within {src.timeout:g} s (a network server that "
            "is down?); classified from the mount table by path prefix only. The stuck call was "
            "left in a background thread."
        )
    except OSError as exc:
        notes.append(
            f"Looking at {path} failed ({exc.strerror or exc}); classified from the mount table "
            "by path prefix only."
        )
    found: mi.MountEntry | None = None
    probed = path
    f_type: int | None = None
    if probe is not None:
        probed = probe.probed_path
        if probed != path:
            notes.append(
                f"{path} does not exist yet; judged by its nearest existing ancestor {probed}."
            )
        f_type = probe.f_type
        if probe.mount_id is not None:
            found = src.table.by_id(probe.mount_id)
            if found is not None:
                notes.append(f"Mount found by mount id {found.mount_id} (exact).")
    if found is None:
        real = probed
        if probe is not None:
            try:
                real = call_with_timeout(lambda: os.path.realpath(probed), src.timeout)
            except (TimeoutError, OSError):
                real = probed
        found = src.table.find_by_prefix(real)
        if found is None:
            if f_type is not None:
                return _MagicOnly(probed, f_type, notes)
            raise DetectError(f"cannot tell which filesystem holds {path}: no mount matches")
        notes.append(
            "Mount found by longest mount-point prefix (mount id unavailable); "
            "a bind mount of a file or an unusual namespace could mislead this."
        )
    if f_type is not None:
        notes += cross_check_notes(found.fstype, f_type)
    elif probe is not None and probe.f_type_error:
        notes.append(f"statfs failed ({probe.f_type_error}); no f_type cross-check.")
    return _Located(probed, found, f_type, notes)


def _block_devices(entry: mi.MountEntry, src: _Source) -> tuple[tuple[Device, ...], list[str]]:
    """The leaf disks behind a table line, and a note when they were found the long way."""
    if src.captured is not None:
        return devices_by_name(entry.source), []
    devices = resolve_devices(entry.major, entry.minor)
    if devices:
        return devices, []
    devices = devices_from_source(entry.source)
    if not devices:
        return (), []
    return devices, [
        f"mountinfo shows an anonymous device {entry.major}:{entry.minor} (usual for btrfs); "
        f"resolved through the source {entry.source}."
    ]


class _Facts(NamedTuple):
    """What the pipeline found about one path, before the derived fields are added."""

    path: str
    probed_path: str
    mount_point: str
    mount_id: int | None
    fstype: str
    source: str
    options: dict[str, str | None]
    kind: Kind
    notes: list[str]
    upper: Kind | None = None
    f_type: int | None = None
    devices: tuple[Device, ...] = ()


def _fs_info(facts: _Facts) -> FsInfo:
    """The one place an :class:`FsInfo` is made: the NFS version and latency are derived here."""
    return FsInfo(
        path=facts.path,
        probed_path=facts.probed_path,
        mount_point=facts.mount_point,
        mount_id=facts.mount_id,
        fstype=facts.fstype,
        source=facts.source,
        options=facts.options,
        kind=facts.kind,
        upper_kind=facts.upper,
        nfs_version=nfs_version(facts.fstype, facts.options),
        f_type=facts.f_type,
        devices=facts.devices,
        latency_bound=latency_bound(facts.kind, facts.upper),
        notes=tuple(facts.notes),
    )


# --- off Linux ---------------------------------------------------------------------------------


def _detect_psutil(path: str) -> FsInfo:
    """No mount table: psutil's partition list, longest mount-point prefix."""
    # Imported here: importing psutil costs ~16 ms (python -X importtime on the dev VM, 2 vCPU),
    # and only this fallback off Linux needs it.
    import psutil

    norm = os.path.normcase(path)
    best = None
    for p in psutil.disk_partitions(all=True):
        mp = os.path.normcase(p.mountpoint)
        inside = norm == mp or norm.startswith(mp.rstrip("\\/") + os.sep) or mp in ("/", os.sep)
        if inside and (best is None or len(mp) > len(os.path.normcase(best.mountpoint))):
            best = p
    if best is None:
        raise DetectError(f"cannot tell which filesystem holds {path}: no partition matches")
    options = mi.parse_options(best.opts)
    fstype = best.fstype.lower()
    kind, why = classify_partition(fstype, options, sys.platform)
    notes = ["No /proc/self/mountinfo here; classified from psutil.disk_partitions(all=True)."]
    return _fs_info(
        _Facts(
            path,
            path,
            mount_point=best.mountpoint,
            mount_id=None,
            fstype=fstype,
            source=best.device,
            options=options,
            kind=kind,
            notes=[*notes, *why],
        )
    )
