"""Refuse hostile trees before anything is written.

A tree comes from someone else.  Before pcheckout writes a single byte it
checks every path of the tree the way git's ``verify_path()`` does (git
2.39: ``read-cache.c`` ``verify_path_internal``/``verify_dotfile``,
``path.c`` ``is_ntfs_dotgit``/``is_ntfs_dot_generic``, ``utf8.c``
``is_hfs_dot_generic``/``next_hfs_char``), re-stated here from their
documented behaviour, plus the tree-level rules git enforces while it
writes (no duplicate paths, nothing written below a non-directory such as a
symlink created earlier in the same checkout).

Paths are ``bytes`` with ``/`` separators, exactly as ``git ls-tree -r -z
--full-tree`` prints them.  ``check_path`` returns a reason (the tail of a
sentence whose subject is the path) or ``None``; ``check_tree`` raises
:class:`~pcheckout.errors.UnsafeTreeError` naming the first offending entry.

Rules beyond git's ``verify_path``: symlinks named ``.gitattributes``,
``.gitignore`` and ``.mailmap`` (and their NTFS/HFS+ aliases) are refused.
git's checkout writes them but git's fsck reports them
(``gitattributesSymlink``, ``gitignoreSymlink``, ``mailmapSymlink``) and git
refuses to follow them when it reads those files (2.32+).
"""

from __future__ import annotations

import contextlib
import re
import stat
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import accumulate, repeat
from operator import itemgetter

from pcheckout.errors import UnsafeTreeError, quote_path
from pcheckout.git.config import parse_bool
from pcheckout.git.runner import Git
from pcheckout.git.tree import Entry, RootedListing, read_trees

__all__ = [
    "changes_look_safe",
    "check_entries",
    "check_path",
    "check_tree",
    "entries_look_safe",
    "listing_looks_safe",
    "protections_from_config",
    "tree_objects_look_safe",
]

# git config.c / environment.c: core.protectNTFS defaults to true on every
# platform since git 2.24.1 (CVE-2019-1353); core.protectHFS defaults to true
# only where git is built for macOS (config.mak.uname sets PROTECT_HFS_DEFAULT
# for Darwin).
PROTECT_NTFS_DEFAULT = True
PROTECT_HFS_DEFAULT = sys.platform == "darwin"

# utf8.c next_hfs_char(): code points HFS+ drops when it compares names, so
# ".g\u200cit" names the same directory as ".git" there.
HFS_IGNORABLE_CODE_POINTS = frozenset(
    {
        0x200C,  # ZERO WIDTH NON-JOINER
        0x200D,  # ZERO WIDTH JOINER
        0x200E,  # LEFT-TO-RIGHT MARK
        0x200F,  # RIGHT-TO-LEFT MARK
        0x202A,  # LEFT-TO-RIGHT EMBEDDING
        0x202B,  # RIGHT-TO-LEFT EMBEDDING
        0x202C,  # POP DIRECTIONAL FORMATTING
        0x202D,  # LEFT-TO-RIGHT OVERRIDE
        0x202E,  # RIGHT-TO-LEFT OVERRIDE
        0x206A,  # INHIBIT SYMMETRIC SWAPPING
        0x206B,  # ACTIVATE SYMMETRIC SWAPPING
        0x206C,  # INHIBIT ARABIC FORM SHAPING
        0x206D,  # ACTIVATE ARABIC FORM SHAPING
        0x206E,  # NATIONAL DIGIT SHAPES
        0x206F,  # NOMINAL DIGIT SHAPES
        0xFEFF,  # ZERO WIDTH NO-BREAK SPACE
    }
)

# path.c is_ntfs_dotgitmodules() and friends: (name without the dot, the
# six-character prefix of the fallback 8.3 short name Windows derives from a
# hash of the long name, whether git's verify_path refuses it as a symlink).
# The last column is False for files only git's fsck flags (see module doc).
PROTECTED_SYMLINK_NAMES: tuple[tuple[bytes, bytes, bool], ...] = (
    (b"gitmodules", b"gi7eba", True),
    (b"gitattributes", b"gi7d29", False),
    (b"gitignore", b"gi250a", False),
    (b"mailmap", b"maba30", False),
)

_REFUSE = "refusing to check out: "

