"""The index file's layout (gitformat-index.txt; cache.h and read-cache.c in git) and the one
walk over its entries: :func:`walk_entries` reads every entry's fixed fields, flags and path,
checked as read-cache.c checks them.  ``git/index.py`` builds its entries from that walk
(and reads the extensions and the checksum); ``git/indexsize.py`` sums its sizes.  This
module imports no hashing and builds no dataclass, so what only counts (the bytes git's
writer wrote) does not pay for ``git/index.py``'s import.
"""

from __future__ import annotations

import struct
from collections.abc import Container
from typing import Any, NamedTuple

from pcheckout.errors import CorruptIndexError, UnsupportedIndexError, quote_path

SIGNATURE = b"DIRC"
HEADER = struct.Struct(">4sII")
SUPPORTED_VERSIONS = (2, 3, 4)
#: hash name -> raw object id size (hash-ll.h: GIT_SHA1_RAWSZ, GIT_SHA256_RAWSZ)
HASH_SIZES = {"sha1": 20, "sha256": 32}
#: in the 16-bit flags word (cache.h CE_EXTENDED)
FLAG_EXTENDED = 0x4000
FLAG_NAME_MASK = 0x0FFF  # a name of 0xFFF bytes or more stores 0xFFF (CE_NAMEMASK)
FLAG_STAGE_MASK = 0x3000
FLAG_STAGE_SHIFT = 12
#: extended flags word (v3+): reserved, skip-worktree, intent-to-add, 13 unused bits
EXT_FLAG_SKIP_WORKTREE = 0x4000
EXT_FLAG_INTENT_TO_ADD = 0x2000
#: entries of v2/v3 are padded with 1..8 NULs to a multiple of 8 (read-cache.c align_flex_name)
ENTRY_ALIGN = 8
#: an entry's fixed part: ten u32 stat words (ctime s/ns, mtime s/ns, dev, ino, mode, uid,
#: gid, size), the raw object id, the 16-bit flags word
FIXED = {name: struct.Struct(f">10I{size}sH") for name, size in HASH_SIZES.items()}
#: where the size is in a fixed part as :data:`FIXED` unpacks it
SIZE = 9


class Walk(NamedTuple):
    """An index's entries as stored, in its order (parallel lists)."""

    names: list[bytes]
    #: each entry's fixed part as :data:`FIXED` unpacks it (the flags word last)
    fixed: list[tuple[Any, ...]]
    extended: list[int]  # each entry's extended flags word (0 where it has none)
    end: int  # the offset where the entries end (and the extensions begin)
    empty: bool  # some entry has an empty path (a split index's replacement entry)
    #: each entry is stored as git's writer stores it: its extended bit set only with
    #: extended flags (an entry with the bit and a zero word would be written back
    #: without them: git's encoder derives the bit)
    canonical: bool = True


def encode_varint(value: int) -> bytes:
    """git's varint.c encode_varint (offset encoding: each continuation adds one)."""
    out = [value & 0x7F]
    value >>= 7
    while value:
        value -= 1
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(out))


def decode_varint(data: bytes, off: int) -> tuple[int, int]:
    """varint.c decode_varint: the value at ``off`` and the offset after it."""
    c = data[off]
    off += 1
    value = c & 0x7F
    while c & 0x80:
        c = data[off]
        off += 1
        value = ((value + 1) << 7) | (c & 0x7F)
    return value, off


def read_header(data: bytes, path: bytes) -> tuple[int, int]:
    """(version, entry count) of the index ``data`` read from ``path``."""
    if len(data) < HEADER.size or data[:4] != SIGNATURE:
        raise CorruptIndexError(f"{quote_path(path)} is not a git index (bad signature)", path)
    _, version, count = HEADER.unpack_from(data)
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedIndexError(
            f"{quote_path(path)}: unsupported index version {version}", path
        )
    return version, count


