"""Writing a split index as git 2.39 does after a checkout (read-cache.c
write_locked_index, split-index.c prepare_to_write_split_index).

``core.splitIndex``: true splits the index, false writes it whole again, unset keeps a
split index split (read-cache.c tweak_split_index).  A split index ties each entry it
kept to its entry in the shared index ``<git dir>/sharedindex.<hex>``; an entry a
checkout writes is a new one.  If more than ``splitIndex.maxPercentChange`` (20) percent
of the entries are not tied, or the index was not split, git writes a new shared index
holding every entry (no extensions) and an index of no entries whose ``link`` names it;
otherwise the index holds the changed tied entries and those it held already (their
paths empty, in the shared index's order, the replace bitmap naming them), then the new
entries, and the delete bitmap names the shared entries gone.  Writing a new shared
index removes the other ``sharedindex.*`` files older than
``splitIndex.sharedIndexExpire`` (two weeks); reusing one freshens its mtime.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pcheckout.errors import WriteError
from pcheckout.fdio import write_all
from pcheckout.git import ewah
from pcheckout.git import index as ix
from pcheckout.git.config import config_bool
from pcheckout.git.indexformat import HASH_SIZES

__all__ = [
    "Layout",
    "SplitWrite",
    "around_shared",
    "clean_shared",
    "default_expiry",
    "encode_split",
    "fields",
    "link_extension",
    "put_shared",
    "wants_split",
]

#: read-cache.c default_max_percent_split_change
DEFAULT_MAX_PERCENT = 20
#: read-cache.c: splitIndex.sharedIndexExpire's default, "2.weeks.ago"
DEFAULT_EXPIRE_SECONDS = 14 * 24 * 3600
SHARED_PREFIX = b"sharedindex."


def wants_split(config: Mapping[str, str], read: ix.SplitIndex | None) -> bool:
    """Whether git writes this index split: ``core.splitIndex`` if set, else as read."""
    setting = config.get("core.splitindex")
    if setting is None:
        return read is not None
    return config_bool(setting, False)


def link_extension(base_oid: bytes, delete: Sequence[int], replace: Sequence[int]) -> bytes:
    """The ``link`` extension, header included (split-index.c write_link_extension)."""
    body = base_oid + ewah.encode(delete) + ewah.encode(replace)
    return ix.EXT_HEADER.pack(ix.EXT_SPLIT_INDEX, len(body)) + body


def max_percent(config: Mapping[str, str]) -> int:
    """splitIndex.maxPercentChange (0..100; anything else is the default)."""
    try:
        value = int(config.get("splitindex.maxpercentchange", ""))
    except ValueError:
        return DEFAULT_MAX_PERCENT
    return value if 0 <= value <= 100 else DEFAULT_MAX_PERCENT


def _too_many_not_shared(total: int, not_shared: int, percent: int) -> bool:
    """read-cache.c too_many_not_shared_entries."""
    if percent == 0:
        return True
    if percent == 100:
        return False
    return total * percent < not_shared * 100


class SplitWrite(NamedTuple):
    """A split index to write: the index's bytes, and the new shared index (its file
    name and bytes, written first) or the reused one's file name to freshen."""

    data: bytes  # the index file
    shared_name: bytes
    shared: bytes | None  # None: the shared index exists and is reused


class Layout(NamedTuple):
    """How the index files are encoded: version, object hash, skipHash."""

    version: int
    hash_name: str
    skip_hash: bool = False


def _encode(
    entries: Sequence[ix.IndexEntry], layout: Layout, extensions: bytes, *, split: bool
) -> bytes:
    rows = [(e.path, fields(e), e.flags, e.extended_flags) for e in entries]
    return bytes(
        ix.encode_rows(
            rows,
            len(rows),
            ix.Encoding(
                layout.version,
                layout.hash_name,
                extended=any(e.extended_flags for e in entries),
                skip_hash=layout.skip_hash and not split,
                allow_same_path=split,
                extensions=extensions,
            ),
        )
    )


def fields(e: ix.IndexEntry) -> ix.Fields:
    return (
        e.ctime_s,
        e.ctime_ns,
        e.mtime_s,
        e.mtime_ns,
        e.dev,
        e.ino,
        e.mode,
        e.uid,
        e.gid,
        e.size,
        e.oid,
    )


