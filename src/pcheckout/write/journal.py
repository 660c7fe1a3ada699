"""The in-progress journal: what an interrupted checkout completed, for a cheap resume.

A checkout writes ``.git/pcheckout-in-progress`` before its first file and
removes it after HEAD has moved.  The file starts with a header naming the
tree being written; after it, the run appends one fixed-size record per entry
written raw (no conversion) whose write *and* close have returned (never
before: nothing cut short is ever recorded).  A record holds the entry's
position in the tree listing and the file's stat data as the writer's own
``fstat`` saw it (the same packed stat data the index is written from: ctime
and mtime in nanoseconds, inode, owner, size).

A re-run of the same tree keeps an entry without reading it when ``lstat``
of its path gives exactly those values (the device number aside: it may change
when a network filesystem is mounted again), the type and executable bit the
tree asks for, and (when the listing has sizes) the blob's size.  All values come
from the filesystem itself, so no clock is compared with another: on NFS the
server sets mtime and ctime, and the client's clock never enters.  Any change
since the record (a write, a chmod, a replacement) moves ctime, so a file that
matches is the one the run finished.  What has no record (in flight when the
run died, or completed in the last unflushed batch) is written again.

Records are batched: appended by whoever fills a batch of
:data:`FLUSH_RECORDS`, and by :meth:`Journal.flush` on the writer's progress
tick, so on NFS the journal costs one WRITE per batch, not one per file.  Each
record carries a CRC-32, so a batch torn by a kill is recognised and dropped;
a resuming run cuts the file back to its last whole record before appending.

The header is text (``pcheckout-in-progress 2``, ``commit``, ``tree``,
``conversion``, ``kind``, ``also``, ``clone`` where the run is git clone's checkout, an
empty line).  ``kind`` is ``fresh`` (a checkout
into a work tree without an index: records follow) or ``switch`` (a populated work tree
moving to ``tree``: no records, the index and HEAD still name where it came from);
``also`` lists the other trees that interrupted runs before this one were writing or
leaving, so a re-run knows every tree whose files it may find (``decide/leftovers.py``).
A marker of an older pcheckout (the commit alone on one line) is read as a journal
without records: every entry on disk is then verified by its content, as before.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
import struct
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

from pcheckout.errors import WriteError
from pcheckout.fdio import write_all
from pcheckout.fs.files import STAT_SIZE, pack_stat
from pcheckout.git.tree import MODE_EXEC, MODE_GITLINK, MODE_SYMLINK

MAGIC = b"pcheckout-in-progress 2\n"
#: position in the listing, packed stat data (fs/files.py pack_stat), CRC-32 of both.
RECORD = struct.Struct(f"<I{STAT_SIZE}sI")
_BODY = struct.Struct(f"<I{STAT_SIZE}s")
#: Records appended per write: 32 x 56 bytes, one 1.8 KiB WRITE on NFS; the
#: flush on each progress tick (0.1 s) bounds the rest.  What a kill leaves
#: written but unrecorded (a batch not yet appended, plus the files in flight)
#: is written again by the resume: killed at 1.1 s on the 1 ms latency mount,
#: 4,800 files at ~3,000 a second, 128 left a median of 99 such files (39-150),
#: 32 left 34 (25-47); the 150 appends instead of 38 cost a fresh checkout
#: nothing measurable (2.15 s against 2.19 s, medians of 6, interleaved).
FLUSH_RECORDS = 32
#: Where the device number lies in packed stat data (fs/files.py: ctime, mtime, dev, ...).
_DEV, _DEV_END = 16, 24
_O_APPEND = os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


def _record_of(i: int, packed: bytes) -> bytes:
    body = _BODY.pack(i, packed)
    return body + struct.pack("<I", zlib.crc32(body))


class Previous(NamedTuple):
    """What an interrupted run left: its header and its whole records."""

    commit: str
    tree: str
    conversion: bool
    #: listing position -> packed stat data when it was completed; a later record wins
    done: Mapping[int, bytes] = MappingProxyType({})
    #: bytes of header plus whole records (a resuming run appends after these)
    valid_length: int = 0
    version: int = 2
    kind: str = "fresh"  # "fresh" or "switch" (see the module docstring)
    also: tuple[str, ...] = ()  # the other trees interrupted runs were writing or leaving
    clone: bool = False  # git clone's checkout: its re-run finishes it as git clone would

    @property
    def trees(self) -> tuple[str, ...]:
        """Every tree whose files the interrupted runs may have left: ``tree`` first."""
        return tuple(dict.fromkeys(t for t in (self.tree, *self.also) if t))


def read(path: str | bytes | os.PathLike[str]) -> Previous | None:
    """The journal at ``path``; None if there is none."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WriteError(os.fsencode(path), exc) from None
    return parse(data)


