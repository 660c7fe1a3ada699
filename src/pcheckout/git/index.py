"""Read and write git's index file (``.git/index``), versions 2, 3 and 4.

The on-disk format is git's Documentation/gitformat-index.txt (index-format.txt
before git 2.38).  In short, all integers big-endian:

    header      "DIRC" | u32 version | u32 entry count
    entry       u32 ctime_s, ctime_ns, mtime_s, mtime_ns, dev, ino, mode, uid, gid, size
                | object id (20 or 32 bytes) | u16 flags | [u16 extended flags]
                | path            v2/v3: path, then 1..8 NULs so the entry is a multiple of 8
                                  v4: varint(bytes to drop from the previous path), suffix, NUL
    extensions  4-byte signature | u32 size | data     (signature 'A'..'Z' first: optional)
    trailer     hash of everything before it (all zeros when index.skipHash is set)

What pcheckout needs is the entries: :func:`read_index` keeps of the optional
extensions only the payloads a switch carries on (TREE, UNTR, FSMN) and skips the rest
(REUC, EOIE, IEOT, ...), and :func:`write_index` writes none, which git accepts (it
rebuilds the cache tree when it needs one); :func:`encode_rows` appends those it is
given (``git/splitindex.py``).

A split index (``link``: the shared index's checksum, then the delete and replace
EWAH bitmaps, ``git/ewah.py``) is read as split-index.c merge_base_index reads it:
the entries of the shared index ``<git dir>/sharedindex.<hex>``, those the delete
bitmap names removed, those the replace bitmap names replaced by the first entries
here (whose paths are empty), the rest added; ``Index.split`` keeps what writing
it again needs.  A sparse index (``sdir``) is read with its sparse-directory
entries as they are (mode 040000, path ending in "/", the directory's tree id,
skip-worktree; ``Index.sparse`` is set) for the caller to expand
(``pcheckout.git.sparse``); :func:`encode_rows` writes the empty ``sdir`` marker
when asked (``sparse_directories=True``).

Speed: a checkout writes 100k+ entries, so the encoder packs each entry with one
precompiled :class:`struct.Struct` call into one list joined once and hashes once,
and the decoder builds entries without the per-field ``object.__setattr__`` that a
frozen dataclass ``__init__`` pays (see :func:`_entry_factory`).  A switch writes
back the entries it kept as the file stored them (:func:`encoded_index_pieces`).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, NamedTuple

from pcheckout.errors import (
    CorruptIndexError,
    IndexFileError,
    IndexLockError,
    UnsupportedIndexError,
    WriteError,
    decode,
    quote_path,
    unable_to_lock_message,
)
from pcheckout.fdio import Data, write_each
from pcheckout.git import ewah
from pcheckout.git.indexformat import (
    ENTRY_ALIGN,
    FIXED,
    FLAG_EXTENDED,
    FLAG_NAME_MASK,
    FLAG_STAGE_MASK,
    FLAG_STAGE_SHIFT,
    HASH_SIZES,
    HEADER,
    SIGNATURE,
    SUPPORTED_VERSIONS,
    encode_varint,
    read_header,
    walk_entries,
)
from pcheckout.git.indexformat import EXT_FLAG_INTENT_TO_ADD as EXT_FLAG_INTENT_TO_ADD
from pcheckout.git.indexformat import EXT_FLAG_SKIP_WORKTREE as EXT_FLAG_SKIP_WORKTREE

__all__ = [
    "CorruptIndexError",
    "Encoding",
    "Index",
    "IndexEntry",
    "IndexFileError",
    "IndexLockError",
    "SplitIndex",
    "UnsupportedIndexError",
    "decode_index",
    "encode_index",
    "encoded_index_pieces",
    "read_index",
    "sort_key",
    "unmerged",
    "write_index",
]

# --- format constants (gitformat-index.txt; cache.h / read-cache.c in git) -------------------
#: 16-bit flags word: assume-valid, extended, 2-bit stage, 12-bit name length (cache.h CE_*);
#: the layout and the walk over the entries are git/indexformat.py's
FLAG_ASSUME_VALID = 0x8000
#: flag bits an IndexEntry keeps; name length and the extended bit are derived on write
ENTRY_FLAG_BITS = FLAG_ASSUME_VALID | FLAG_STAGE_MASK
#: a sparse-directory entry's mode (sparse-index.c construct_sparse_dir_entry(): S_IFDIR)
MODE_SPARSE_DIR = 0o040000
#: extensions git must understand to read the index correctly (lowercase first byte)
EXT_SPLIT_INDEX = b"link"
EXT_SPARSE_DIRECTORIES = b"sdir"
EXT_UNTRACKED = b"UNTR"
EXT_FSMONITOR = b"FSMN"
EXT_CACHE_TREE = b"TREE"
EXT_HEADER = struct.Struct(">4sI")
U32_MASK = 0xFFFFFFFF
NS_PER_S = 1_000_000_000


StatFields = tuple[int, int, int, int, int, int, int, int, int]
#: The stat data of an entry that has no file behind it (a skip-worktree or sparse-directory
#: entry, a temporary index's): all zero, as git records it.
NO_STAT: StatFields = (0, 0, 0, 0, 0, 0, 0, 0, 0)
#: A file's stat data as lstat gives it: ctime and mtime in ns, dev, ino, uid, gid, size
#: (``fs.files.StatData`` is one)
StatData = tuple[int, int, int, int, int, int, int]


def stat_fields(st: StatData) -> StatFields:
    """``(ctime_s, ctime_ns, mtime_s, mtime_ns, dev, ino, uid, gid, size)`` as the
    index stores them: truncated to 32 bits like git's fill_stat_data()
    (``(unsigned int)st_mtime``, ``st_mtim.tv_nsec``, ...).  The one place stat
    data becomes index fields."""
    ctime_ns, mtime_ns, dev, ino, uid, gid, size = st
    c_s, c_ns = divmod(ctime_ns, NS_PER_S)
    m_s, m_ns = divmod(mtime_ns, NS_PER_S)
    return (
        c_s & U32_MASK,
        c_ns,
        m_s & U32_MASK,
        m_ns,
        dev & U32_MASK,
        ino & U32_MASK,
        uid & U32_MASK,
        gid & U32_MASK,
        size & U32_MASK,
    )


def fields_of_stat(st: os.stat_result) -> StatFields:
    """:func:`stat_fields` of an ``os.stat_result``."""
    return stat_fields(
        (st.st_ctime_ns, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_uid, st.st_gid, st.st_size)
    )


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One index entry.  ``flags`` keeps only assume-valid (0x8000) and the stage
    (0x3000); the name length and the extended bit are derived when writing.
    ``extended_flags`` is the on-disk v3 word (0x4000 skip-worktree, 0x2000
    intent-to-add).  All stat fields are unsigned 32-bit, as git stores them."""

    path: bytes
    mode: int  # 0o100644, 0o100755, 0o120000, 0o160000
    oid: bytes  # raw binary object id (20 bytes sha1, 32 bytes sha256)
    ctime_s: int
    ctime_ns: int
    mtime_s: int
    mtime_ns: int
    dev: int
    ino: int
    uid: int
    gid: int
    size: int
    flags: int = 0
    extended_flags: int = 0

    @classmethod
    def from_stat(cls, path: bytes, mode: int, oid: bytes, st: os.stat_result) -> IndexEntry:
        """An entry carrying ``st``'s stat data (see :func:`stat_fields`)."""
        c_s, c_ns, m_s, m_ns, dev, ino, uid, gid, size = fields_of_stat(st)
        return cls(path, mode, oid, c_s, c_ns, m_s, m_ns, dev, ino, uid, gid, size)

    @property
    def stage(self) -> int:
        return (self.flags & FLAG_STAGE_MASK) >> FLAG_STAGE_SHIFT


