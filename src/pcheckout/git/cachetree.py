"""The cache tree (the index's ``TREE`` extension) git writes after a checkout
(unpack-trees.c: cache_tree_update with WRITE_TREE_REPAIR; cache-tree.c).

For each directory of the index, depth first, the root first (path ""):
``path NUL entry_count SP subtree_count LF`` then, if the entry count is not -1, the
directory's tree id; its subdirectories follow, ordered by name length, then name
(subtree_name_cmp).  The entry count is how many index entries the directory holds at
any depth.  A directory is valid only if the tree object it would be is in the
repository (repair mode: a tree git would have to write is not recorded), and if no
entry below it is intent-to-add; otherwise its count is -1 and no id is written.  An
index with unmerged entries gets no cache tree.

A switch does not compute it whole (:func:`extension_after`): as git's checkout does, it
keeps the cache tree it read, invalidates the paths whose entries change, and computes
only the directories left invalid, git's quirks included.
"""

from __future__ import annotations

import hashlib
import struct
from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from pcheckout.git.indexformat import EXT_FLAG_INTENT_TO_ADD

if TYPE_CHECKING:
    from pcheckout.git.index import IndexEntry

__all__ = ["extension", "extension_after", "tree_ids"]

SIGNATURE = b"TREE"
_EXT_HEADER = struct.Struct(">4sI")

#: a tree entry's mode as the tree object spells it (octal, no leading zero), then a space
_MODES = {m: b"%o " % m for m in (0o100644, 0o100755, 0o120000, 0o160000)}
#: (path, mode, raw object id, intent-to-add) of each entry, in index order
Item = tuple[bytes, int, bytes, bool]


class _Dir:
    """One directory while the entries are walked."""

    __slots__ = ("name", "content", "count", "children", "oid", "valid")

    def __init__(self, name: bytes) -> None:
        self.name = name
        self.content: list[bytes] = []
        self.count = 0
        self.children: list[_Dir] = []
        self.oid = b""
        self.valid = True


def _close(d: _Dir, hash_name: str) -> bool:
    """Compute ``d``'s tree id; whether its tree has entries (one of only intent-to-add
    entries is empty, and left out of its parent's, as git leaves it)."""
    body = b"".join(d.content)
    d.oid = hashlib.new(hash_name, b"tree %d\0" % len(body) + body).digest()
    d.content = []
    return bool(body)


def build(items: Iterable[Item], hash_name: str) -> _Dir:
    """The directories of the index, their tree ids computed as git's update_one does."""
    root = _Dir(b"")
    stack = [root]
    prefix: list[bytes] = []  # the components of stack[-1]
    modes = _MODES
    current = b""  # stack[-1]'s path
    top = root
    for path, mode, oid, ita in items:
        leaf = path.endswith(b"/")  # a sparse directory (git/sparseindex.py)
        d, _, name = (path[:-1] if leaf else path).rpartition(b"/")
        if d != current:  # (most entries share the previous one's directory)
            dirs = d.split(b"/") if d else []
            keep = 0
            while keep < len(prefix) and keep < len(dirs) and prefix[keep] == dirs[keep]:
                keep += 1
            while len(prefix) > keep:
                _pop(stack, prefix, hash_name)
            for part in dirs[keep:]:
                child = _Dir(part)
                stack[-1].children.append(child)
                stack.append(child)
                prefix.append(part)
            current, top = d, stack[-1]
        if leaf:
            # cache-tree.c update_one: a leaf of one entry, the tree its entry names
            child = _Dir(name)
            child.count, child.oid = 1, oid
            top.children.append(child)
            top.content.append(b"40000 " + name + b"\0" + oid)
            continue
        top.count += 1
        if ita:
            top.valid = False
        else:
            top.content.append((modes.get(mode) or b"%o " % mode) + name + b"\0" + oid)
    while prefix:
        _pop(stack, prefix, hash_name)
    _close(root, hash_name)
    root.count += sum(c.count for c in root.children)
    return root


def _pop(stack: list[_Dir], prefix: list[bytes], hash_name: str) -> None:
    d = stack.pop()
    prefix.pop()
    nonempty = _close(d, hash_name)
    d.count += sum(c.count for c in d.children)
    parent = stack[-1]
    if nonempty:
        parent.content.append(b"40000 %s\0%s" % (d.name, d.oid))


def tree_ids(items: Iterable[Item], hash_name: str) -> dict[bytes, bytes]:
    """The tree id of each directory of the index (its path, "" for the root)."""
    ids: dict[bytes, bytes] = {}

    def visit(d: _Dir, path: bytes) -> None:
        ids[path] = d.oid
        for c in d.children:
            visit(c, path + b"/" + c.name if path else c.name)

    visit(build(items, hash_name), b"")
    return ids


def _walk(d: _Dir) -> Iterable[_Dir]:
    yield d
    for c in d.children:
        yield from _walk(c)


