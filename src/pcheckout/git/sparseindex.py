"""A sparse index as git 2.39 writes it (sparse-index.c convert_to_sparse): with
``index.sparse=true`` in a cone-mode sparse checkout, every directory outside the cone
whose entries are all skip-worktree (none unmerged) is recorded as one
sparse-directory entry: its path with a trailing ``/``, mode 040000, the directory's
tree id, zero stat data and the skip-worktree bit; the index then ends with the empty
``sdir`` extension.  git does it on every index write it can (write_locked_index),
so a checkout's index is collapsed; never for a split index or one with unmerged
entries."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence

from pcheckout.git import cachetree
from pcheckout.git.config import config_bool
from pcheckout.git.index import EXT_FLAG_SKIP_WORKTREE, MODE_SPARSE_DIR, NO_STAT, IndexEntry
from pcheckout.git.indexformat import FLAG_STAGE_MASK
from pcheckout.git.sparse import Sparsity

__all__ = ["collapse", "wanted"]


def wanted(sparsity: Sparsity | None, config: Mapping[str, str], split: bool) -> bool:
    """Whether git would write a sparse index (sparse-index.c is_sparse_index_allowed):
    ``index.sparse`` with cone-mode patterns git accepts as such, no split index
    (``split``: the index is written split)."""
    return (
        sparsity is not None
        and sparsity.cone
        and config_bool(config.get("index.sparse"), False)
        and not split
    )


def collapse(entries: Sequence[IndexEntry], sparsity: Sparsity, hash_name: str) -> list[IndexEntry]:
    """``entries`` (a full index, in index order) with each directory git would collapse
    replaced by its sparse-directory entry (convert_to_sparse_rec)."""
    if not entries or any(e.flags & FLAG_STAGE_MASK for e in entries):
        return list(entries)  # (index_has_unmerged_entries: git keeps it full)
    items = ((e.path, e.mode, e.oid, False) for e in entries)
    trees = cachetree.tree_ids(items, hash_name)
    paths = [e.path for e in entries]
    out: list[IndexEntry] = []
    _collapse(_Walk(entries, paths, sparsity, trees, out), 0, len(entries), b"")
    return out


class _Walk:
    """What the recursion shares: the entries, their paths, the cone, the trees' ids."""

    __slots__ = ("entries", "paths", "sparsity", "trees", "out")

    def __init__(
        self,
        entries: Sequence[IndexEntry],
        paths: list[bytes],
        sparsity: Sparsity,
        trees: Mapping[bytes, bytes],
        out: list[IndexEntry],
    ) -> None:
        self.entries = entries
        self.paths = paths
        self.sparsity = sparsity
        self.trees = trees
        self.out = out


def _collapse(w: _Walk, start: int, end: int, prefix: bytes) -> None:
    """The entries ``start:end``, all below directory ``prefix`` ("" or ending in "/")."""
    if prefix and _collapsible(w, start, end, prefix):
        oid = w.trees[prefix[:-1]]
        w.out.append(
            IndexEntry(
                prefix, MODE_SPARSE_DIR, oid, *NO_STAT, extended_flags=EXT_FLAG_SKIP_WORKTREE
            )
        )
        return
    i = start
    n = len(prefix)
    while i < end:
        path = w.paths[i]
        slash = path.find(b"/", n)
        if slash < 0:
            w.out.append(w.entries[i])
            i += 1
            continue
        sub = path[: slash + 1]
        # every path below sub/ sorts before sub0 ("/" + 1 == "0")
        j = bisect_left(w.paths, path[:slash] + b"0", i, end)
        _collapse(w, i, j, sub)
        i = j


def _collapsible(w: _Walk, start: int, end: int, prefix: bytes) -> bool:
    """Outside the cone (a directory is in if a file directly in it would be: dir.c
    path_matches_pattern_list), and every entry below skip-worktree.  A gitlink does not
    keep it full: convert_to_sparse_rec would, but git's checkout over a sparse index
    makes the sparse directory from the tree without looking in (unpack-trees.c
    unpack_callback: a directory outside the cone is one entry), as on every checkout
    after ``git sparse-checkout set --sparse-index``; compared with git 2.39."""
    if w.sparsity.includes(prefix + b"-"):
        return False
    skip = EXT_FLAG_SKIP_WORKTREE
    return all(w.entries[k].extended_flags & skip for k in range(start, end))
