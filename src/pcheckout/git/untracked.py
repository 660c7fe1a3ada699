"""The untracked cache (the index's ``UNTR`` extension) as git keeps it across a checkout.

With ``core.untrackedCache=true`` (or ``feature.manyFiles``) git's checkout keeps the
cache it read, the directories of every path whose index entry changed invalidated
(unpack-trees.c ``invalidate_ce_path`` -> dir.c ``untracked_cache_invalidate_path``), or
starts an empty one where the index had none; with ``core.untrackedCache=false`` it drops
it; unset (or ``keep``) it keeps what it read (read-cache.c ``tweak_untracked_cache``).

On disk (dir.c ``write_untracked_extension``; ``read_untracked_extension`` reads it)::

    varint ident length | ident (``Location <work tree>, system <sysname>`` NUL)
    2 x stat data (36 bytes: info/exclude, core.excludesFile) | u32 dir flags
    2 x object id (their contents) | exclude-per-dir name NUL
    [varint directory count | the directories, depth first:
       varint untracked count | varint subdirectory count | name NUL | untracked names NUL
     EWAH valid | EWAH check-only | EWAH exclude-id valid
     stat data of each valid directory | exclude id of each directory with one]
    NUL

Only what a checkout changes is interpreted: the header is kept as read, a directory's
stat data and exclude id as stored.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pcheckout.errors import GitError
from pcheckout.git import ewah
from pcheckout.git.config import config_bool, parse_bool
from pcheckout.git.indexformat import decode_varint, encode_varint

__all__ = ["Cache", "after_checkout", "decode", "encode", "setting"]

#: the extension's signature
SIGNATURE = b"UNTR"
#: dir.h DIR_SHOW_OTHER_DIRECTORIES: an invalidated path invalidates its parents too
SHOW_OTHER_DIRECTORIES = 1 << 1
#: dir.h DIR_HIDE_EMPTY_DIRECTORIES
HIDE_EMPTY_DIRECTORIES = 1 << 2
STAT_DATA = 36  # struct stat_data on disk: 9 x u32


@dataclass
class Dir:
    """One directory of the cache (dir.h ``struct untracked_cache_dir``)."""

    name: bytes
    untracked: list[bytes]
    dirs: list[Dir]
    valid: bool = False
    check_only: bool = False
    stat: bytes = b""  # its stat data, where valid
    exclude_oid: bytes = b""  # its .gitignore's id, where known
    by_name: dict[bytes, Dir] = field(default_factory=dict, repr=False)


@dataclass
class Cache:
    """An untracked cache: the header as read, its flags, its directories."""

    header: bytes  # everything before the directories, as stored
    ident: bytes
    dir_flags: int
    root: Dir | None


def decode(data: bytes, rawsz: int) -> Cache | None:
    """The cache stored in ``data`` (the extension's payload), or None where git's
    ``read_untracked_extension`` rejects it (git then has no cache)."""
    try:
        return _decode(data, rawsz)
    except (IndexError, ValueError, ewah.EwahError):
        return None


def _decode(data: bytes, rawsz: int) -> Cache | None:
    if len(data) <= 1 or data[-1] != 0:
        return None
    end = len(data) - 1
    ident_len, off = decode_varint(data, 0)
    if off + ident_len > end:
        return None
    ident = data[off : off + ident_len]
    off += ident_len
    fixed = 2 * STAT_DATA + 4 + 2 * rawsz
    if off + fixed + 1 > end:
        return None
    dir_flags = int.from_bytes(data[off + 2 * STAT_DATA : off + 2 * STAT_DATA + 4], "big")
    nul = data.index(b"\0", off + fixed)
    off = nul + 1
    header = data[:off]
    if off >= end:
        return Cache(header, ident, dir_flags, None) if off == end else None
    count, off = decode_varint(data, off)
    if off > end or count == 0:
        return Cache(header, ident, dir_flags, None) if off == end else None
    order: list[Dir] = []

    def read_one(off: int) -> tuple[Dir, int]:
        n_untracked, off = decode_varint(data, off)
        n_dirs, off = decode_varint(data, off)
        if off > end:
            raise ValueError("truncated")
        eos = data.find(b"\0", off, end)
        if eos < 0:
            raise ValueError("unterminated name")
        d = Dir(data[off:eos], [], [])
        off = eos + 1
        for _ in range(n_untracked):
            eos = data.find(b"\0", off, end)
            if eos < 0:
                raise ValueError("unterminated name")
            d.untracked.append(data[off:eos])
            off = eos + 1
        order.append(d)
        for _ in range(n_dirs):
            sub, off = read_one(off)
            d.dirs.append(sub)
            d.by_name.setdefault(sub.name, sub)
        return d, off

    root, off = read_one(off)
    if len(order) != count:
        return None
    valid, used = ewah.decode(data[:end], off)
    off += used
    check_only, used = ewah.decode(data[:end], off)
    off += used
    oid_valid, used = ewah.decode(data[:end], off)
    off += used
    for i in check_only:
        order[i].check_only = True
    for i in valid:
        if off + STAT_DATA > end:
            return None
        order[i].valid = True
        order[i].stat = data[off : off + STAT_DATA]
        off += STAT_DATA
    for i in oid_valid:
        if off + rawsz > end:
            return None
        order[i].exclude_oid = data[off : off + rawsz]
        off += rawsz
    if off != end:
        return None
    return Cache(header, ident, dir_flags, root)


def encode(cache: Cache) -> bytes:
    """The extension (signature, size, payload) git writes for ``cache``."""
    out = bytearray(cache.header)
    if cache.root is None:
        out += b"\0"
    else:
        dirs = bytearray()
        stats = bytearray()
        oids = bytearray()
        valid: list[int] = []
        check_only: list[int] = []
        oid_valid: list[int] = []
        index = 0

        def write_one(d: Dir) -> None:
            nonlocal index
            i = index
            index += 1
            if not d.valid:  # (write_one_dir: "untracked_nr should be reset ...")
                d.untracked.clear()
                d.check_only = False
            if d.check_only:
                check_only.append(i)
            if d.valid:
                valid.append(i)
                stats.extend(d.stat)
            if any(d.exclude_oid):
                oid_valid.append(i)
                oids.extend(d.exclude_oid)
            dirs.extend(encode_varint(len(d.untracked)))
            dirs.extend(encode_varint(len(d.dirs)))
            dirs.extend(d.name + b"\0")
            for name in d.untracked:
                dirs.extend(name + b"\0")
            for sub in d.dirs:
                write_one(sub)

        write_one(cache.root)
        out += encode_varint(index) + dirs
        out += ewah.encode(valid) + ewah.encode(check_only) + ewah.encode(oid_valid)
        out += stats + oids + b"\0"
    return SIGNATURE + len(out).to_bytes(4, "big") + bytes(out)


def invalidate(cache: Cache, path: bytes) -> None:
    """dir.c untracked_cache_invalidate_path: the directory holding ``path`` loses its
    list, and (with ``DIR_SHOW_OTHER_DIRECTORIES``) every directory above it.  A
    directory the cache does not hold is not added (git adds it in memory only, unwritten)."""
    if cache.root is None:
        return
    up = bool(cache.dir_flags & SHOW_OTHER_DIRECTORIES)
    parts = path.split(b"/")
    chain: list[Dir | None] = [cache.root]
    d: Dir | None = cache.root
    for part in parts[:-1]:
        d = d.by_name.get(part) if d is not None else None
        chain.append(d)
    for k, node in enumerate(reversed(chain)):
        if k and not up:
            break
        if node is not None:
            node.valid = False
            node.untracked.clear()


def setting(config: Mapping[str, str]) -> bool | None:
    """What the repository says of the cache (repo-settings.c): True to write one,
    False to drop it, None to keep what the index has."""
    value = config.get("core.untrackedcache")
    if value is not None:
        try:
            return parse_bool("core.untrackedcache", value)
        except GitError:  # ("keep", or anything not a boolean: git_parse_maybe_bool < 0)
            return None
    if config_bool(config.get("feature.manyfiles"), False):
        return True
    return None


def ident(work_tree: str | os.PathLike[str]) -> bytes:
    """dir.c set_untracked_ident: the location and system a cache is valid for."""
    where = os.fsencode(os.path.realpath(work_tree))
    return b"Location " + where + b", system " + os.uname().sysname.encode() + b"\0"


def new(work_tree: str | os.PathLike[str], config: Mapping[str, str], rawsz: int) -> Cache:
    """dir.c new_untracked_cache: an empty cache (no directories yet)."""
    flags = SHOW_OTHER_DIRECTORIES | HIDE_EMPTY_DIRECTORIES
    if config.get("status.showuntrackedfiles") == "all":
        flags = 0
    me = ident(work_tree)
    header = (
        encode_varint(len(me))
        + me
        + bytes(2 * STAT_DATA)
        + flags.to_bytes(4, "big")
        + bytes(2 * rawsz)
        + b".gitignore\0"
    )
    return Cache(header, me, flags, None)


def after_checkout(
    read: bytes | None,
    changed: Iterable[bytes],
    *,
    work_tree: str | os.PathLike[str],
    config: Mapping[str, str],
    rawsz: int,
) -> bytes:
    """The UNTR extension git's checkout writes (b"": none): the cache ``read`` from the
    index (its payload; None: none there) with the directories of the ``changed`` paths
    (whose index entries were added, changed or removed) invalidated, or a new one, or
    none, as the config says (read-cache.c tweak_untracked_cache)."""
    wanted = setting(config)
    if wanted is False:
        return b""
    cache = decode(read, rawsz) if read is not None else None
    # (add_untracked_cache: one made for another location or system is started anew)
    here = ident(work_tree)
    if wanted is True and (cache is None or cache.ident.split(b"\0")[0] + b"\0" != here):
        return encode(new(work_tree, config, rawsz))
    if cache is None:
        return b""
    for path in changed:
        invalidate(cache, path)
    return encode(cache)