# A path can only be dangerous if one of these occurs; everything else (the
# vast majority: "src/foo.py", "docs/a b.txt", non-ASCII names) is safe
# without looking at its components.  A component that starts with '.' or is
# empty catches '.', '..', '.git*', '.mailmap', absolute and '//' paths;
# '~' catches NTFS short names (git~1, gitmod~1, gi7eba~1); '\\' starts a new
# NTFS component; a component starting with byte 0xE2 or 0xEF may start with
# an HFS+-ignorable code point (U+200C..U+206F are E2 xx xx, U+FEFF is EF BB BF).
# The needles are searched in one path framed by '/', or in all paths joined
# and framed by '/' so that a 100k-entry tree is six substring scans in C
# (where one path ends and the next begins is recovered from their lengths).
# A NUL byte is looked for separately.
_NEEDLES_ALWAYS = (b"/.", b"//")
_NEEDLES_NTFS = (b"~", b"\\")
_NEEDLES_HFS = (b"/\xe2", b"/\xef")
_NEEDLES = {
    (ntfs, hfs): _NEEDLES_ALWAYS + (_NEEDLES_NTFS if ntfs else ()) + (_NEEDLES_HFS if hfs else ())
    for ntfs in (False, True)
    for hfs in (False, True)
}
_SLASH = 0x2F


def _may_be_unsafe(path: bytes, needles: tuple[bytes, ...]) -> bool:
    framed = b"/" + path + b"/"
    return b"\x00" in path or any(needle in framed for needle in needles)


def _show(path: bytes) -> str:
    """A path for a message: quoted with '' unless quote_path already "quoted" it."""
    text = quote_path(path)
    return text if text.startswith('"') else f"'{text}'"


# --------------------------------------------------------------------------
# HFS+: utf8.c is_hfs_dot_generic()


def _git_utf8_char(s: bytes, i: int) -> tuple[int, int]:
    """Decode one character at ``s[i]`` as git's pick_one_utf8_char() does.

    Returns (code point, length); length 0 means end of input or malformed
    (git returns 0 for both).  Unlike Python's codec git also rejects
    U+FFFE and U+FFFF.
    """
    n = len(s)
    if i >= n:
        return 0, 0
    b0 = s[i]
    if b0 < 0x80:
        return b0, 1

    def cont(k: int) -> bool:
        return i + k < n and (s[i + k] & 0xC0) == 0x80

    if (b0 & 0xE0) == 0xC0:
        if not cont(1) or (b0 & 0xFE) == 0xC0:  # overlong
            return 0, 0
        return ((b0 & 0x1F) << 6) | (s[i + 1] & 0x3F), 2
    if (b0 & 0xF0) == 0xE0:
        if not (cont(1) and cont(2)):
            return 0, 0
        b1, b2 = s[i + 1], s[i + 2]
        if (
            (b0 == 0xE0 and (b1 & 0xE0) == 0x80)  # overlong
            or (b0 == 0xED and (b1 & 0xE0) == 0xA0)  # surrogate
            or (b0 == 0xEF and b1 == 0xBF and (b2 & 0xFE) == 0xBE)  # U+FFFE, U+FFFF
        ):
            return 0, 0
        return ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F), 3
    if (b0 & 0xF8) == 0xF0:
        if (
            not (cont(1) and cont(2) and cont(3))
            or (b0 == 0xF0 and (s[i + 1] & 0xF0) == 0x80)  # overlong
            or (b0 == 0xF4 and s[i + 1] > 0x8F)  # above U+10FFFF
            or b0 > 0xF4
        ):
            return 0, 0
        cp = ((b0 & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12)
        return cp | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F), 4
    return 0, 0


def _hfs_is_dot(component: bytes, needle: bytes) -> bool:
    """Would HFS+ treat ``component`` as "." + needle (ASCII, lower case)?

    Ignorable code points are skipped anywhere; letters compare ASCII
    case-insensitively; after the needle only the end of the component may
    follow.  Like git, a malformed UTF-8 sequence reads as "end", so
    ".git\\xff" counts as ".git" (git refuses it too).
    """
    pos = 0

    def next_char() -> int:
        nonlocal pos
        while True:
            cp, length = _git_utf8_char(component, pos)
            if not length:
                return 0
            pos += length
            if cp not in HFS_IGNORABLE_CODE_POINTS:
                return cp

    if next_char() != 0x2E:  # '.'
        return False
    for want in needle:
        c = next_char()
        if c > 127 or (c | 0x20 if 0x41 <= c <= 0x5A else c) != want:
            return False
    return next_char() == 0