@dataclass(frozen=True)
class SplitIndex:
    """What a split index's ``link`` extension tied it to (split-index.c)."""

    base_oid: bytes  # the shared index's checksum (``sharedindex.<hex>``); zeros: none yet
    base: tuple[IndexEntry, ...] = ()  # the shared index's entries, in its order
    #: (path, stage) of each merged entry still tied to an entry of ``base`` -> its position
    linked: Mapping[tuple[bytes, int], int] = field(default_factory=dict)
    #: positions of ``base`` replaced by an entry of the index itself: git writes them as
    #: replacements again, changed or not (CE_UPDATE_IN_BASE stays set)
    replaced: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Index:
    version: int
    entries: tuple[IndexEntry, ...]
    hash_name: str  # "sha1" | "sha256"
    sparse: bool = False  # had the "sdir" extension: may hold sparse-directory entries
    split: SplitIndex | None = None  # had the "link" extension: a split index, merged
    untracked: bytes | None = None  # the "UNTR" extension's payload (git/untracked.py)
    fsmonitor: bytes | None = None  # the "FSMN" extension's payload (git/fsmonitor.py)
    cache_tree: bytes | None = None  # the "TREE" extension's payload (git/cachetree.py)
    #: the file's bytes where its entries can be written again as they are stored
    #: (:func:`encoded_index_pieces`' ``source``): version 2 or 3, not split, each entry
    #: as git's writer stores it; else empty
    data: bytes = field(default=b"", repr=False, compare=False)