def _validate(d: _Dir, missing: Collection[bytes]) -> bool:
    ok = all([_validate(c, missing) for c in d.children])  # every child, not the first bad one
    d.valid = d.valid and ok and d.oid not in missing
    return d.valid


def _write(d: _Dir, path: bytes, out: list[bytes]) -> None:
    children = sorted(d.children, key=lambda c: (len(c.name), c.name))
    count = d.count if d.valid else -1
    out.append(b"%s\0%d %d\n" % (path, count, len(children)))
    if d.valid:
        out.append(d.oid)
    for c in children:
        _write(c, c.name, out)


def extension(
    items: Iterable[Item],
    hash_name: str,
    missing: Callable[[list[bytes]], Collection[bytes]],
    known_root: bytes | None = None,
) -> bytes:
    """The ``TREE`` extension (header included) for the index's entries ``items``.
    ``missing`` says which of the given tree ids the repository lacks; it is not asked
    when the root's id is ``known_root`` (the tree checked out: every subtree exists)."""
    root = build(items, hash_name)
    absent: Collection[bytes] = ()
    if root.oid != known_root:
        absent = missing([d.oid for d in _walk(root)])
    _validate(root, absent)
    out: list[bytes] = []
    _write(root, b"", out)
    body = b"".join(out)
    return _EXT_HEADER.pack(SIGNATURE, len(body)) + body


# --- a switch's cache tree: git's cache_tree_update over the tree it kept -----------------

#: the empty tree's id by hash: git has it whether stored or not (object-file.c empty_tree)
EMPTY_TREE = {
    "sha1": bytes.fromhex("4b825dc642cb6eb9a060e54bf8d69288fbee4904"),
    "sha256": bytes.fromhex("6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"),
}


class _Tree:
    """One directory of git's in-memory cache tree (cache-tree.h struct cache_tree)."""

    __slots__ = ("count", "oid", "down", "span", "changed")

    def __init__(self, count: int = -1, oid: bytes = b"", span: tuple[int, int] = (0, 0)) -> None:
        self.count = count  # entries below it at any depth; -1: invalid
        self.oid = oid  # b"": none (an invalid directory read from the index has none)
        self.down: dict[bytes, _Tree] = {}
        self.span = span  # its records, and its subdirectories', in the payload read
        self.changed = not span[1]  # (a new one has no stored records to copy)


def _stored(payload: bytes, rawsz: int) -> _Tree | None:
    """The cache tree a ``TREE`` payload holds (cache-tree.c read_one), each directory
    with the span of its records (depth first: a subtree's records are contiguous); None
    if it does not parse."""
    try:
        root, end = _read_one(payload, 0, rawsz)
    except (ValueError, IndexError):
        return None
    return root[1] if end == len(payload) else None


def _read_one(payload: bytes, start: int, rawsz: int) -> tuple[tuple[bytes, _Tree], int]:
    nul = payload.index(b"\0", start)
    lf = payload.index(b"\n", nul)
    count_text, subtrees_text = payload[nul + 1 : lf].split(b" ")
    count, subtrees = int(count_text), int(subtrees_text)
    off = lf + 1
    oid = b""
    if count >= 0:
        oid = payload[off : off + rawsz]
        if len(oid) != rawsz:
            raise ValueError("truncated")
        off += rawsz
    down: dict[bytes, _Tree] = {}
    for _ in range(subtrees):
        (name, sub), off = _read_one(payload, off, rawsz)
        down[name] = sub
    tree = _Tree(count, oid, (start, off))
    tree.down = down
    return (payload[start:nul], tree), off


def _invalidate(tree: _Tree, path: bytes) -> None:
    """cache-tree.c do_invalidate_path: each directory on ``path``'s way invalid (its id
    kept), the subtree named by its last component, if any, dropped."""
    parts = path.split(b"/")
    for part in parts[:-1]:
        tree.count = -1
        tree.changed = True
        down = tree.down.get(part)
        if down is None:
            return
        tree = down
    tree.count = -1
    tree.changed = True
    tree.down.pop(parts[-1], None)