# --------------------------------------------------------------------------
# NTFS: path.c is_ntfs_dotgit(), is_ntfs_dot_generic()

_SPACE, _DOT, _COLON, _BACKSLASH, _TILDE = 0x20, 0x2E, 0x3A, 0x5C, 0x7E


def _ntfs_is_dotgit(rest: bytes) -> bool:
    """``rest`` (a component, or its part after a backslash) names .git on NTFS.

    ".git" or "git~1" (the short name .git gets as the first entry of a
    fresh directory), any letter case, then only dots and spaces (NTFS drops
    them) up to the end, a backslash or ':' (an alternate data stream such as
    ".git::$INDEX_ALLOCATION").
    """
    head = rest[:5].lower()
    if head.startswith(b".git"):
        i = 4
    elif head == b"git~1":
        i = 5
    else:
        return False
    for c in rest[i:]:
        if c in (_BACKSLASH, _COLON):
            return True
        if c not in (_DOT, _SPACE):
            return False
    return True


def _ntfs_only_spaces_and_periods(rest: bytes, i: int, end_ok: bool) -> bool:
    # is_ntfs_dot_generic() stops at NUL or ':' only (not at '\\' or '/'):
    # end_ok says whether the end of ``rest`` is the end of the whole path.
    for c in rest[i:]:
        if c == _COLON:
            return True
        if c not in (_DOT, _SPACE):
            return False
    return end_ok


def _ntfs_is_dot(rest: bytes, name: bytes, short_prefix: bytes, end_ok: bool) -> bool:
    """``rest`` names "." + name on NTFS: itself, "name6~N" or its hashed 8.3 form."""
    n = len(name)
    if rest[:1] == b"." and rest[1 : 1 + n].lower() == name:
        return _ntfs_only_spaces_and_periods(rest, n + 1, end_ok)
    # Regular short name: first six characters, '~', 1..4.
    if (
        rest[:6].lower() == name[:6]
        and rest[6:7] == b"~"
        and len(rest) > 7
        and 0x31 <= rest[7] <= 0x34
    ):
        return _ntfs_only_spaces_and_periods(rest, 8, end_ok)
    # Fallback short name: up to six characters of the hashed prefix, '~', digits.
    saw_tilde = False
    i = 0
    while i < 8:
        if i >= len(rest):
            return False
        c = rest[i]
        if saw_tilde:
            if not 0x30 <= c <= 0x39:
                return False
        elif c == _TILDE:
            i += 1
            if i >= len(rest) or not 0x31 <= rest[i] <= 0x39:
                return False
            saw_tilde = True
        elif i >= 6 or c & 0x80 or (c | 0x20 if 0x41 <= c <= 0x5A else c) != short_prefix[i]:
            return False
        i += 1
    return _ntfs_only_spaces_and_periods(rest, 8, end_ok)


def _ntfs_pieces(component: bytes) -> Iterable[tuple[int, bytes]]:
    """The component and every part of it after a backslash (git's protectNTFS
    treats '\\' as a separator when it looks for .git, even on Linux)."""
    yield 0, component
    start = component.find(b"\\")
    while start != -1:
        yield start + 1, component[start + 1 :]
        start = component.find(b"\\", start + 1)


# --------------------------------------------------------------------------
# Per-component rules


def _alias_note(component: bytes, piece_at: int, what: str, where: str) -> str:
    if where == "case":
        return f" ({_show(component)} is {what} on a case-insensitive filesystem)"
    if where == "hfs":
        return f" ({_show(component)} is {what} on HFS+, which ignores invisible code points)"
    if piece_at:
        return (
            f" (NTFS treats the backslash in {_show(component)} as a separator"
            f" and {_show(component[piece_at:])} as {what})"
        )
    return f" ({_show(component)} is {what} on NTFS)"


def _dotgit_note(component: bytes, ntfs: bool, hfs: bool) -> str | None:
    """None if ``component`` cannot name .git; else "" or an alias explanation."""
    if component.lower() == b".git":
        return "" if component == b".git" else _alias_note(component, 0, ".git", "case")
    if hfs and not component.isascii() and _hfs_is_dot(component, b"git"):
        return _alias_note(component, 0, ".git", "hfs")
    if ntfs:
        for at, piece in _ntfs_pieces(component):
            if _ntfs_is_dotgit(piece):
                return _alias_note(component, at, ".git", "ntfs")
    return None