def unmerged(entries: Iterable[IndexEntry]) -> bool:
    """Whether some entry has a stage (a conflict): the flags, not :attr:`IndexEntry.stage`
    (a property: 22 ms against 8 over 250,000 entries)."""
    mask = FLAG_STAGE_MASK
    return any(e.flags & mask for e in entries)


def sort_key(entry: IndexEntry) -> tuple[bytes, int]:
    """git's index order: path bytes (memcmp), then stage."""
    return entry.path, (entry.flags & FLAG_STAGE_MASK) >> FLAG_STAGE_SHIFT


# --- helpers ------------------------------------------------------------------------------

_by_path = attrgetter("path")
_stat_fields = attrgetter(
    "ctime_s", "ctime_ns", "mtime_s", "mtime_ns", "dev", "ino", "mode", "uid", "gid", "size", "oid"
)
#: FIXED for ZeroStatFields: six zero words, mode, three zero words, oid, flags
_ZERO_STAT = {name: struct.Struct(f">24xI12x{size}sH") for name, size in HASH_SIZES.items()}
_EXT_WORD = struct.Struct(">H")
_PADDING = tuple(b"\0" * (ENTRY_ALIGN - r) for r in range(ENTRY_ALIGN))


def _hash_size(hash_name: str) -> int:
    try:
        return HASH_SIZES[hash_name]
    except KeyError:
        raise UnsupportedIndexError(f"unknown object hash {hash_name!r}") from None


_SMALL_VARINTS = tuple(encode_varint(i) for i in range(0x80))


class _EntryBuilder:
    """Same slot layout as IndexEntry, without the frozen ``__setattr__``.

    A frozen dataclass ``__init__`` calls ``object.__setattr__`` once per field,
    which makes building 100k entries cost ~0.15 s.  The reader instead fills one
    of these with plain (specialised) slot stores, from an entry's fixed part as the
    walk read it (``indexformat.FIXED``: the stat words, the oid, the flags word), and
    turns it into an IndexEntry by ``__class__`` assignment, which CPython allows
    between classes with identical slot layouts.  The result is an ordinary IndexEntry
    (there is no ``__post_init__`` to skip); :func:`_entry_factory` checks at import
    time that the trick works and otherwise falls back to the dataclass constructor."""

    __slots__ = IndexEntry.__slots__

    def __init__(self, path: bytes, fixed: tuple[Any, ...], extended_flags: int) -> None:
        (
            self.ctime_s,
            self.ctime_ns,
            self.mtime_s,
            self.mtime_ns,
            self.dev,
            self.ino,
            self.mode,
            self.uid,
            self.gid,
            self.size,
            self.oid,
            flags,
        ) = fixed
        self.path = path
        self.flags = flags & ENTRY_FLAG_BITS
        self.extended_flags = extended_flags
        self.__class__ = IndexEntry  # type: ignore[assignment]


def _dataclass_entry(path: bytes, fixed: tuple[Any, ...], extended_flags: int) -> IndexEntry:
    """What :class:`_EntryBuilder` makes, by the dataclass constructor."""
    cs, cn, ms, mn, dev, ino, mode, uid, gid, size, oid, flags = fixed
    return IndexEntry(
        path,
        mode,
        oid,
        cs,
        cn,
        ms,
        mn,
        dev,
        ino,
        uid,
        gid,
        size,
        flags & ENTRY_FLAG_BITS,
        extended_flags,
    )


def _entry_factory() -> Callable[[bytes, tuple[Any, ...], int], IndexEntry]:
    """_EntryBuilder if ``__class__`` assignment works here, else the dataclass."""
    fixed = (1, 2, 3, 4, 5, 6, 0o100644, 7, 8, 9, b"o", 0x1000)
    try:
        probe: object = _EntryBuilder(b"p", fixed, 0x4000)
    except TypeError:  # pragma: no cover - another Python or a changed IndexEntry layout
        return _dataclass_entry
    if type(probe) is not IndexEntry or probe != _dataclass_entry(b"p", fixed, 0x4000):
        return _dataclass_entry  # pragma: no cover
    # An _EntryBuilder is an IndexEntry once built (probed above).
    return _EntryBuilder  # type: ignore[return-value]


_make_entry = _entry_factory()


# --- encoding -----------------------------------------------------------------------------


def _check_conflicts(ordered: list[IndexEntry]) -> list[IndexEntry]:
    """Order entries sharing a path by stage and refuse what git's check_ce_order refuses."""
    ordered = sorted(ordered, key=sort_key)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if a.path != b.path:
            continue
        sa, sb = sort_key(a)[1], sort_key(b)[1]
        if sa == sb:
            raise CorruptIndexError(f"duplicate index entry for {quote_path(a.path)} (stage {sa})")
        if sa == 0:
            raise CorruptIndexError(
                f"index entry {quote_path(a.path)} is both merged (stage 0) and unmerged"
            )
    return ordered


