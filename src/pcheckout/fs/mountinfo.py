"""Parse ``/proc/<pid>/mountinfo`` exactly, and find the mount that holds a path.

Format (proc_pid_mountinfo(5))::

    36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
    (1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)    (10)         (11)

1 mount id, 2 parent id, 3 ``major:minor`` of the superblock, 4 root of the mount inside its
filesystem (a bind mount of a subdirectory shows that subdirectory), 5 mount point, 6 per-mount
options, 7 zero or more optional ``tag[:value]`` fields, 8 a lone ``-``, 9 ``type[.subtype]``,
10 source (may be *empty*: two consecutive spaces), 11 per-superblock options.

The kernel octal-escapes space, tab, newline and backslash in fields 4 and 5 (and ``#`` too in
the source and type), so fields never contain a bare space and the lone ``-`` is found by
splitting on single spaces.  Every ``\\ooo`` escape is decoded (as libmount does); the result is
decoded with the filesystem encoding and ``surrogateescape`` so that odd bytes round-trip through
:func:`os.fsencode`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from pcheckout.errors import MountinfoError

#: The kernel's own table for this process (the caller's mount namespace, seen from its root).
PROC_SELF_MOUNTINFO = "/proc/self/mountinfo"

_OCTAL = re.compile(rb"\\([0-7]{3})")


def unescape(raw: str | bytes) -> str:
    """Decode the kernel's ``\\ooo`` escapes (``\\040`` is a space, ``\\134`` a backslash)."""
    data = os.fsencode(raw) if isinstance(raw, str) else raw
    data = _OCTAL.sub(lambda m: bytes([int(m.group(1), 8) & 0xFF]), data)
    return os.fsdecode(data)


def parse_options(text: str) -> dict[str, str | None]:
    """``rw,vers=4.1,hard`` -> ``{"rw": None, "vers": "4.1", "hard": None}`` (order kept)."""
    options: dict[str, str | None] = {}
    for item in text.split(","):
        if not item:
            continue
        key, sep, value = item.partition("=")
        options[key] = value if sep else None
    return options


class MountEntry(NamedTuple):
    """One line of a mountinfo table, unescaped."""

    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str
    mount_point: str
    mount_options: dict[str, str | None]
    optional_fields: tuple[str, ...]
    fstype: str
    source: str
    super_options: dict[str, str | None]
    line_no: int = 0  # 1-based position in the table (later lines were mounted later)

    @property
    def options(self) -> dict[str, str | None]:
        """Per-mount options, then per-superblock options (the superblock wins on a clash)."""
        merged = dict(self.mount_options)
        merged.update(self.super_options)
        return merged

    @property
    def is_bind(self) -> bool:
        """True when the mount shows a subdirectory of its filesystem (``root`` is not ``/``).

        A bind mount of a filesystem's own root cannot be told apart from the original mount
        by its line alone; both then show ``/``.
        """
        return self.root != "/"

    @property
    def base_type(self) -> str:
        """``fuse.sshfs`` -> ``fuse``; ``nfs4`` -> ``nfs4``."""
        return self.fstype.partition(".")[0]

    @property
    def subtype(self) -> str | None:
        """``fuse.sshfs`` -> ``sshfs``; ``None`` without a subtype."""
        _, dot, sub = self.fstype.partition(".")
        return sub if dot else None