class _Update:
    """cache-tree.c update_one with WRITE_TREE_SILENT | WRITE_TREE_REPAIR over the index
    ``entries`` (sorted, no stages, no sparse directories; ``paths`` their paths);
    ``exists`` says which tree ids git has."""

    def __init__(
        self,
        entries: Sequence[IndexEntry],
        paths: Sequence[bytes],
        hash_name: str,
        exists: Callable[[bytes], bool],
    ) -> None:
        self.entries, self.paths, self.hash_name, self.exists = entries, paths, hash_name, exists
        self.empty = EMPTY_TREE[hash_name]

    def one(self, it: _Tree, lo: int, hi: int, skip: int) -> int:
        """Update ``it``, the directory whose entries are ``lo`` to ``hi`` (its path
        ``skip`` bytes long with its slash); the entries it took, or -1 where git's gives
        up (a subdirectory with no id: every directory above it stops there, as is)."""
        if it.count == hi - lo and it.oid:  # (valid as read: git checks the tree is there)
            return it.count
        it.changed = True
        entries, paths, modes = self.entries, self.paths, _MODES
        # One walk: the subtrees updated in the index's order (git's first loop, which
        # gives up at the first that fails), each file's line of the tree made on the way.
        lines: list[bytes | tuple[bytes, _Tree]] = []
        down: dict[bytes, _Tree] = {}
        invalid = False
        i = lo
        while i < hi:
            p = paths[i]
            slash = p.find(b"/", skip)
            if slash < 0:
                e = entries[i]
                if e.extended_flags & EXT_FLAG_INTENT_TO_ADD:
                    invalid = True
                else:
                    mode = e.mode
                    lines.append((modes.get(mode) or b"%o " % mode) + p[skip:] + b"\0" + e.oid)
                i += 1
                continue
            name = p[skip:slash]
            end = bisect_left(paths, p[:slash] + b"0", i, hi)  # ("0" follows "/")
            sub = it.down.get(name) or _Tree()
            it.down[name] = sub
            if self.one(sub, i, end, slash + 1) < 0:
                return -1
            down[name] = sub
            lines.append((name, sub))
            i = end
        it.down = down  # (discard_unused_subtrees)
        content: list[bytes] = []
        for line in lines:  # (git's second loop)
            if isinstance(line, bytes):
                content.append(line)
                continue
            name, sub = line
            unsure = sub.count < 0
            invalid = invalid or unsure
            # (git also asks whether a valid one's tree is there: one kept as read is
            # trusted, as above; one computed was asked just now)
            if not sub.oid:
                return -1
            if unsure and sub.oid == self.empty:  # (intent-to-add entries only)
                continue
            content.append(b"40000 " + name + b"\0" + sub.oid)
        body = b"".join(content)
        oid = hashlib.new(self.hash_name, b"tree %d\0" % len(body) + body).digest()
        if oid == self.empty or self.exists(oid):
            it.oid = oid
        else:
            invalid = True
        it.count = -1 if invalid else hi - lo
        return hi - lo


def extension_after(
    entries: Sequence[IndexEntry],
    hash_name: str,
    before: bytes | None,
    changed: Sequence[bytes],
    missing: Callable[[list[bytes]], Collection[bytes]],
    known_root: bytes | None = None,
) -> bytes:
    """The ``TREE`` extension git writes after a switch: the cache tree it read
    (``before``: its payload; None, or one that does not parse: none), the ``changed``
    paths invalidated (unpack-trees.c invalidate_ce_path: each entry added, removed or
    replaced), then updated as checkout updates it (cache_tree_update, repair mode): a
    directory valid as read is kept, its records copied; the others are computed, a
    tree the repository lacks left invalid, and a directory whose tree could not be had
    leaves every directory above it as it was (git's early return).  ``entries`` are
    the new index's (sorted, no stages, no sparse directories).  ``missing`` says which
    of the given trees the repository lacks: asked once, of the trees computed (and again
    only for a stale id), and not at all if the root comes out as ``known_root`` (the
    tree checked out: every tree in it exists)."""
    rawsz = len(EMPTY_TREE[hash_name])
    asked: dict[bytes, bool] = {}

    def assumed(oid: bytes) -> bool:
        asked[oid] = True
        return True

    paths = [e.path for e in entries]
    root = _kept(before, rawsz, changed)
    _Update(entries, paths, hash_name, assumed).one(root, 0, len(paths), 0)
    if asked and root.oid != known_root:  # (else every tree computed is in that tree)
        absent = missing(list(asked))
        have = {oid: oid not in absent for oid in asked}

        def exists(oid: bytes) -> bool:
            if oid not in have:
                have[oid] = not missing([oid])
            return have[oid]

        root = _kept(before, rawsz, changed)
        _Update(entries, paths, hash_name, exists).one(root, 0, len(paths), 0)
    out: list[bytes] = []
    _write_tree(root, b"", before or b"", out)
    body = b"".join(out)
    return _EXT_HEADER.pack(SIGNATURE, len(body)) + body


def _kept(before: bytes | None, rawsz: int, changed: Sequence[bytes]) -> _Tree:
    """The cache tree read, ``changed`` invalidated (a new root where none was read)."""
    root = _stored(before, rawsz) if before else None
    if root is None:
        return _Tree()
    for p in changed:
        _invalidate(root, p)
    return root


def _write_tree(it: _Tree, name: bytes, payload: bytes, out: list[bytes]) -> None:
    if not it.changed:
        start, end = it.span
        out.append(payload[start:end])
        return
    names = sorted(it.down, key=lambda n: (len(n), n))  # (subtree_name_cmp)
    out.append(b"%s\0%d %d\n" % (name, it.count, len(names)))
    if it.count >= 0:
        out.append(it.oid)
    for n in names:
        _write_tree(it.down[n], n, payload, out)