#: One entry as the encoder sees it: (path, the 11 fixed fields ending with the
#: raw oid, flags, extended flags).  The checkout builds these straight from its
#: tree entries and packed stat data, so no IndexEntry objects are made for a
#: fresh checkout (100k of them cost ~36 MB of RSS, measured).
#: The fixed fields of one entry in on-disk order: ctime s/ns, mtime s/ns, dev, ino,
#: mode, uid, gid, size, then the raw object id.
Fields = tuple[int, int, int, int, int, int, int, int, int, int, bytes]
#: The fixed fields of an entry with all-zero stat data (a skip-worktree entry, as git
#: records one) given as just (mode, raw oid): packed at a third of the cost, which
#: counts where most of a sparse checkout's entries are outside its cone.
ZeroStatFields = tuple[int, bytes]
#: What the encoder takes per entry: path, fixed fields, flags, extended flags.
Row = tuple[bytes, "Fields | ZeroStatFields", int, int]


def _rows(entries: Iterable[IndexEntry]) -> Iterator[Row]:
    get = _stat_fields
    for e in entries:
        yield e.path, get(e), e.flags, e.extended_flags


def encoded_index_pieces(
    entries: Sequence[IndexEntry],
    *,
    version: int = 2,
    hash_name: str = "sha1",
    skip_hash: bool = False,
    extensions: bytes = b"",
    source: Index | None = None,
) -> Iterator[bytearray]:
    """:func:`encode_index`'s bytes, a piece at a time (:func:`encoded_pieces`).  The
    entries of ``source`` (the index read, if its :attr:`Index.data` is kept) that come
    back unchanged, the very objects read, are copied as they are stored, a run of them
    at a time: at 250,000 entries a switch keeps all but a few hundred, and encoding
    each again was most of its index's writing."""
    how = Encoding(version, hash_name, skip_hash=skip_hash, extensions=extensions)
    ordered, how = _ordered(entries, how)
    if unmerged(ordered):  # (stages: ordered and checked whole)
        yield _encoded(ordered, how)
        return
    rows: Iterable[Row | _Stored] = _rows(ordered)
    if source is not None and source.data and version != 4 and source.hash_name == hash_name:
        rows = _spliced(ordered, source)
    try:
        yield from encoded_pieces(rows, len(ordered), how)
    except _SamePath:
        _check_conflicts(ordered)  # (raises: two entries of one path and stage)
        raise  # pragma: no cover - _check_conflicts found what _SamePath saw


class _Stored(NamedTuple):
    """A run of entries copied from the index read, as stored (:func:`_spliced`)."""

    first: bytes  # the first one's path
    last: bytes  # the last one's path
    data: memoryview
    number: int  # of entries


def _spliced(ordered: list[IndexEntry], source: Index) -> Iterator[Row | _Stored]:
    """The rows of ``ordered`` (sorted, no stages), where one is an entry of ``source``
    itself a run of them copied from ``source.data``.  Both are in index order, so one
    walk finds the runs: the entries of ``source`` that are not kept are stepped over
    (their stored length known from their path and extended flags)."""
    read = source.entries
    data = memoryview(source.data)
    n = len(read)
    base = FIXED[source.hash_name].size + ENTRY_ALIGN
    ext_base = base + 2
    mask = ~(ENTRY_ALIGN - 1)
    get = _stat_fields
    k, off = 0, HEADER.size
    run, run_off = -1, 0
    for e in ordered:
        if k < n and read[k] is not e:
            if run >= 0:
                yield _Stored(read[run].path, read[k - 1].path, data[run_off:off], k - run)
                run = -1
            p = e.path
            while k < n and read[k].path <= p and read[k] is not e:  # (not kept: stepped over)
                r = read[k]
                off += ((ext_base if r.extended_flags else base) + len(r.path)) & mask
                k += 1
        if k < n and read[k] is e:
            if run < 0:
                run, run_off = k, off
            off += ((ext_base if e.extended_flags else base) + len(e.path)) & mask
            k += 1
            continue
        if run >= 0:  # (k == n: the source's entries are all behind)
            yield _Stored(read[run].path, read[k - 1].path, data[run_off:off], k - run)
            run = -1
        yield e.path, get(e), e.flags, e.extended_flags
    if run >= 0:
        yield _Stored(read[run].path, read[k - 1].path, data[run_off:off], k - run)