def parse(data: bytes) -> Previous:
    if not data.startswith(MAGIC):
        # An older pcheckout's marker: the commit on one line, nothing else.
        commit = data.split(b"\n", 1)[0].decode("ascii", "replace").strip()
        return Previous(commit, "", True, version=1)
    end = data.find(b"\n\n")
    if end < 0:  # killed while writing the header: nothing is known
        return Previous("", "", True, valid_length=0)
    fields: dict[str, str] = {}
    for line in data[len(MAGIC) : end].decode("ascii", "replace").splitlines():
        key, _, value = line.partition(" ")
        fields[key] = value
    start = end + 2
    done: dict[int, bytes] = {}
    pos = start
    size = RECORD.size
    unpack = RECORD.unpack_from
    while pos + size <= len(data):
        i, packed, crc = unpack(data, pos)
        if zlib.crc32(data[pos : pos + size - 4]) != crc:
            break  # a torn batch: everything after it is suspect
        done[i] = packed
        pos += size
    return Previous(
        fields.get("commit", ""),
        fields.get("tree", ""),
        fields.get("conversion", "1") != "0",
        done,
        pos,
        kind=fields.get("kind", "fresh"),
        also=tuple(fields.get("also", "").split()),
        clone=fields.get("clone", "0") == "1",
    )


class Header(NamedTuple):
    """What a journal's header says of its run (see the module docstring)."""

    commit: str
    tree: str
    conversion: bool
    kind: str = "fresh"
    also: tuple[str, ...] = ()
    clone: bool = False

    def encode(self) -> bytes:
        also = " ".join(t for t in self.also if t != self.tree)
        text = (
            f"commit {self.commit}\ntree {self.tree}\nconversion {int(self.conversion)}\n"
            f"kind {self.kind}\nalso {also}\n" + ("clone 1\n" if self.clone else "") + "\n"
        )
        return MAGIC + text.encode()


def header(commit: str, tree: str, conversion: bool) -> bytes:
    return Header(commit, tree, conversion).encode()