def walk_entries(data: bytes, version: int, count: int, hash_name: str, path: bytes) -> Walk:
    """The ``count`` entries of ``data`` (an index of ``version`` whose object hash is
    ``hash_name``, read from ``path``), checked as read-cache.c reads them: the lengths and
    path compression, the order (check_ce_order), the extended flags only from v3.
    Raises :class:`CorruptIndexError` with git's reason."""
    where = quote_path(path)
    end = len(data) - HASH_SIZES[hash_name]  # the trailing checksum
    fixed = FIXED[hash_name]
    fixed_size = fixed.size
    unpack = fixed.unpack_from
    find = data.find
    name_mask = FLAG_NAME_MASK
    align_mask = ~(ENTRY_ALIGN - 1)
    v4 = version == 4
    names: list[bytes] = []
    fields: list[tuple[Any, ...]] = []
    extended: list[int] = []
    add_name, add_fields, add_ext = names.append, fields.append, extended.append
    off = HEADER.size
    prev = b""
    empty = False
    canonical = True
    try:
        for _ in range(count):
            f = unpack(data, off)
            flags = f[-1]
            start = off + fixed_size
            ext = 0
            if flags & FLAG_EXTENDED:
                if version < 3:
                    raise CorruptIndexError(f"{where}: extended flags in a version 2 index", path)
                ext = (data[start] << 8) | data[start + 1]
                start += 2
                if not ext:
                    canonical = False
            if v4:
                c = data[start]
                start += 1
                drop = c & 0x7F
                while c & 0x80:  # varint.c decode_varint
                    c = data[start]
                    start += 1
                    drop = ((drop + 1) << 7) | (c & 0x7F)
                nul = find(b"\0", start, end)
                if nul < 0 or drop > len(prev):
                    raise CorruptIndexError(f"{where}: bad path compression", path)
                name = prev[: len(prev) - drop] + data[start:nul]
                off = nul + 1
            else:
                n = flags & name_mask
                if n == name_mask:
                    n = find(b"\0", start, end) - start
                    if n < 0:
                        raise CorruptIndexError(f"{where}: unterminated path", path)
                elif data[start + n] != 0:
                    raise CorruptIndexError(f"{where}: path length mismatch", path)
                name = data[start : start + n]
                off += (start - off + n + ENTRY_ALIGN) & align_mask
            if off > end:
                raise CorruptIndexError(f"{where}: truncated index entries", path)
            if name <= prev:  # read-cache.c check_ce_order
                if not name:  # a split index's replacement entry; else corrupt (index.py)
                    empty = True
                elif names:
                    _check_order(prev, fields[-1][-1], name, flags, path)
            add_name(name)
            add_fields(f)
            add_ext(ext)
            prev = name
    except (struct.error, IndexError):
        raise CorruptIndexError(f"{where}: truncated index entries", path) from None
    return Walk(names, fields, extended, off, empty, canonical)


#: an entry's size and flags words, after its first nine stat words (:data:`FIXED`)
_SIZE_AND_FLAGS = {name: struct.Struct(f">I{size}xH") for name, size in HASH_SIZES.items()}


def walk_sizes(
    data: bytes, version: int, count: int, hash_name: str, paths: Container[bytes] | None
) -> tuple[int, int, int] | None:
    """(entries, bytes, end) of :func:`walk_entries`' entries without building them: the
    size fields summed (of the entries named in ``paths`` and not skip-worktree, if
    given), and where the entries end.  Only the lengths are read: none of the checks of
    :func:`walk_entries`, for an index git has just written (a 40k-entry index walked in
    ~8 ms where :func:`walk_entries` takes ~50).  None where it cannot say so simply (a
    version 4 index, a name of 0xFFF bytes or more, entries past the end): walk them."""
    if version == 4:
        return None
    oid = HASH_SIZES[hash_name]
    unpack = _SIZE_AND_FLAGS[hash_name].unpack_from
    at_size, fixed_size = 36, 40 + oid + 2  # (nine stat words before the size)
    end = len(data) - oid
    off, total, chosen = HEADER.size, 0, 0
    try:
        for _ in range(count):
            size, flags = unpack(data, off + at_size)
            n = flags & FLAG_NAME_MASK
            start = off + fixed_size
            ext = 0
            if flags & FLAG_EXTENDED:
                ext = (data[start] << 8) | data[start + 1]
                start += 2
            if n == FLAG_NAME_MASK:
                return None
            if paths is None:
                total += size
            elif not ext & EXT_FLAG_SKIP_WORKTREE and data[start : start + n] in paths:
                total += size
                chosen += 1
            off += (start - off + n + ENTRY_ALIGN) & ~(ENTRY_ALIGN - 1)
    except (struct.error, IndexError):
        return None
    if off > end:
        return None
    return (count if paths is None else chosen), total, off


def _check_order(before: bytes, flags_before: int, name: bytes, flags: int, path: bytes) -> None:
    where = quote_path(path)
    if name < before:
        raise CorruptIndexError(f"{where}: unordered entries {quote_path(name)}", path)
    stage_before = (flags_before & FLAG_STAGE_MASK) >> FLAG_STAGE_SHIFT
    stage = (flags & FLAG_STAGE_MASK) >> FLAG_STAGE_SHIFT
    if not stage_before or stage <= stage_before:
        raise CorruptIndexError(f"{where}: unordered stage entries for {quote_path(name)}", path)