def encode_index(
    entries: Sequence[IndexEntry],
    *,
    version: int = 2,
    hash_name: str = "sha1",
    skip_hash: bool = False,
    extensions: bytes = b"",
    sparse_directories: bool = False,
) -> bytes:
    """The bytes of an index holding ``entries`` (in any order), then ``extensions`` (and
    the ``sdir`` extension of a sparse index if ``sparse_directories``); see
    :func:`write_index`."""
    how = Encoding(
        version,
        hash_name,
        skip_hash=skip_hash,
        sparse_directories=sparse_directories,
        extensions=extensions,
    )
    return bytes(_encoded(*_ordered(entries, how)))


def _ordered(entries: Sequence[IndexEntry], how: Encoding) -> tuple[list[IndexEntry], Encoding]:
    """``entries`` in index order by path (C-speed key; stages are fixed by
    :func:`_encoded` if needed), checked, and ``how`` told whether any has extended flags."""
    _check_version(how.version)
    ordered = sorted(entries, key=_by_path)
    if ordered and not ordered[0].path:  # (empty paths are a split index's replacements)
        raise _bad_row(b"", ordered[0].oid, _hash_size(how.hash_name))
    return ordered, how._replace(extended=any(e.extended_flags for e in ordered))


def _encoded(ordered: list[IndexEntry], how: Encoding) -> bytearray:
    """The index of ``ordered`` (:func:`_ordered`), entries of one path ordered by stage."""
    try:
        return encode_rows(_rows(ordered), len(ordered), how)
    except _SamePath:
        ordered = _check_conflicts(ordered)
        return encode_rows(_rows(ordered), len(ordered), how._replace(allow_same_path=True))


def _check_version(version: int) -> None:
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedIndexError(f"cannot write index version {version} (supported: 2, 3, 4)")


class _SamePath(Exception):
    """Two entries share a path (merge stages, or a caller's duplicate)."""


def _bad_row(path: object, oid: object, rawsz: int) -> CorruptIndexError:
    where = quote_path(path) if isinstance(path, bytes) else repr(path)
    if not isinstance(path, bytes) or not path or b"\0" in path:
        return CorruptIndexError(f"invalid index entry path {where}")
    if not isinstance(oid, bytes) or len(oid) != rawsz:
        return CorruptIndexError(f"index entry {where}: object id is not {rawsz} bytes")
    return CorruptIndexError(f"index entry {where}: a field does not fit in 32 (16) bits")


class Encoding(NamedTuple):
    """How :func:`encode_rows` writes an index."""

    version: int = 2
    hash_name: str = "sha1"
    #: whether some row has extended flags: git writes v3 only then ("demote version 3
    #: to version 2 when the latter suffices")
    extended: bool = False
    skip_hash: bool = False  # an all-zero trailer (index.skipHash)
    #: rows may share a path (merge stages) or have none (a split index's replacements)
    allow_same_path: bool = False
    #: end with the empty ``sdir`` extension that marks a sparse index (read-cache.c
    #: write_index_ext_header(CACHE_EXT_SPARSE_DIRECTORIES)), after ``extensions``
    sparse_directories: bool = False
    extensions: bytes = b""  # headers and data, after the entries


#: Bytes of an encoded index handed on at a time by :func:`encoded_pieces` (at 250,000
#: entries the index encoded whole was 42 MiB, held at the end of the run: its peak).
INDEX_PIECE = 1 << 20
#: Rows encoded between two looks at the piece's size.
_ROWS_PER_LOOK = 1 << 10


def encode_rows(rows: Iterable[Row], count: int, how: Encoding) -> bytearray:
    """Header, entries and trailer for ``count`` rows already in index order, written
    as ``how`` says, in one bytearray."""
    pieces = encoded_pieces(rows, count, how)
    buf = next(pieces)
    for piece in pieces:
        buf += piece
    return buf


