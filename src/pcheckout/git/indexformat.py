"""The index file's layout constants (gitformat-index.txt; cache.h and read-cache.c in git),
shared by the index reader and writer (``git/index.py``) and the light walk over the sizes
git's writer leaves (``git/indexsize.py``, which must not import ``git/index.py``: ~10 ms)."""

from __future__ import annotations

import struct

SIGNATURE = b"DIRC"
HEADER = struct.Struct(">4sII")
#: hash name -> raw object id size (hash-ll.h: GIT_SHA1_RAWSZ, GIT_SHA256_RAWSZ)
HASH_SIZES = {"sha1": 20, "sha256": 32}
#: in the 16-bit flags word (cache.h CE_EXTENDED)
FLAG_EXTENDED = 0x4000
FLAG_NAME_MASK = 0x0FFF  # a name of 0xFFF bytes or more stores 0xFFF (CE_NAMEMASK)
#: extended flags word (v3+): reserved, skip-worktree, intent-to-add, 13 unused bits
EXT_FLAG_SKIP_WORKTREE = 0x4000
#: entries of v2/v3 are padded with 1..8 NULs to a multiple of 8 (read-cache.c align_flex_name)
ENTRY_ALIGN = 8