def new_shared(entries: Sequence[ix.IndexEntry], layout: Layout, extensions: bytes) -> SplitWrite:
    """A new shared index of every entry (git writes it with no extensions and
    never skips its hash: its name is its checksum) and an index of none."""
    shared = _encode(entries, layout._replace(skip_hash=False), b"", split=False)
    return around_shared(shared, layout, extensions)


def around_shared(shared: bytes, layout: Layout, extensions: bytes) -> SplitWrite:
    """The index of no entries naming ``shared`` (an index of every entry, without
    extensions, its checksum computed) as its shared index."""
    oid = shared[-HASH_SIZES[layout.hash_name] :]
    index = _encode([], layout, link_extension(oid, [], []) + extensions, split=True)
    return SplitWrite(index, SHARED_PREFIX + oid.hex().encode(), shared)


def encode_split(
    entries: Sequence[ix.IndexEntry],
    read: ix.SplitIndex | None,
    tied: Mapping[tuple[bytes, int], int],
    config: Mapping[str, str],
    layout: Layout,
    extensions: bytes = b"",
) -> SplitWrite:
    """The split index git writes for ``entries`` (in index order) after reading
    ``read``; ``tied`` maps the (path, stage) of each entry kept from the read index to
    its position in the shared index.  ``extensions`` follow the ``link`` one."""
    if read is None or not any(read.base_oid):
        return new_shared(entries, layout, extensions)
    base = read.base
    not_shared = sum(1 for e in entries if ix.sort_key(e) not in tied)
    if _too_many_not_shared(len(entries), not_shared, max_percent(config)):
        return new_shared(entries, layout, extensions)
    matched: set[int] = set()
    replaced: dict[int, ix.IndexEntry] = {}
    new: list[ix.IndexEntry] = []
    for e in entries:
        pos = tied.get(ix.sort_key(e))
        if pos is None or pos >= len(base) or base[pos].path != e.path:
            new.append(e)
            continue
        matched.add(pos)
        if e != base[pos] or pos in read.replaced:
            replaced[pos] = e
    delete = [p for p in range(len(base)) if p not in matched]
    replace = sorted(replaced)
    rows = [_stripped(replaced[p]) for p in replace] + new
    link = link_extension(read.base_oid, delete, replace)
    index = _encode(rows, layout, link + extensions, split=True)
    return SplitWrite(index, SHARED_PREFIX + read.base_oid.hex().encode(), None)


def _stripped(e: ix.IndexEntry) -> ix.IndexEntry:
    """A replacement entry: its path is the shared entry's (CE_STRIP_NAME)."""
    return dataclasses.replace(e, path=b"")


def put_shared(git_dir: bytes, write: SplitWrite) -> None:
    """Write the new shared index (a temporary file renamed into place) or freshen the
    reused one, before the index naming it is committed."""
    target = os.path.join(git_dir, write.shared_name)
    if write.shared is None:
        with contextlib.suppress(OSError):  # freshen_shared_index(..., 0): best effort
            os.utime(target)
        return
    tmp, fd = _temporary(git_dir)
    try:
        try:
            write_all(fd, write.shared)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise WriteError(os.fsencode(target), exc) from exc


def _temporary(git_dir: bytes) -> tuple[bytes, int]:
    """A new ``sharedindex_XXXXXX`` in ``git_dir``, mode 0666 less the umask (as git's
    mks_tempfile_sm), open for writing."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = os.path.join(git_dir, b"sharedindex_" + secrets.token_hex(3).encode())
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            raise WriteError(tmp, exc) from exc


def clean_shared(git_dir: bytes, current: bytes, expire_before: float | None) -> None:
    """read-cache.c clean_shared_index_files: the other shared indexes not modified
    since ``expire_before`` (None: never expire) are removed."""
    if expire_before is None:
        return
    try:
        names = os.listdir(git_dir)
    except OSError:
        return
    for name in names:
        if not name.startswith(SHARED_PREFIX) or name == current:
            continue
        path = os.path.join(git_dir, name)
        with contextlib.suppress(OSError):
            if os.stat(path).st_mtime <= expire_before:
                os.unlink(path)


def default_expiry(now: float | None = None) -> float:
    """The default ``splitIndex.sharedIndexExpire``: two weeks ago."""
    return (time.time() if now is None else now) - DEFAULT_EXPIRE_SECONDS