def encoded_pieces(rows: Iterable[Row | _Stored], count: int, how: Encoding) -> Iterator[bytearray]:
    """:func:`encode_rows`'s bytes, a piece of about :data:`INDEX_PIECE` bytes at a time
    (hashed as they go), for a caller that writes them as they come; a bad row raises
    where it is met, after the pieces before it."""
    version, hash_name, extended, skip_hash, allow_same_path, sparse_directories, extensions = how
    _check_version(version)
    rawsz = _hash_size(hash_name)
    if version in (2, 3):
        version = 3 if extended else 2
    fixed = FIXED[hash_name]
    fixed_size = fixed.size
    pack = fixed.pack
    pack_zero = _ZERO_STAT[hash_name].pack
    pack_ext = _EXT_WORD.pack
    pad = _PADDING
    varints = _SMALL_VARINTS
    align_mask = ENTRY_ALIGN - 1
    keep, name_mask = ENTRY_FLAG_BITS, FLAG_NAME_MASK
    v4 = version == 4
    from_bytes = int.from_bytes
    buf = bytearray(HEADER.pack(SIGNATURE, version, count))
    trailer = None if skip_hash else hashlib.new(hash_name)
    prev = b""
    written = 0
    for row in rows:
        if isinstance(row, _Stored):  # a run copied as stored (_spliced)
            first, last, stored, k = row
            if first == prev and not allow_same_path:
                raise _SamePath
            prev = last
            buf += stored
            written += k
            if len(buf) >= INDEX_PIECE:
                if trailer is not None:
                    trailer.update(buf)
                yield buf
                buf = bytearray()
            continue
        p, fields, eflags, ext = row
        n = len(p)
        if p == prev and not allow_same_path:
            raise _SamePath
        oid = fields[-1]
        if (not n and not allow_same_path) or len(oid) != rawsz or b"\0" in p:
            raise _bad_row(p, oid, rawsz)
        flags = (eflags & keep) | (n if n < name_mask else name_mask)
        try:
            if len(fields) == 2:  # ZeroStatFields
                buf += pack_zero(fields[0], oid, flags | FLAG_EXTENDED if ext else flags)
                if ext:
                    buf += pack_ext(ext)
            elif ext:
                buf += pack(*fields, flags | FLAG_EXTENDED)
                buf += pack_ext(ext)
            else:
                buf += pack(*fields, flags)
        except struct.error:
            raise _bad_row(p, oid, rawsz) from None
        if v4:  # common prefix with prev: the first differing byte is the top bit of a XOR
            m = len(prev) if len(prev) < n else n
            common = (
                m - ((from_bytes(prev[:m], "big") ^ from_bytes(p[:m], "big")).bit_length() + 7) // 8
            )
            drop = len(prev) - common
            buf += varints[drop] if drop < 0x80 else encode_varint(drop)
            buf += p[common:]
            buf += b"\0"
        else:
            buf += p
            buf += pad[(fixed_size + (2 if ext else 0) + n) & align_mask]
        prev = p
        written += 1
        if not written % _ROWS_PER_LOOK and len(buf) >= INDEX_PIECE:
            if trailer is not None:
                trailer.update(buf)
            yield buf
            buf = bytearray()
    if written != count:
        raise CorruptIndexError(f"index: {written} entries written, {count} announced")
    buf += extensions
    if sparse_directories:
        buf += EXT_HEADER.pack(EXT_SPARSE_DIRECTORIES, 0)
    if trailer is None:
        buf += bytes(rawsz)
    else:
        trailer.update(buf)
        buf += trailer.digest()
    yield buf


# --- writing with git's lock protocol -----------------------------------------------------


def write_index(
    path: str | bytes | os.PathLike[str] | os.PathLike[bytes],
    entries: Sequence[IndexEntry],
    *,
    version: int = 2,
    hash_name: str = "sha1",
    skip_hash: bool = False,
) -> None:
    """Write ``entries`` (sorted here by :func:`sort_key`) as the index at ``path``.

    Like git: ``<path>.lock`` is created with O_CREAT|O_EXCL (an existing lock is an
    :class:`IndexLockError`), filled, then renamed over ``path``.  The lock is
    removed on any failure, KeyboardInterrupt included, and ``path`` is untouched.
    ``version`` 2 or 3 writes v3 only if some entry has extended flags (as git
    does); 4 uses path prefix compression.  ``skip_hash`` writes an all-zero
    trailer (git's ``index.skipHash``).  Extensions are never written."""
    data = encode_index(entries, version=version, hash_name=hash_name, skip_hash=skip_hash)
    write_index_bytes(path, data)