def _symlink_note(component: bytes, last: bool, ntfs: bool, hfs: bool) -> tuple[str, str] | None:
    """(".name", note) if a symlink entry may not have this component."""
    for name, short_prefix, git_refuses in PROTECTED_SYMLINK_NAMES:
        if not (last or git_refuses):
            continue
        dotted = "." + name.decode("ascii")
        if component.lower() == b"." + name:
            note = "" if component == b"." + name else _alias_note(component, 0, dotted, "case")
            return dotted, note
        if hfs and not component.isascii() and _hfs_is_dot(component, name):
            return dotted, _alias_note(component, 0, dotted, "hfs")
        if ntfs:
            for at, piece in _ntfs_pieces(component):
                if _ntfs_is_dot(piece, name, short_prefix, end_ok=last):
                    return dotted, _alias_note(component, at, dotted, "ntfs")
    return None


def _check_components(path: bytes, mode: int, ntfs: bool, hfs: bool) -> str | None:
    if not path:
        return "is an empty path"
    if b"\x00" in path:
        return "contains a NUL byte"
    if path.startswith(b"/"):
        return "is an absolute path"
    symlink = stat.S_ISLNK(mode)
    components = path.split(b"/")
    last_index = len(components) - 1
    for index, component in enumerate(components):
        last = index == last_index
        if not component:
            return "has an empty path component"
        if component == b".":
            return "has a '.' path component"
        if component == b"..":
            return "has a '..' path component (it could point outside the destination)"
        note = _dotgit_note(component, ntfs, hfs)
        if note is not None:
            return ("would be written as .git" if last else "would write inside .git") + note
        if symlink:
            found = _symlink_note(component, last, ntfs, hfs)
            if found is not None:
                dotted, note = found
                if last:
                    return f"would make {dotted} a symlink" + note
                return f"is a symlink below {dotted}, which git refuses" + note
    return None


def check_path(
    path: bytes, mode: int, *, protect_ntfs: bool = True, protect_hfs: bool = True
) -> str | None:
    """Why git would refuse to check out ``path`` with ``mode``, or None if safe.

    The reason completes a sentence whose subject is the path, e.g.
    ``check_path(b".git/config", 0o100644)`` is ``"would write inside .git"``.
    ``protect_ntfs``/``protect_hfs`` are git's ``core.protectNTFS`` and
    ``core.protectHFS`` (see :func:`protections_from_config`).
    """
    if not _may_be_unsafe(path, _NEEDLES[protect_ntfs, protect_hfs]):
        return None
    return _check_components(path, mode, protect_ntfs, protect_hfs)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISREG(mode):
        return "file"
    return "submodule"  # git's canon_mode(): everything else is a gitlink


def check_tree(
    entries: Iterable[tuple[bytes, int]], *, protect_ntfs: bool = True, protect_hfs: bool = True
) -> None:
    """Raise UnsafeTreeError naming the first entry git would refuse to write.

    ``entries`` are (path, mode) in tree order, full paths as listed by
    ``git ls-tree -r -z --full-tree``.  Besides :func:`check_path` for every
    entry, an entry is refused if its path was listed before, or if it and an
    earlier entry are a non-directory and a path below it (a symlink ``link``
    and ``link/x`` in either order: ``link/x`` would be written through the
    symlink).  Directory entries (``ls-tree -t``) are accepted as directories.
    "First" is the first entry in ``entries`` that conflicts with itself or
    with an entry before it.
    """
    listed = entries if isinstance(entries, (list, tuple)) else list(entries)
    if not _tree_looks_safe(listed, protect_ntfs, protect_hfs):
        _refuse_first_offence(listed, protect_ntfs, protect_hfs)


def _tree_looks_safe(entries: Sequence[tuple[bytes, int]], ntfs: bool, hfs: bool) -> bool:
    """True if no rule can fire, decided with whole-list operations in C.

    False only means "look closer": :func:`_refuse_first_offence` then walks
    the entries in order and names the first offending one.
    """
    if not entries:
        return True
    paths = list(map(itemgetter(0), entries))
    if any(stat.S_ISDIR(mode) for mode in set(map(itemgetter(1), entries))):
        return False
    return _names_look_safe(paths, lambda i: entries[i][1], ntfs, hfs) and _structure_looks_safe(
        paths
    )


