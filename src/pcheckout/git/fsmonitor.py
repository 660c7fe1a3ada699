"""The fsmonitor extension (the index's ``FSMN``) as git's checkout keeps it.

With ``core.fsmonitor`` set (a hook, or ``true``: git's own daemon) git keeps in the index
the token of its last fsmonitor query and which entries were not known unchanged since
(fsmonitor.c ``write_fsmonitor_extension``, ``fill_fsmonitor_bitmap``)::

    u32 version (2) | token NUL | u32 bitmap size | EWAH bitmap of the "dirty" entries

(version 1 has a u64 timestamp instead of the token; git reads it as that number in
decimal and writes version 2).  git's checkout keeps the extension: the entries it kept
keep their state, those it writes are dirty (entry.c ``mark_fsmonitor_invalid``), a gitlink
always is (``tweak_fsmonitor``); without ``core.fsmonitor`` it drops it (``remove_fsmonitor``).

git also asks the fsmonitor for what changed when it reads the index, and keeps the new
token.  pcheckout does not run the fsmonitor: it keeps the token it read, and the entries
dirty then stay dirty.  The next git command asks the fsmonitor for what changed since
that token, the checkout's own writes among them (dirty already): nothing is missed, and
the bitmap is the one git writes where its query finds nothing changed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from pcheckout.errors import GitError
from pcheckout.git import ewah
from pcheckout.git.config import parse_bool
from pcheckout.git.tree import MODE_GITLINK  # (a gitlink is never fsmonitor-valid)

__all__ = ["Kept", "SIGNATURE", "enabled", "extension", "read"]

#: the extension's signature
SIGNATURE = b"FSMN"
#: fsmonitor.c INDEX_EXTENSION_VERSION1 (a u64 timestamp) and VERSION2 (a token)
VERSION1, VERSION2 = 1, 2
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


class Kept(NamedTuple):
    """What a checkout's index keeps of the extension it read."""

    token: bytes  # the last query's token, as read
    dirty: frozenset[bytes]  # the paths of the entries dirty in the index read
    #: the paths of the entries the checkout keeps as they were, no local change found
    valid: frozenset[bytes] = frozenset()


def enabled(config: Mapping[str, str]) -> bool:
    """Whether git keeps the extension: ``core.fsmonitor`` is a hook's path or true
    (fsm-settings.c: unset, empty, or a boolean false, is "disabled")."""
    value = config.get("core.fsmonitor")
    if not value:
        return False
    try:
        return parse_bool("core.fsmonitor", value)
    except GitError:  # not a boolean: the hook's path (git_config_get_maybe_bool)
        return True


def read(payload: bytes, paths: Sequence[bytes]) -> Kept | None:
    """The extension's payload (after its header) in an index whose entries' paths are
    ``paths``, in order (None: not one git would read: fsmonitor.c
    ``read_fsmonitor_extension`` rejects it and git asks afresh)."""
    if len(payload) < _U32.size:
        return None
    (version,) = _U32.unpack_from(payload)
    if version == VERSION1:
        if len(payload) < _U32.size + _U64.size + _U32.size:
            return None
        token = str(_U64.unpack_from(payload, _U32.size)[0]).encode()
        start = _U32.size + _U64.size
    elif version == VERSION2:
        end = payload.find(b"\0", _U32.size)
        if end < 0:
            return None
        token, start = payload[_U32.size : end], end + 1
    else:
        return None
    if len(payload) < start + _U32.size:
        return None
    (size,) = _U32.unpack_from(payload, start)
    try:
        positions, used = ewah.decode(payload[start + _U32.size : start + _U32.size + size])
    except ewah.EwahError:
        return None
    if used != size or (positions and positions[-1] >= len(paths)):
        return None
    return Kept(token, frozenset(paths[i] for i in positions))


def extension(kept: Kept, entries: Iterable[tuple[bytes, int]]) -> bytes:
    """The extension (header and payload) of an index whose entries are ``entries``
    (path, mode) in order: an entry is dirty unless ``kept`` has it valid and not dirty
    before; a gitlink always is."""
    clean = kept.valid - kept.dirty
    dirty = (
        i for i, (path, mode) in enumerate(entries) if mode == MODE_GITLINK or path not in clean
    )
    bitmap = ewah.encode(dirty)
    body = _U32.pack(VERSION2) + kept.token + b"\0" + _U32.pack(len(bitmap)) + bitmap
    return SIGNATURE + _U32.pack(len(body)) + body