def parse_line(line: str | bytes, line_no: int = 0) -> MountEntry:
    """Parse one mountinfo line; raise :class:`MountinfoError` if it is malformed."""
    raw = os.fsencode(line) if isinstance(line, str) else line
    raw = raw.rstrip(b"\n")
    parts = raw.split(b" ")
    where = f"line {line_no}" if line_no else "line"
    try:
        sep = parts.index(b"-", 6)
    except ValueError:
        raise MountinfoError(f"malformed mountinfo {where}: no ' - ' separator") from None
    head, tail = parts[:sep], parts[sep + 1 :]
    if len(head) < 6 or len(tail) < 2:
        raise MountinfoError(f"malformed mountinfo {where}: too few fields")
    try:
        mount_id, parent_id = int(head[0]), int(head[1])
        major_s, _, minor_s = head[2].partition(b":")
        major, minor = int(major_s), int(minor_s)
    except ValueError:
        raise MountinfoError(f"malformed mountinfo {where}: bad id or major:minor") from None
    fstype = unescape(tail[0])
    source = unescape(tail[1])
    # Super options never contain a space; join defensively if a writer put one there.
    super_options = parse_options(unescape(b" ".join(tail[2:])))
    return MountEntry(
        mount_id=mount_id,
        parent_id=parent_id,
        major=major,
        minor=minor,
        root=unescape(head[3]),
        mount_point=unescape(head[4]),
        mount_options=parse_options(unescape(head[5])),
        optional_fields=tuple(unescape(f) for f in head[6:] if f),
        fstype=fstype,
        source=source,
        super_options=super_options,
        line_no=line_no,
    )


def parse(text: str | bytes) -> MountTable:
    """Parse a whole table; blank lines are skipped, malformed lines raise."""
    raw = os.fsencode(text) if isinstance(text, str) else text
    entries = [
        parse_line(line, n) for n, line in enumerate(raw.split(b"\n"), start=1) if line.strip()
    ]
    return MountTable(tuple(entries))


def read(path: str | os.PathLike[str] = PROC_SELF_MOUNTINFO) -> MountTable:
    """Read and parse a mountinfo file (this process's table by default)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise MountinfoError(f"cannot read mount table {os.fspath(path)}: {exc.strerror}") from exc
    return parse(data)


def _is_within(path: str, mount_point: str) -> bool:
    if mount_point == "/":
        return path.startswith("/")
    return path == mount_point or path.startswith(mount_point + "/")


class MountTable:
    """All lines of one mountinfo table, in file order."""

    __slots__ = ("entries",)

    def __init__(self, entries: tuple[MountEntry, ...]) -> None:
        self.entries = entries

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MountTable) and other.entries == self.entries

    def __hash__(self) -> int:
        return hash(self.entries)

    def __repr__(self) -> str:
        return f"MountTable({self.entries!r})"

    def __iter__(self) -> Iterator[MountEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def by_id(self, mount_id: int) -> MountEntry | None:
        for entry in self.entries:
            if entry.mount_id == mount_id:
                return entry
        return None

    def at(self, mount_point: str) -> tuple[MountEntry, ...]:
        """Every entry mounted exactly at ``mount_point``, in file order."""
        return tuple(e for e in self.entries if e.mount_point == mount_point)

    def topmost(self, candidates: Iterable[MountEntry]) -> MountEntry:
        """Of several mounts on one mount point, the visible one.

        The visible mount is the one no other candidate is stacked on (is not the parent of
        another candidate); among several such (should not happen) the last line wins, as in
        ``findmnt``, which iterates the table backwards.
        """
        cands = list(candidates)
        if not cands:
            raise ValueError("no candidates")
        parents = {c.parent_id for c in cands}
        tops = [c for c in cands if c.mount_id not in parents] or cands
        return max(tops, key=lambda e: e.line_no)

    def find_by_prefix(self, path: str) -> MountEntry | None:
        """The visible mount holding ``path`` by string comparison only (no system calls).

        ``path`` must be absolute and normalised (no ``..``, no symlinks resolved here): this
        is the fallback when the mount id cannot be obtained, and the only method for a table
        captured on another machine.  Longest mount point wins; over-mounts resolve with
        :meth:`topmost`.
        """
        best_len = -1
        best: list[MountEntry] = []
        for entry in self.entries:
            mp = entry.mount_point
            if not _is_within(path, mp):
                continue
            if len(mp) > best_len:
                best_len, best = len(mp), [entry]
            elif len(mp) == best_len:
                best.append(entry)
        return self.topmost(best) if best else None
