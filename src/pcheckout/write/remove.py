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

from pcheckout.errors import WriteError, decode
from pcheckout.fs.files import full_path
from pcheckout.fs.parallel import in_shares
from pcheckout.git.tree import Entry

__all__ = ["delete_parallel", "remove_empty_dirs", "remove_expendable", "rmdir_warning"]


def delete_parallel(
    root_b: bytes, paths: Sequence[bytes], threads: int, min_share: int
) -> list[tuple[bytes, OSError]]:
    """Unlink ``paths`` (a gitlink's directory only if empty) on up to ``threads``
    threads, each given at least ``min_share`` of them; the gitlinks' directories left,
    with why (a populated submodule's: git warns of each, unpack-trees.c ``unlink_entry``
    -> ``rmdir_or_warn``)."""
    kept: list[tuple[bytes, OSError]] = []

    def rm(p: bytes) -> None:
        full = full_path(root_b, p)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return
        try:
            if stat_mod.S_ISDIR(st.st_mode):  # a gitlink's directory: only if empty
                try:
                    os.rmdir(full)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    kept.append((p, exc))  # (list.append: one at a time)
            else:
                os.unlink(full)
        except OSError as exc:
            raise WriteError(p, exc) from None

    in_shares(rm, list(paths), threads, min_share)
    return sorted(kept, key=lambda k: k[0])


def rmdir_warning(path: bytes, exc: OSError) -> str:
    """git's warning for a directory it could not remove (wrapper.c
    ``warn_if_unremovable``: "unable to rmdir '<path>': <strerror>")."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return f"warning: unable to rmdir '{decode(path)}': {reason}"


def _cwd_in(root_b: bytes) -> bytes:
    """The process's working directory, relative to the work tree (b"" where it is outside):
    since 2.35 git removes no directory a command was started in (setup.c original_cwd)."""
    try:
        rel = os.path.relpath(os.getcwdb(), os.path.realpath(root_b))
    except (OSError, ValueError):  # the cwd is gone already
        return b""
    return b"" if rel == b"." or rel.startswith(b"..") else rel


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
    needed.add(_cwd_in(root_b))  # git keeps the process's directory (dir.c remove_path)
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