def _names_look_safe(
    paths: Sequence[bytes], mode_at: Callable[[int], int], ntfs: bool, hfs: bool
) -> bool:
    """True if no per-path rule fires for ``paths`` (``mode_at(i)``: the mode of
    ``paths[i]``, asked only of the few paths a needle occurs in)."""
    buffer = b"/" + b"/".join(paths) + b"/"
    if b"\x00" in buffer:
        return False
    # Only paths a needle occurs in need the per-component rules.
    suspects: set[int] = set()
    starts: list[int] = []
    for needle in _NEEDLES[ntfs, hfs]:
        # (a needle's last byte first: one byte is a memchr, and "/\xe2" or "/\xef" is
        # searched through every "/", 3.4 ms each at 40k paths, where most trees have none)
        if needle[-1:] not in buffer:
            continue
        at = buffer.find(needle)
        if at < 0:
            continue
        if not starts:
            starts = list(accumulate(map((1).__add__, map(len, paths)), initial=1))
        # A needle starting with a separator is about the component after it.
        shift = 1 if needle[0] == _SLASH else 0
        while at >= 0:
            suspects.add(bisect_right(starts, at + shift) - 1)
            at = buffer.find(needle, at + 1)
    return not any(
        _check_components(paths[i], mode_at(i), ntfs, hfs) is not None
        for i in suspects
        if 0 <= i < len(paths)
    )


def _structure_looks_safe(paths: Sequence[bytes]) -> bool:
    """No path listed twice, and no non-directory that is also a leading directory
    (``paths``: a tree's non-tree entries)."""
    files = set(paths)
    if len(files) != len(paths):
        return False
    slash = repeat(b"/")
    level = set(map(itemgetter(0), map(bytes.rpartition, files, slash)))
    level.discard(b"")
    dirs = set(level)
    while level:
        level = set(map(itemgetter(0), map(bytes.rpartition, level, slash)))
        level.discard(b"")
        level -= dirs
        dirs |= level
    return files.isdisjoint(dirs)


def _refuse_first_offence(entries: Iterable[tuple[bytes, int]], ntfs: bool, hfs: bool) -> None:
    """Walk the entries in order; raise for the first one that is refused."""
    needles = _NEEDLES[ntfs, hfs]
    files: dict[bytes, int] = {}  # non-directory path -> mode
    dirs: dict[bytes, bytes] = {}  # leading directory -> first entry below it
    last_parent: bytes | None = None
    for path, mode in entries:
        if _may_be_unsafe(path, needles):
            reason = _check_components(path, mode, ntfs, hfs)
            if reason is not None:
                raise UnsafeTreeError(_REFUSE + _show(path) + " " + reason)
        if stat.S_ISDIR(mode):
            if path in files:
                raise UnsafeTreeError(
                    f"{_REFUSE}{_show(path)} is listed as a directory and as a {_kind(files[path])}"
                )
            parent: bytes = path
            last_parent = None
        else:
            if path in files:
                raise UnsafeTreeError(f"{_REFUSE}{_show(path)} is listed twice in the tree")
            below = dirs.get(path)
            if below is not None:
                raise UnsafeTreeError(
                    f"{_REFUSE}{_show(path)} is a {_kind(mode)} but also the leading directory"
                    f" of {_show(below)}"
                )
            files[path] = mode
            parent = path.rpartition(b"/")[0]
            if parent == last_parent:
                continue  # its leading directories were checked for the entry before
            last_parent = parent
        # Every directory in ``dirs`` has its ancestors in ``dirs`` too, and
        # none of them is in ``files``: stop at the first one already known.
        while parent and parent not in dirs:
            blocker = files.get(parent)
            if blocker is not None:
                raise UnsafeTreeError(
                    f"{_REFUSE}{_show(path)} would be written through the {_kind(blocker)}"
                    f" {_show(parent)}"
                )
            dirs[parent] = path
            parent = parent.rpartition(b"/")[0]


# --------------------------------------------------------------------------
# Configuration


