"""What a checkout put on disk, from the index it left: the sum of the entries' sizes.

git's writer does not say how many bytes it wrote; the index it writes holds each file's
lstat size.  The sizes are read by ``git/indexformat.py``'s :func:`walk_sizes` (the
lengths only), or where it cannot, its walk (the one reader of the entries,
``git/index.py``'s too), without building index entries or verifying the checksum.
"""

from __future__ import annotations

import os
from collections.abc import Container

from pcheckout.errors import PcheckoutError
from pcheckout.git.indexformat import (
    EXT_FLAG_SKIP_WORKTREE,
    SIZE,
    read_header,
    walk_entries,
    walk_sizes,
)


class _Split(PcheckoutError):
    """A split index: most entries are in its shared index (``git/index.py`` merges them)."""


def worktree_bytes(data: bytes, hash_name: str, paths: Container[bytes] | None = None) -> int:
    """The sum of the entries' size fields (of ``paths`` only, if given): see :func:`walk`."""
    return walk(data, hash_name, paths)[1]


def walk(data: bytes, hash_name: str, paths: Container[bytes] | None = None) -> tuple[int, int]:
    """(entries, bytes) of the index ``data``; of ``paths`` only, if given, and then
    entries outside the sparse checkout (skip-worktree) are not counted.  The sum of the
    sizes is what a checkout that just wrote this index put on disk (git fills them from the
    lstat of each file it wrote: converted sizes, a symlink's target length; entries it did
    not write, outside the sparse checkout, and gitlinks, hold 0).  Sizes are git's 32 bits
    (a file of 4 GiB or more counts modulo 2**32).

    The checksum is not verified: the caller has just had git write ``data``.  Raises
    :class:`PcheckoutError` on an index it cannot read, :class:`_Split` on a split one."""
    version, count = read_header(data, b"index")
    quick = walk_sizes(data, version, count, hash_name, paths)
    if quick is not None:
        if data[quick[2] : quick[2] + 4] == b"link":
            raise _Split("a split index")
        return quick[0], quick[1]
    entries = walk_entries(data, version, count, hash_name, b"index")
    if data[entries.end : entries.end + 4] == b"link":  # git writes it first
        raise _Split("a split index")
    if paths is None:
        return count, sum(f[SIZE] for f in entries.fixed)
    skip = EXT_FLAG_SKIP_WORKTREE
    chosen = [
        f[SIZE]
        for name, f, ext in zip(entries.names, entries.fixed, entries.extended, strict=True)
        if not ext & skip and name in paths
    ]
    return len(chosen), sum(chosen)


def _merged(path: bytes, hash_name: str, paths: Container[bytes] | None) -> tuple[int, int]:
    """:func:`walk`'s answer for a split index, from its entries merged as git reads them."""
    from pcheckout.git.index import read_index  # the merge: only a split index needs it

    entries = read_index(path, hash_name=hash_name).entries
    if paths is None:
        return len(entries), sum(e.size for e in entries)
    skip = EXT_FLAG_SKIP_WORKTREE
    chosen = [e for e in entries if not e.extended_flags & skip and e.path in paths]
    return len(chosen), sum(e.size for e in chosen)


def written_bytes(
    path: str | bytes | os.PathLike[str] | os.PathLike[bytes],
    hash_name: str,
    paths: Container[bytes] | None = None,
) -> int:
    """:func:`worktree_bytes` of the index file at ``path``; -1 when it cannot be read or
    walked (the caller reports the bytes as unknown)."""
    try:
        with open(os.fsencode(path), "rb") as f:
            data = f.read()
        try:
            return worktree_bytes(data, hash_name, paths)
        except _Split:
            return _merged(os.fsencode(path), hash_name, paths)[1]
    except (OSError, PcheckoutError, KeyError):
        return -1


def in_worktree(
    path: str | bytes | os.PathLike[str] | os.PathLike[bytes],
    hash_name: str,
    paths: Container[bytes],
) -> tuple[int, int] | None:
    """:func:`walk` of the index file at ``path`` for ``paths``: how many of them are in the
    work tree (not skip-worktree) and their bytes; None when it cannot be read or walked."""
    try:
        with open(os.fsencode(path), "rb") as f:
            data = f.read()
        try:
            return walk(data, hash_name, paths)
        except _Split:
            return _merged(os.fsencode(path), hash_name, paths)
    except (OSError, PcheckoutError, KeyError):
        return None
