"""The cache tree a switch writes from the one it read (git/cachetree.py extension_after):
what it keeps as stored and what it asks git.  Its bytes against git's own are in
test_index_formats.py."""

from __future__ import annotations

import dataclasses

from pcheckout.git import cachetree
from pcheckout.git.index import IndexEntry

FILES = [b"a/b/c/deep", b"a/b/file", b"a/other", b"k/l/m", b"k/n", b"top"]


def _entries(changed: bytes = b"") -> list[IndexEntry]:
    return [
        IndexEntry(p, 0o100644, (b"\1" if p == changed else b"\0") * 20, *[0] * 9) for p in FILES
    ]


def _payload(entries: list[IndexEntry]) -> bytes:
    items = ((e.path, e.mode, e.oid, False) for e in entries)
    return cachetree.extension(items, "sha1", lambda oids: set())[8:]


def test_nothing_changed_keeps_the_cache_tree_as_stored() -> None:
    entries = _entries()
    payload = _payload(entries)

    def missing(oids: list[bytes]) -> set[bytes]:
        raise AssertionError(f"asked of {len(oids)} trees")

    out = cachetree.extension_after(entries, "sha1", payload, [], missing, None)
    assert out[8:] == payload


def test_only_the_trees_that_changed_are_computed_and_asked_for() -> None:
    before = _entries()
    after = _entries(changed=b"a/b/c/deep")
    asked: list[list[bytes]] = []

    def missing(oids: list[bytes]) -> set[bytes]:
        asked.append(oids)
        return set()

    out = cachetree.extension_after(after, "sha1", _payload(before), [b"a/b/c/deep"], missing)
    assert out[8:] == _payload(after)
    assert len(asked) == 1 and len(asked[0]) == 4  # a/b/c, a/b, a, the root: not k, k/l
    root = cachetree.extension_after(after, "sha1", _payload(before), [b"a/b/c/deep"], missing,
                                     known_root=cachetree.tree_ids(
                                         ((e.path, e.mode, e.oid, False) for e in after), "sha1"
                                     )[b""])  # fmt: skip
    assert root == out and len(asked) == 1  # (the tree checked out: nothing to ask)


def test_a_tree_the_repository_lacks_is_left_invalid() -> None:
    after = _entries(changed=b"k/n")
    ids = cachetree.tree_ids(((e.path, e.mode, e.oid, False) for e in after), "sha1")
    out = cachetree.extension_after(
        after, "sha1", _payload(_entries()), [b"k/n"], lambda oids: {ids[b"k"], ids[b""]}
    )
    assert out[8:].startswith(b"\0-1 2\n") and b"k\0-1 1\n" in out  # the root, k: no ids
    assert b"l\0001 0\n" + ids[b"k/l"] in out  # kept as stored


def test_an_index_read_without_one_gets_one() -> None:
    entries = [dataclasses.replace(e) for e in _entries()]
    assert cachetree.extension_after(entries, "sha1", None, [], lambda o: set())[8:] == _payload(
        entries
    )
