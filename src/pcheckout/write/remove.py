"""Removing what a switch deletes from the work tree: the paths in parallel (each unlink
is a round trip on NFS), then the directories they leave empty, deepest first, as git's
checkout removes them (unpack-trees.c ``unlink_entry``: a directory still holding
anything, kept or untracked, is left)."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat as stat_mod
from collections.abc import Collection, Sequence

from pcheckout.errors import WriteError
from pcheckout.fs.files import full_path
from pcheckout.fs.parallel import in_shares
from pcheckout.git.tree import Entry

__all__ = ["delete_parallel", "remove_empty_dirs", "remove_expendable"]


def delete_parallel(root_b: bytes, paths: Sequence[bytes], threads: int, min_share: int) -> None:
    """Unlink ``paths`` (a gitlink's directory only if empty) on up to ``threads``
    threads, each given at least ``min_share`` of them."""

    def rm(p: bytes) -> None:
        full = full_path(root_b, p)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return
        try:
            if stat_mod.S_ISDIR(st.st_mode):  # a gitlink's directory: only if empty
                with contextlib.suppress(OSError):
                    os.rmdir(full)
            else:
                os.unlink(full)
        except OSError as exc:
            raise WriteError(p, exc) from None

    in_shares(rm, list(paths), threads, min_share)


def remove_empty_dirs(root_b: bytes, deleted: Collection[bytes], written: Sequence[Entry]) -> None:
    """Remove directories that held deleted entries and are now empty (deepest
    first).  A directory still holding anything (kept or untracked files) is
    left: rmdir refuses it.  Directories the new entries need are kept too."""
    needed: set[bytes] = set()
    for e in written:
        d = e.path.rpartition(b"/")[0]
        while d and d not in needed:
            needed.add(d)
            d = d.rpartition(b"/")[0]
    candidates: set[bytes] = set()
    for p in deleted:
        d = p.rpartition(b"/")[0]
        while d and d not in candidates:
            candidates.add(d)
            d = d.rpartition(b"/")[0]
    for d in sorted(candidates - needed, key=lambda x: x.count(b"/"), reverse=True):
        # not empty (untracked files) or already gone: keep it, as git does
        with contextlib.suppress(OSError):
            os.rmdir(full_path(root_b, d))


def remove_expendable(root_b: bytes, paths: Sequence[bytes]) -> None:
    """Remove ``paths``, ignored files and directories in the way of what is written, a
    directory with all it holds (unpack-trees.c: git's checkout overwrites ignored files,
    remove_subtree for a directory)."""
    for p in paths:
        full = full_path(root_b, p)
        try:
            if stat_mod.S_ISDIR(os.lstat(full).st_mode):
                shutil.rmtree(full)
            else:
                os.unlink(full)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise WriteError(p, exc) from None