def protections_from_config(get: Callable[[str], str | None]) -> tuple[bool, bool]:
    """(protect_ntfs, protect_hfs) from ``get("core.protectntfs")`` and
    ``get("core.protecthfs")``; git's defaults where ``get`` returns None.

    Values are parsed like git_config_bool() (true/yes/on, false/no/off, the
    empty string is false, integers are true unless 0).  A key written without
    ``=`` is true in git but ``git config --get`` prints it as an empty
    string: pass ``git config --type=bool --get`` output (or "true") for it.
    Raises GitError for a value git itself would die on.
    """
    results = []
    for key, default in (
        ("core.protectntfs", PROTECT_NTFS_DEFAULT),
        ("core.protecthfs", PROTECT_HFS_DEFAULT),
    ):
        value = get(key)
        results.append(default if value is None else parse_bool(key, value))
    return results[0], results[1]


def check_entries(entries: Iterable[Entry], config: Mapping[str, str]) -> None:
    """``check_tree`` for listed entries, with the protections ``config`` asks for."""
    ntfs, hfs = protections_from_config(config.get)
    check_tree(((e.path, e.mode) for e in entries), protect_ntfs=ntfs, protect_hfs=hfs)


def tree_objects_look_safe(trees: Iterable[bytes], id_len: int) -> bool:
    """True if no tree object of ``trees`` (as git stores them: ``mode SP name NUL id``,
    the ids ``id_len`` bytes) holds a name twice or a name that is not one component.
    Given the root and every subtree a switch changes (``TreeChanges.trees``), this is
    the structural rule of :func:`listing_looks_safe` for what the switch writes: a path
    written through a non-directory, or listed twice, needs a name twice in one of the
    trees on its way, and each of those changed.  Read per object, not per path, it costs
    what changed.  False only means "look closer" (:func:`check_entries` of the tree)."""
    record = re.compile(rb"([0-7]+) ([^\0/]+)\0.{%d}" % id_len, re.DOTALL)
    for raw in trees:
        found = record.findall(raw)
        if not found:
            if raw:
                return False
            continue
        modes, names = zip(*found, strict=True)
        if len(set(names)) != len(names):
            return False
        # Records that follow each other and nothing between them: every byte read (a
        # name "" or with a "/" is no record's, nor one cut short).
        parsed = len(b"".join(modes)) + len(b"".join(names)) + len(names) * (2 + id_len)
        if parsed != len(raw):
            return False
    return True


def changes_look_safe(
    git: Git,
    tree: str,
    changed: Sequence[str],
    written: Sequence[tuple[bytes, int]],
    config: Mapping[str, str],
) -> bool:
    """Whether a switch to ``tree`` writing ``written`` (path, mode) passes :func:`check_tree`,
    decided on what changes: the per-path rules for what is written, the structural rule on
    ``tree`` and its subtrees that ``changed`` (:func:`tree_objects_look_safe`; each read
    while git reads the next, one read once).  False: "look closer", :func:`check_entries`
    of the target's listing names the first offence."""
    ids = list(dict.fromkeys([tree, *changed]))
    with contextlib.closing(read_trees(git, ids)) as trees:
        if not tree_objects_look_safe(trees, len(tree) // 2):
            return False
    return entries_look_safe(written, config)


def listing_looks_safe(listing: RootedListing, config: Mapping[str, str]) -> bool:
    """True if the tree ``git ls-tree -r -t`` listed passes :func:`check_tree`, decided on
    its records without parsing them (where a 40k-entry tree costs ~15 ms instead of ~110
    for the parse and :func:`check_entries`); False: "look closer", :func:`check_entries`
    of its entries names the first offence.  The subtrees' records are checked as paths
    too, and a listing with subtrees has a path that is both a non-directory and the
    leading directory of another only where a tree holds a name twice: so no path listed
    twice (a subtree's own record included) is the structural rule."""
    ntfs, hfs = protections_from_config(config.get)
    paths = listing.paths()
    if len(set(paths)) != len(paths):
        return False
    return _names_look_safe(paths, listing.mode_at, ntfs, hfs)


def entries_look_safe(entries: Sequence[tuple[bytes, int]], config: Mapping[str, str]) -> bool:
    """True if none of ``entries`` (path, mode) breaks a per-path rule or collides with
    another of them, with the protections ``config`` asks for; False: "look closer"."""
    ntfs, hfs = protections_from_config(config.get)
    return _tree_looks_safe(entries, ntfs, hfs)
