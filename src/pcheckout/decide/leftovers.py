"""What interrupted runs left in the work tree, and which of it a re-run may change.

A run interrupted at any moment (SIGINT, SIGTERM, SIGKILL, a power cut) leaves its
journal (``write/journal.py``) naming the tree it was writing and the trees earlier
interrupted runs were writing or leaving.  Each path on which those trees differ was
left as one of them has it, or absent, or cut short: pcheckout writes a file under its
own name, so a file cut short is one whose bytes are a prefix of the blob, or empty.
Such a path is the runs' own, and the re-run brings it to its target, whatever that
target is: the tree the interrupted run was writing (finishing it) or another one
(nothing of the first is left).  A path found as none of the trees has it was changed
since, by someone else: it is a local change, protected as git protects one.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pcheckout.decide.worktree import Look, by_stat, content_oids, index_seconds
from pcheckout.fs.files import full_path
from pcheckout.fs.parallel import lstat_many
from pcheckout.git import index as ix
from pcheckout.git.runner import Git
from pcheckout.git.tree import MODE_EXEC, MODE_FILE, MODE_GITLINK, MODE_SYMLINK, Entry, list_tree

__all__ = ["Leftovers", "earlier_tables", "find", "left_behind", "touched"]

Table = Mapping[bytes, Entry]


class Leftovers(NamedTuple):
    """The paths interrupted runs changed, by whose they are now."""

    ours: set[bytes]  # as one of the runs' trees has them, absent, or cut short
    present: set[bytes]  # of ``ours``, those the work tree holds (files, links or dirs)


def earlier_tables(git: Git, trees: Sequence[str], listed: Mapping[str, Table]) -> list[Table]:
    """The entries of each of ``trees`` by path, from ``listed`` (tree id -> table)
    where the run listed it already, else listed now."""
    tables = []
    for tree in trees:
        table = listed.get(tree)
        if table is None:
            table = {e.path: e for e in list_tree(git, tree)}
        tables.append(table)
    return tables


def left_behind(
    look: Look, trees: Sequence[str], tree: str, entries: Sequence[Entry]
) -> list[bytes]:
    """What interrupted runs of ``trees`` other than ``tree`` left that a fresh write of
    ``entries`` lacks: their own paths (as their tree has them, or cut short; absent ones
    too, so that the directories made for them go once empty).  One changed since stays."""
    others = [t for t in trees if t != tree]
    if not others:
        return []
    tables = earlier_tables(look.git, others, {})
    kept = {e.path for e in entries}
    paths = {p for table in tables for p in table if p not in kept}
    return sorted(find(look, paths, tables, {}).ours)


def touched(tables: Sequence[Table]) -> set[bytes]:
    """The paths on which ``tables`` differ (one lacks it, or the mode or blob differ):
    the only ones a run moving between these trees changes."""
    paths: set[bytes] = set()
    for table in tables:
        paths.update(table)
    return {p for p in paths if len({_key(t.get(p)) for t in tables}) > 1}


def _key(e: Entry | None) -> tuple[int, str] | None:
    return None if e is None else (e.mode, e.oid)


def find(
    look: Look, paths: set[bytes], tables: Sequence[Table], index: Mapping[bytes, ix.IndexEntry]
) -> Leftovers:
    """Whose each of ``paths`` (from :func:`touched`) is: the runs' own where the work tree
    holds it as one of ``tables`` has it (an entry of ``index`` for it whose stat data
    matches proves that without reading it), absent, or cut short by the interruption."""
    order = sorted(paths)
    stats = lstat_many(look.root_b, order, look.threads.workers, look.threads.min_share)
    index_mtime = index_seconds(look)
    dirs = _directories(tables)
    ours: set[bytes] = set()
    present: set[bytes] = set()
    unknown: dict[bytes, os.stat_result] = {}
    for path, st in zip(order, stats, strict=True):
        if st is None:
            ours.add(path)
            continue
        present.add(path)
        wanted = [t[path] for t in tables if path in t]
        e = index.get(path)
        if stat_mod.S_ISDIR(st.st_mode):
            if path in dirs or any(w.mode == MODE_GITLINK for w in wanted):
                ours.add(path)
        elif e is not None and _listed(e, wanted) and _clean(e, st, index_mtime, look):
            ours.add(path)
        else:
            unknown[path] = st
    ours |= _by_content(look, unknown, tables)
    return Leftovers(ours, present & ours)


def _clean(e: ix.IndexEntry, st: os.stat_result, index_mtime: int, look: Look) -> bool:
    """Clean by its stat data alone (and not racily so): the file the index recorded."""
    return by_stat(e, st, index_mtime, look.rules) is False


def _listed(e: ix.IndexEntry, wanted: Sequence[Entry]) -> bool:
    return any(w.mode == e.mode and w.oid == e.oid.hex() for w in wanted)


def _directories(tables: Sequence[Table]) -> set[bytes]:
    """Every directory some table has an entry below."""
    dirs: set[bytes] = set()
    for table in tables:
        for path in table:
            d = path.rpartition(b"/")[0]
            while d and d not in dirs:
                dirs.add(d)
                d = d.rpartition(b"/")[0]
    return dirs


def _by_content(
    look: Look, unknown: Mapping[bytes, os.stat_result], tables: Sequence[Table]
) -> set[bytes]:
    """Those of ``unknown`` whose content is a table's blob for them (of the same type and
    executable bit), or a file cut short of one."""
    links = {p for p, st in unknown.items() if stat_mod.S_ISLNK(st.st_mode)}
    files = [p for p, st in unknown.items() if stat_mod.S_ISREG(st.st_mode) or p in links]
    oids = content_oids(look, files, links)
    ours = set()
    for path in files:
        mode = _mode_of(unknown[path])
        wanted = [t[path] for t in tables if path in t]
        if any(_same(w, mode, oids.get(path), look) for w in wanted) or (
            path not in links and _cut_short(look, path, unknown[path], wanted)
        ):
            ours.add(path)
    return ours


def _same(w: Entry, mode: int, oid: str | None, look: Look) -> bool:
    """Whether the work tree's file (of ``mode``, hashing to ``oid``) is entry ``w`` as a
    checkout writes it: without ``core.fileMode`` the x bit is not compared, without
    ``core.symlinks`` a link is a plain file holding its target."""
    if w.oid != oid:
        return False
    if w.mode == MODE_SYMLINK and not look.rules.symlinks:
        return mode != MODE_SYMLINK
    if not look.rules.file_mode and mode != MODE_SYMLINK and w.mode != MODE_SYMLINK:
        return True
    return w.mode == mode


def _mode_of(st: os.stat_result) -> int:
    if stat_mod.S_ISLNK(st.st_mode):
        return MODE_SYMLINK
    return MODE_EXEC if st.st_mode & 0o100 else MODE_FILE


def _cut_short(look: Look, path: bytes, st: os.stat_result, wanted: Sequence[Entry]) -> bool:
    """Whether the file is a write the interruption cut short: empty, or its bytes a
    proper prefix of what a blob the runs were writing there is written as (its
    smudged bytes: ``cat-file --filters``)."""
    blobs = [w for w in wanted if w.mode not in (MODE_SYMLINK, MODE_GITLINK)]
    if not blobs:
        return False
    if st.st_size == 0:
        return True
    try:
        with open(full_path(look.root_b, path), "rb") as f:
            data = f.read()
    except OSError:
        return False
    for w in blobs:
        blob = look.git.out("cat-file", "--filters", f"--path={os.fsdecode(path)}", w.oid)
        if len(data) < len(blob) and blob.startswith(data):
            return True
    return False
