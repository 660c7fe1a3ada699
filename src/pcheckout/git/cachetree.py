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
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Collection, Iterable

__all__ = ["extension", "tree_ids"]

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