class Journal:
    """Appends records for one run; shared by the worker threads of a process
    (a forked writer uses its inherited copy, with its share's ``base``)."""

    def __init__(self, path: bytes, fd: int, *, continued: bool = False) -> None:
        self.path = path
        #: appending to an interrupted run's journal of the same tree: its records stand
        #: (an entry a resume keeps needs no record of its own)
        self.continued = continued
        self._fd: int | None = fd
        self._buf: list[bytes] = []
        self._buf_lock = threading.Lock()
        self._write_lock = threading.Lock()
        #: added to every position recorded (a forked writer's share starts there)
        self.base = 0
        #: the listing position of each entry of the current write (None: the same)
        self.positions: Sequence[int] | None = None

    @classmethod
    def start(
        cls,
        path: str | bytes | os.PathLike[str],
        head: Header,
        *,
        previous: Previous | None = None,
    ) -> Journal:
        """Begin the journal before the first write: continue ``previous`` if it is a
        fresh checkout's of the same tree (its records stay valid), else start afresh."""
        p = os.fsencode(path)
        try:
            if _continues(previous, head):
                assert previous is not None
                fd = os.open(p, _O_APPEND)
                try:
                    os.ftruncate(fd, previous.valid_length)  # drop a torn batch
                except BaseException:
                    os.close(fd)
                    raise
                return cls(p, fd, continued=True)
            fd = os.open(p, _O_APPEND | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                write_all(fd, head.encode())
            except BaseException:
                os.close(fd)
                raise
        except OSError as exc:
            raise WriteError(p, exc) from None
        return cls(p, fd)

    def done(self, i: int, packed: bytes) -> None:
        """Entry ``i`` (of this share) is complete: its write and close returned;
        ``packed`` is its stat data (``pack_stat`` of the writer's ``fstat``)."""
        pos = self.base + i
        rec = _record_of(pos if self.positions is None else self.positions[pos], packed)
        with self._buf_lock:
            self._buf.append(rec)
            if len(self._buf) < FLUSH_RECORDS:
                return
            batch, self._buf = self._buf, []
        self._append(batch)

    def flush(self) -> None:
        with self._buf_lock:
            batch, self._buf = self._buf, []
        if batch:
            self._append(batch)

    def _append(self, batch: list[bytes]) -> None:
        with self._write_lock:
            if self._fd is None:
                return
            try:
                write_all(self._fd, b"".join(batch))
            except OSError:
                # Only a resume is slower without it: stop recording, go on.
                self._close()

    def close(self) -> None:
        """Flush and close (the file stays until :func:`remove`)."""
        self.flush()
        with self._write_lock:
            self._close()

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _continues(previous: Previous | None, head: Header) -> bool:
    """Whether a run of ``head`` appends to ``previous``'s journal: both a fresh
    checkout's of the same tree, with whole records to keep."""
    if previous is None or previous.version != 2 or not previous.valid_length:
        return False
    return previous.kind == head.kind == "fresh" and previous.tree == head.tree


# -- proving what a previous run completed ------------------------------------------------
def kind_matches(tree_mode: int, st_mode: int) -> bool:
    """The file type (and executable bit) ``tree_mode`` asks for, as git checks it."""
    if tree_mode == MODE_SYMLINK:
        return stat_mod.S_ISLNK(st_mode)
    if tree_mode == MODE_GITLINK:
        return stat_mod.S_ISDIR(st_mode)
    if not stat_mod.S_ISREG(st_mode):
        return False
    return bool(st_mode & 0o100) == (tree_mode == MODE_EXEC)


def candidates(
    previous: Previous | None,
    tree: str,
    raw: Sequence[bool],
    skip: Sequence[bool],
    positions: Sequence[int] | None = None,
) -> list[int]:
    """Entries worth an ``lstat`` (indexes into ``raw``): recorded by a run of
    the same tree (which records only what it wrote raw) and written raw now
    too (``raw``: no conversion applies; a converted file is written again, as
    the attributes or config that converted it may have changed since).
    ``positions`` gives each entry's place in the listing (None: its index)."""
    if previous is None or previous.version != 2 or previous.tree != tree:
        return []
    done = previous.done
    n = len(raw)
    if positions is None:
        return sorted(i for i in done if i < n and raw[i] and not skip[i])
    return [j for j in range(n) if positions[j] in done and raw[j] and not skip[j]]


def proven(
    previous: Previous,
    todo: Sequence[int],
    stats: Sequence[os.stat_result | None],
    modes: Sequence[int],
    sizes: Sequence[int],
    positions: Sequence[int] | None = None,
) -> list[int]:
    """Those of the entries ``todo`` (from :func:`candidates`) whose ``lstat``
    (in ``stats``, None: absent) is exactly what the interrupted run recorded
    for them; ``modes`` and ``sizes`` are the tree's, per entry."""
    kept = []
    done = previous.done
    for i, st in zip(todo, stats, strict=True):
        if st is None:
            continue
        was = done[i if positions is None else positions[i]]
        now = pack_stat(st)
        # the packed fields but the device number (_DEV: it may change on a remount)
        if now[:_DEV] != was[:_DEV] or now[_DEV_END:] != was[_DEV_END:]:
            continue
        if not kind_matches(modes[i], st.st_mode):
            continue
        blob = modes[i] not in (MODE_SYMLINK, MODE_GITLINK)
        if blob and sizes[i] >= 0 and st.st_size != sizes[i]:
            continue
        kept.append(i)
    return kept


def remove(path: str | bytes | os.PathLike[str]) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


#: What a writer calls when an entry is complete (the journal's ``done``).
OnDone = Callable[[int, bytes], None]

__all__ = [
    "FLUSH_RECORDS",
    "MAGIC",
    "Header",
    "Journal",
    "OnDone",
    "Previous",
    "candidates",
    "header",
    "kind_matches",
    "parse",
    "proven",
    "read",
    "remove",
]