def write_index_bytes(
    path: str | bytes | os.PathLike[str] | os.PathLike[bytes], data: Data | Iterator[Data]
) -> None:
    """Put already-encoded index ``data`` (or its pieces, :func:`encoded_pieces`) at
    ``path`` through ``<path>.lock``."""
    target = os.fsencode(path)
    lock = target + b".lock"
    try:
        fd = os.open(
            lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666
        )
    except FileExistsError:
        raise IndexLockError(unable_to_lock_message(lock), lock) from None
    except OSError as exc:
        raise WriteError(lock, exc) from exc
    try:
        try:
            write_each(fd, data)
        finally:
            os.close(fd)
        os.replace(lock, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        if isinstance(exc, OSError):
            raise WriteError(lock, exc) from exc
        raise


# --- reading ------------------------------------------------------------------------------


def read_index(
    path: str | bytes | os.PathLike[str] | os.PathLike[bytes],
    *,
    hash_name: str | None = None,
    git_dir: str | bytes | os.PathLike[str] | os.PathLike[bytes] | None = None,
) -> Index:
    """Parse the index at ``path`` (v2/v3/v4), verifying its trailing checksum.

    The object hash is detected from the checksum unless ``hash_name`` is given
    (with an all-zero skipHash trailer, from which layout parses).  Optional
    extensions are skipped; a split index is merged with its shared index in
    ``git_dir`` (by default the index's directory, as for ``.git/index``); a sparse
    index comes back with ``sparse=True`` and its sparse-directory entries."""
    fpath = os.fsencode(path)
    data = _read_file(fpath, "index")
    shared_dir = os.fsencode(git_dir) if git_dir is not None else os.path.dirname(fpath)
    return decode_index(data, hash_name=hash_name, path=fpath, git_dir=shared_dir)


def _read_file(fpath: bytes, what: str) -> bytes:
    try:
        with open(fpath, "rb") as f:
            return f.read()
    except OSError as exc:
        raise IndexFileError(
            f"cannot read {what} {quote_path(fpath)}: {exc.strerror or exc}", fpath, exc.errno
        ) from exc


def decode_index(
    data: bytes, *, hash_name: str | None = None, path: bytes = b"index", git_dir: bytes = b"."
) -> Index:
    """Parse index bytes; see :func:`read_index` (a split index's shared index is read
    from ``git_dir``)."""
    index, link = _decode(data, hash_name, path)
    if link is None:
        return index
    return _merge_split(index, link, git_dir, path)


def _decode(data: bytes, hash_name: str | None, path: bytes) -> tuple[Index, _Link | None]:
    where = quote_path(path)
    version, count = read_header(data, path)
    candidates = [hash_name] if hash_name else list(HASH_SIZES)
    for name in candidates:
        _hash_size(name)
    verified = [
        n
        for n in candidates
        if len(data) >= HEADER.size + HASH_SIZES[n]
        and data[-HASH_SIZES[n] :] == hashlib.new(n, data[: -HASH_SIZES[n]]).digest()
    ]
    if verified:
        return _parse(data, version, count, verified[0], path)
    skipped = [
        n
        for n in candidates
        if len(data) >= HEADER.size + HASH_SIZES[n] and not any(data[-HASH_SIZES[n] :])
    ]
    if not skipped:
        raise CorruptIndexError(f"{where}: bad index file checksum", path)
    error: IndexFileError | None = None
    for name in skipped:  # index.skipHash: nothing to verify, the layout must fit
        try:
            return _parse(data, version, count, name, path)
        except CorruptIndexError as exc:
            error = error or exc
    assert error is not None
    raise error


class _Link(NamedTuple):
    """A ``link`` extension as stored: the shared index's checksum, the bitmaps."""

    base_oid: bytes
    delete: list[int]
    replace: list[int]


def _read_link(data: bytes, rawsz: int, where: str, path: bytes) -> _Link:
    """split-index.c read_link_extension."""
    if len(data) < rawsz:
        raise CorruptIndexError(f"{where}: corrupt link extension (too short)", path)
    if len(data) == rawsz:
        return _Link(data, [], [])
    try:
        delete, used = ewah.decode(data, rawsz)
        replace, used2 = ewah.decode(data, rawsz + used)
    except ewah.EwahError:
        raise CorruptIndexError(f"{where}: corrupt bitmap in link extension", path) from None
    if rawsz + used + used2 != len(data):
        raise CorruptIndexError(f"{where}: garbage at the end of link extension", path)
    return _Link(data[:rawsz], delete, replace)


def _merge_split(index: Index, link: _Link, git_dir: bytes, path: bytes) -> Index:
    """The entries git reads from a split index (split-index.c merge_base_index)."""
    where = quote_path(path)
    if not any(link.base_oid):  # no shared index (yet): every entry is here
        return replace(index, split=SplitIndex(link.base_oid))
    shared_path = os.path.join(git_dir, b"sharedindex." + link.base_oid.hex().encode())
    data = _read_file(shared_path, "shared index")
    base, _ = _decode(data, index.hash_name, shared_path)
    if data[-len(link.base_oid) :] != link.base_oid:
        raise CorruptIndexError(
            f"broken index, expect {link.base_oid.hex()} in {quote_path(shared_path)}", path
        )
    shared = list(base.entries)
    merged: list[IndexEntry | None] = list(shared)
    own = index.entries
    if len(link.replace) > len(own) or any(p >= len(shared) for p in link.delete + link.replace):
        raise CorruptIndexError(f"{where}: corrupt link extension (bitmap out of range)", path)
    replaced = set(link.replace)
    for k, pos in enumerate(link.replace):
        if own[k].path:
            raise CorruptIndexError(f"{where}: corrupt link extension, entry {pos}", path)
        merged[pos] = replace(own[k], path=shared[pos].path)
    for pos in link.delete:
        if pos in link.replace:
            raise CorruptIndexError(f"{where}: entry {pos} both replaced and deleted", path)
        merged[pos] = None
    table = {
        sort_key(e): (e, pos) for pos, e in enumerate(merged) if e is not None
    }  # (path, stage) -> (entry, its position in the shared index)
    for e in own[len(link.replace) :]:
        if not e.path:
            raise CorruptIndexError(f"{where}: index entry with an empty path", path)
        key = sort_key(e)
        if e.stage == 0:  # a merged entry replaces every stage of its path
            for stage in (1, 2, 3):
                table.pop((e.path, stage), None)
        was = table.get(key)
        table[key] = (e, was[1] if was is not None else -1)
        if was is not None and was[1] >= 0:  # replace_index_entry: CE_UPDATE_IN_BASE
            replaced.add(was[1])
    keys = sorted(table)
    linked = {k: table[k][1] for k in keys if table[k][1] >= 0}
    split = SplitIndex(link.base_oid, base.entries, linked, frozenset(replaced))
    return replace(index, entries=tuple(table[k][0] for k in keys), split=split)


def _parse(
    data: bytes, version: int, count: int, hash_name: str, path: bytes
) -> tuple[Index, _Link | None]:
    # 100k new GC-tracked objects trigger ~20% worth of pointless collections: none
    # of them can be garbage yet.  Pausing the collector only delays it.
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _parse_entries(data, version, count, hash_name, path)
    finally:
        if paused:
            gc.enable()


def _parse_entries(
    data: bytes, version: int, count: int, hash_name: str, path: bytes
) -> tuple[Index, _Link | None]:
    """The entries (``indexformat.walk_entries``, made IndexEntry objects), then the
    extensions."""
    walk = walk_entries(data, version, count, hash_name, path)
    entries = tuple(map(_make_entry, walk.names, walk.fixed, walk.extended))
    found = _extensions(data, walk.end, HASH_SIZES[hash_name], path)
    if walk.empty and found.link is None:
        raise CorruptIndexError(f"{quote_path(path)}: index entry with an empty path", path)
    reusable = version in (2, 3) and walk.canonical and found.link is None
    index = Index(
        version,
        entries,
        hash_name,
        found.sparse,
        untracked=found.untracked,
        fsmonitor=found.fsmonitor,
        cache_tree=found.cache_tree,
        data=data if reusable else b"",
    )
    return index, found.link


class _Found(NamedTuple):
    """What pcheckout reads of an index's extensions."""

    sparse: bool = False  # "sdir": sparse-directory entries may be there
    link: _Link | None = None  # a split index's "link"
    untracked: bytes | None = None  # the "UNTR" payload
    fsmonitor: bytes | None = None  # the "FSMN" payload
    cache_tree: bytes | None = None  # the "TREE" payload


def _extensions(data: bytes, off: int, rawsz: int, path: bytes) -> _Found:
    """Whether the index is sparse (``sdir``), its ``link`` extension if split, its
    ``UNTR``, ``FSMN`` and ``TREE`` payloads if any; the other optional extensions skipped, a
    required one pcheckout does not know refused."""
    where = quote_path(path)
    end = len(data) - rawsz
    found = _Found()
    while off < end:
        if end - off < EXT_HEADER.size:
            raise CorruptIndexError(f"{where}: truncated index extension", path)
        sig, size = EXT_HEADER.unpack_from(data, off)
        body = off + EXT_HEADER.size
        if sig == EXT_SPLIT_INDEX:
            found = found._replace(link=_read_link(data[body : body + size], rawsz, where, path))
        elif sig == EXT_SPARSE_DIRECTORIES:
            found = found._replace(sparse=True)
        elif sig == EXT_UNTRACKED:
            found = found._replace(untracked=data[body : body + size])
        elif sig == EXT_FSMONITOR:
            found = found._replace(fsmonitor=data[body : body + size])
        elif sig == EXT_CACHE_TREE:
            found = found._replace(cache_tree=data[body : body + size])
        elif not 0x41 <= sig[0] <= 0x5A:  # 'A'..'Z': optional, anything else is required
            raise UnsupportedIndexError(
                f"{where}: index uses extension {decode(sig)!r}, which pcheckout does not support",
                path,
            )
        off += EXT_HEADER.size + size
    if off != end:
        raise CorruptIndexError(f"{where}: truncated index extension", path)
    return found
