"""Incremental switch: move a populated working tree to another commit.

Like ``git checkout REV`` (a two-way merge of HEAD's tree H, the index I and
the target tree M), per path:

* ``I == M``: nothing to do; the index entry and its stat data are kept.
* ``I == H``: the path moves to M, unless the work tree has local changes
  there (refuse, as git's "Your local changes ... would be overwritten").
* ``I != H`` and ``M == H``: a staged change that the switch carries over.
* otherwise (staged change and M differs): refuse.

``--force`` discards local changes to tracked paths (index and work tree
become M exactly) but untracked files are never removed or overwritten.
Local modifications are found the way git finds them: ``update-index
--refresh`` re-hashes only files whose stat data changed, then ``diff-files``
(both on a scratch copy of the index: the switch holds ``index.lock``, which
``update-index`` would take).

Deletions run in parallel (each unlink is a round trip on NFS), then the
engine writes added and changed entries, then directories left empty are
removed, deepest first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import stat as stat_mod
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pcheckout.context import Context
from pcheckout.errors import (
    SHOW_PATHS,
    DestinationError,
    LocalChangesError,
    PcheckoutError,
    UntrackedInTheWayError,
    WriteError,
    quote_path,
    quote_paths,
)
from pcheckout.fs.detect import FsInfo
from pcheckout.fs.files import full_path
from pcheckout.fs.parallel import MIN_PATHS_PER_THREAD, in_shares, lstat_many
from pcheckout.git import attributes
from pcheckout.git import index as ix
from pcheckout.git.indexsize import written_bytes
from pcheckout.git.lock import IndexLock, scratch_index
from pcheckout.git.objects import blob_oid
from pcheckout.git.promisor import fetch as fetch_blobs
from pcheckout.git.refs import Target, update_head
from pcheckout.git.runner import Git
from pcheckout.git.sparse import expand_sparse_directories
from pcheckout.git.sparse import load as load_sparsity
from pcheckout.git.tree import MODE_GITLINK, MODE_SYMLINK, Entry
from pcheckout.options import CheckoutOptions, Result
from pcheckout.plan.planner import plan_for
from pcheckout.write.gitwriter import write_by_git
from pcheckout.write.indexout import (
    index_entry,
    index_version,
    settle_racy_timestamps,
    settles_index,
    skip_hash,
)
from pcheckout.write.partial import select
from pcheckout.write.worktree import WriteRequest, write_tree

__all__ = ["Merge", "SwitchPlan", "apply_local_changes", "switch", "two_way_merge"]


# --- the two-way merge (pure) ---------------------------------------------------------------


@dataclass(frozen=True)
class Merge:
    """The two-way merge of the index I, HEAD's tree H and the target M, before
    the work tree is looked at."""

    keep: dict[bytes, ix.IndexEntry]  # index entries kept as they are (I == M, or carried over)
    change: list[bytes]  # paths moving from I to M, if the work tree allows
    refused: list[bytes]  # staged changes the target would overwrite


@dataclass(frozen=True)
class SwitchPlan:
    """What the switch does once local changes are known."""

    keep: dict[bytes, ix.IndexEntry]
    write: list[bytes]  # sorted
    delete: list[bytes]  # sorted
    refused: list[bytes]


def _same(a: ix.IndexEntry | Entry | None, b: Entry | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    oid = a.oid.hex() if isinstance(a.oid, bytes) else a.oid
    return a.mode == b.mode and oid == b.oid


def two_way_merge(
    index: Mapping[bytes, ix.IndexEntry],
    head: Mapping[bytes, Entry],
    target: Mapping[bytes, Entry],
    *,
    force: bool,
) -> Merge:
    """Classify every path of I and M as git's two-way merge does (see the module
    docstring); ``force`` moves every staged path to M."""
    keep: dict[bytes, ix.IndexEntry] = {}
    change: list[bytes] = []
    refused: list[bytes] = []
    for path in index.keys() | target.keys():
        i, m, h = index.get(path), target.get(path), head.get(path)
        if i is not None and m is not None and _same(i, m):
            keep[path] = i
            continue
        if not force and not _same(i, h):  # a staged change
            if _same(m, h):
                if i is not None:
                    keep[path] = i  # carry the staged change over
            else:
                refused.append(path)
            continue
        change.append(path)
    return Merge(keep, change, refused)


def apply_local_changes(
    merge: Merge,
    index: Mapping[bytes, ix.IndexEntry],
    target: Mapping[bytes, Entry],
    dirty: set[bytes],
    *,
    force: bool,
) -> SwitchPlan:
    """The switch once the work tree's local changes (``dirty``) are known: a
    changed path with local changes is refused, unless ``force``, which also
    restores every kept path that has them."""
    keep = dict(merge.keep)
    change = list(merge.change)
    refused = list(merge.refused)
    if force:
        for path in list(keep):
            if path in dirty and path in target:
                del keep[path]
                change.append(path)
    write: set[bytes] = set()
    delete: set[bytes] = set()
    for path in change:
        if path in dirty and not force and path in index:
            refused.append(path)
            continue
        if path in index:
            delete.add(path)
        if path in target:
            write.add(path)
    return SwitchPlan(keep, sorted(write), sorted(delete), refused)


# --- the work tree ------------------------------------------------------------------------


def _dirty_paths(git: Git, index_path: Path) -> set[bytes]:
    """Tracked paths whose work-tree file differs from the index (stat first).

    The switch holds ``index.lock``; ``update-index --refresh`` would take it
    too, so git refreshes a scratch copy of the index (``GIT_INDEX_FILE``),
    whose lock is its own.  The copy is only read from, never put back.  It
    keeps the index's mtime: git's racy-clean check compares each entry's
    mtime with the index file's, so a copy made a second later would trust
    a same-size edit made in the index's second."""
    with tempfile.TemporaryDirectory(prefix="pcheckout-refresh-") as scratch:
        copy = os.path.join(scratch, "index")
        shutil.copyfile(index_path, copy)
        st = os.stat(index_path)
        os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        env = dict(os.environ if git.env is None else git.env)
        env["GIT_INDEX_FILE"] = copy
        g = Git(git.cwd, debug=git.debug, env=env, exe=git.exe, version=git.version)
        g.run("update-index", "-q", "--refresh", "--ignore-submodules", ok_codes=(0, 1))
        out = g.out("diff-files", "--name-only", "-z", "--ignore-submodules")
    return {p for p in out.split(b"\0") if p}


def _modified(
    git: Git,
    root_b: bytes,
    index_path: Path,
    entries: list[ix.IndexEntry],
    hash_name: str,
    threads: _Threads,
) -> set[bytes]:
    """Which of ``entries`` differ in the work tree, as git decides it: stat data
    that matches (and is not racy) means clean; otherwise the content is hashed
    (through ``git hash-object``, so clean filters and eol apply)."""
    try:
        index_mtime = os.stat(index_path).st_mtime_ns // ix.NS_PER_S
    except OSError:
        index_mtime = 0
    dirty: set[bytes] = set()
    suspects: list[ix.IndexEntry] = []
    stats = _lstat_many(root_b, [e.path for e in entries], threads)
    for e, st in zip(entries, stats, strict=True):
        if st is None:
            dirty.add(e.path)
            continue
        if e.mode == MODE_GITLINK:
            if not stat_mod.S_ISDIR(st.st_mode):
                dirty.add(e.path)
            continue
        is_link = stat_mod.S_ISLNK(st.st_mode)
        if is_link != (e.mode == MODE_SYMLINK) or not (is_link or stat_mod.S_ISREG(st.st_mode)):
            dirty.add(e.path)
            continue
        c_s, c_ns, m_s, m_ns, _dev, ino, uid, gid, size = ix.stat_fields(
            st.st_ctime_ns, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_uid, st.st_gid, st.st_size
        )
        same = (e.mtime_s, e.mtime_ns, e.ctime_s, e.ctime_ns, e.ino, e.size, e.uid, e.gid) == (
            m_s,
            m_ns,
            c_s,
            c_ns,
            ino,
            size,
            uid,
            gid,
        )
        if same and e.mtime_s < index_mtime:
            continue  # clean by stat data, and not racily so
        suspects.append(e)
    files = []
    for e in suspects:
        full = full_path(root_b, e.path)
        if e.mode == MODE_SYMLINK:
            if blob_oid(os.readlink(full), hash_name) != e.oid.hex():
                dirty.add(e.path)
        else:
            files.append(e)
    plain = [e for e in files if b"\n" not in e.path]
    if plain:
        out = git.out(
            "hash-object", "--stdin-paths", input=b"".join(e.path + b"\n" for e in plain)
        ).split()
        for e, oid in zip(plain, out, strict=True):
            if bytes.fromhex(oid.decode()) != e.oid:
                dirty.add(e.path)
    for e in files:
        if b"\n" in e.path:
            oid = git.out("hash-object", "--", os.fsdecode(e.path)).strip()
            if bytes.fromhex(oid.decode()) != e.oid:
                dirty.add(e.path)
    return dirty


@dataclass(frozen=True)
class _Threads:
    """How many threads stat and unlink, and the least share worth a thread."""

    workers: int
    min_share: int = MIN_PATHS_PER_THREAD


def _lstat_many(root_b: bytes, paths: list[bytes], t: _Threads) -> list[os.stat_result | None]:
    """``lstat`` of each path under ``root_b`` (None: absent), in parallel where
    each is a round trip (fs/parallel.py)."""
    return lstat_many(root_b, paths, t.workers, t.min_share)


def _stat_threads(fs: FsInfo, workers: int, explicit: int | None) -> _Threads:
    """Threads for lstat: ``explicit`` if given (every path may get its own
    thread), else the writers' count where a call waits on a server, else one
    (on tmpfs or a disk an lstat is a microsecond of CPU)."""
    if explicit is not None:
        return _Threads(explicit, 1)
    return _Threads(workers if fs.latency_bound else 1)


def switch(
    ctx: Context,
    opts: CheckoutOptions,
    target: Target,
    entries: list[Entry],
    head_entries: list[Entry],
    fs: FsInfo | None = None,
    lock: IndexLock | None = None,
) -> Result:
    """Move a populated work tree from HEAD to ``target`` (``entries`` is its
    tree, ``head_entries`` HEAD's), as ``git checkout REV`` does; ``fs`` is the
    destination's filesystem when already detected.  ``lock`` is ``index.lock``,
    held since before the index was read (None: a dry run); the new index is
    committed through it (git's writer writes a scratch index).

    In a sparse checkout (``git/sparse.py``) only paths in the cone are written;
    a skip-worktree entry's absent file is no local change; a path of the target
    outside the cone is recorded with the skip-worktree bit; an entry the
    patterns now exclude is removed from the work tree if clean (kept, without
    the bit, if not: git's "not up to date" warning), one they now include is
    written.  A sparse index is expanded.  In a partial clone the missing blobs
    of what is written are fetched in one batch before anything is changed."""
    git, repo, config = ctx.git, ctx.repo, ctx.config
    assert repo.work_tree is not None  # checkout() refused bare repositories
    root = repo.work_tree
    root_b = os.fsencode(root)
    index = ix.read_index(repo.index_path)
    if any(e.stage for e in index.entries):
        raise DestinationError("the index has unmerged entries; resolve them first")
    index_entries = (
        expand_sparse_directories(git, index.entries) if index.sparse else list(index.entries)
    )
    in_index = {e.path: e for e in index_entries}
    in_target = {e.path: e for e in entries}
    in_head = {e.path: e for e in head_entries}
    skipped = {p for p, e in in_index.items() if e.extended_flags & ix.EXT_FLAG_SKIP_WORKTREE}
    sparsity = load_sparsity(git, config, repo.git_dir)

    def inside(path: bytes, mode: int) -> bool:
        return sparsity is None or sparsity.includes(path, mode)

    merge = two_way_merge(in_index, in_head, in_target, force=opts.force)
    # Kept entries the patterns now put on the other side of the cone.
    flip_in = sorted(p for p, e in merge.keep.items() if p in skipped and inside(p, e.mode))
    flip_out = sorted(
        p for p, e in merge.keep.items() if p not in skipped and not inside(p, e.mode)
    )
    # Stat (and delete) in parallel where each call is a round trip; the count
    # for these comes from the same policy as the writers'.
    fs, probe = plan_for(
        root,
        entries=len(merge.change),
        nbytes=0,
        workers=opts.workers,
        environ=opts.environ,
        config=config,
        adapt=False,
        fs=fs,
    )
    threads = _stat_threads(fs, probe.workers, opts.stat_threads)
    if opts.force:
        dirty = _dirty_paths(git, repo.index_path)  # git checkout -f restores every tracked file
    else:  # only the paths the switch changes need checking, stat data first
        # (an absent skip-worktree file is not a local change: git never looks)
        checked = [in_index[p] for p in [*merge.change, *flip_out]
                   if p in in_index and p not in skipped]  # fmt: skip
        dirty = _modified(git, root_b, repo.index_path, checked, repo.object_format, threads)
    dirty -= skipped
    plan = apply_local_changes(merge, in_index, in_target, dirty, force=opts.force)
    if plan.refused:
        raise LocalChangesError(
            "your local changes to these files would be overwritten by checkout: "
            + quote_paths(plan.refused)
            + "; commit or stash them, or use --force to discard them"
        )
    left = [p for p in flip_out if p in dirty]  # git keeps these, without the bit
    flip_out = [p for p in flip_out if p not in dirty]
    write_paths = sorted([p for p in plan.write if inside(p, in_target[p].mode)] + flip_in)
    recorded = [p for p in plan.write if not inside(p, in_target[p].mode)]
    remove = sorted([p for p in plan.delete if p not in skipped] + flip_out)
    files_plan = dataclasses.replace(plan, write=write_paths, delete=remove)
    _refuse_untracked_in_the_way(root_b, files_plan, in_index, in_target, threads)

    write_entries = [
        in_target[p] if p in in_target else _entry_of(in_index[p]) for p in write_paths
    ]
    sel = select(ctx, write_entries, None)
    fs, wplan = plan_for(
        root,
        entries=len(write_entries) + len(remove),
        nbytes=sum(max(e.size, 0) for e in write_entries),
        workers=opts.workers,
        environ=opts.environ,
        config=config,
        adapt=opts.adapt,
        fs=fs,
        writer=opts.writer,
        git_version=git.version,
        processes=opts.processes,
    )
    result = Result(
        "switch",
        len(write_entries),
        sum(max(e.size, 0) for e in write_entries),
        wplan,
        fs,
        dry_run=opts.dry_run,
        deleted=len(set(remove) - set(write_paths)),
        skip_worktree=len(recorded) + len(flip_out) + len(skipped & set(plan.keep) - set(flip_in)),
        fetch_blobs=len(sel.missing),
        warnings=list(sparsity.warnings) if sparsity is not None else [],
    )
    if left:
        result.warnings.append(
            "The following paths are not up to date and were left despite sparse patterns: "
            + quote_paths(left)
        )
    if opts.dry_run:
        return result

    t0 = time.monotonic()
    if wplan.writer == "git":
        # --force: pcheckout refused untracked files in the way above (git checkout -f would
        # overwrite them); git's oneway merge discards the local changes and moves the index.
        assert lock is not None
        with scratch_index(lock, copy=True) as scratch:
            by_git = dataclasses.replace(ctx.git, env=scratch.env(ctx.git.env))
            write_by_git(ctx._replace(git=by_git), target.tree, wplan)
            # git does not say what it wrote; its index holds the sizes (-1: unknown).
            result.bytes = written_bytes(scratch.path, repo.object_format, set(write_paths))
            lock.commit_from(scratch.path)
        result.head = update_head(git, repo, config, opts.rev, target)
        result.seconds = time.monotonic() - t0
        result.written = len(write_entries)
        return result
    if sel.missing:  # before anything changes: a failed fetch leaves the tree as it was
        fetched = fetch_blobs(git, sel.remotes, sorted(sel.missing))
        result.fetched_bytes, result.fetches = fetched.bytes, fetched.fetches
    _delete_parallel(root_b, remove, _Threads(max(1, wplan.workers), threads.min_share))
    _remove_empty_dirs(root_b, set(remove), write_entries)
    conversion = attributes.plan_conversion(
        git, repo, config, target.tree, write_entries, environ=ctx.environ, tree_entries=entries
    )
    result.add_conversion(conversion)
    outcome = write_tree(
        ctx, WriteRequest(target.tree, write_entries, root, wplan, conversion=conversion)
    )
    moved = set(flip_in) | set(flip_out)
    new_entries = [e for p, e in plan.keep.items() if p not in moved]
    for e, st in zip(write_entries, outcome.stats, strict=True):
        if st is None:
            raise PcheckoutError(f"internal error: no stat data for {quote_path(e.path)}")
        new_entries.append(index_entry(e, st))
    new_entries += [_skip_worktree(in_target[p]) for p in recorded]
    new_entries += [_skip_worktree(_entry_of(in_index[p])) for p in flip_out]
    if settles_index(fs):
        settle_racy_timestamps(outcome.stats, outcome.seconds)
    data = ix.encode_index(
        new_entries,
        version=index.version if index.version in (3, 4) else index_version(config, ctx.environ),
        hash_name=repo.object_format,
        skip_hash=skip_hash(config, git.version),
    )
    if lock is not None:
        lock.commit(data)
    else:
        ix.write_index_bytes(repo.index_path, data)
    result.head = update_head(git, repo, config, opts.rev, target)
    result.seconds = time.monotonic() - t0
    result.bytes = outcome.bytes
    result.written = len(write_entries)
    result.adapt_summary = outcome.adapt_summary
    result.processes = outcome.processes
    return result


def _entry_of(e: ix.IndexEntry) -> Entry:
    """A tree entry for what an index entry records (its size is not known)."""
    return Entry(e.path, e.mode, e.oid.hex(), -1)


def _skip_worktree(e: Entry) -> ix.IndexEntry:
    """An entry outside the sparse checkout: skip-worktree, zero stat data (as git)."""
    return ix.IndexEntry(e.path, e.mode, bytes.fromhex(e.oid), 0, 0, 0, 0, 0, 0, 0, 0, 0,
                         extended_flags=ix.EXT_FLAG_SKIP_WORKTREE)  # fmt: skip


def _refuse_untracked_in_the_way(
    root_b: bytes,
    plan: SwitchPlan,
    in_index: Mapping[bytes, ix.IndexEntry],
    in_target: Mapping[bytes, Entry],
    threads: _Threads,
) -> None:
    """Untracked files in the way of what the switch is about to create refuse it:
    pcheckout never deletes or overwrites untracked files."""
    tracked = set(in_index)
    gone = set(plan.delete)
    in_the_way: list[bytes] = []
    checked_dirs: dict[bytes, bool] = {}
    looked = _look_up(root_b, plan.write, tracked, threads)
    for path in plan.write:
        # leading directories must be real directories, or absent, or tracked files we delete
        parts = path.split(b"/")
        for k in range(1, len(parts)):
            d = b"/".join(parts[:k])
            if d in checked_dirs:
                continue
            st = looked[d]
            ok = st is None or stat_mod.S_ISDIR(st.st_mode) or d in gone
            if st is not None and stat_mod.S_ISLNK(st.st_mode) and d not in gone:
                ok = False
            checked_dirs[d] = ok
            if not ok:
                in_the_way.append(d)
        if path in tracked:
            continue
        st = looked[path]
        if st is None:
            continue
        if stat_mod.S_ISDIR(st.st_mode):
            if in_target[path].mode == MODE_GITLINK:
                continue
            # a directory where a file goes: fine only if everything in it is tracked and leaving
            inside = _untracked_below(root_b, path, tracked)
            if inside:
                in_the_way.extend(inside[:SHOW_PATHS])
        else:
            in_the_way.append(path)
    if in_the_way:
        raise UntrackedInTheWayError(
            "untracked working tree files would be overwritten by checkout: "
            + quote_paths(sorted(set(in_the_way)))
            + "; move or remove them first (pcheckout never deletes untracked files)"
        )


def _look_up(
    root_b: bytes, to_write: list[bytes], tracked: set[bytes], threads: _Threads
) -> dict[bytes, os.stat_result | None]:
    """lstat of every leading directory of ``to_write`` and of each new path that
    is not tracked: what the untracked-files check needs, asked in parallel."""
    wanted: dict[bytes, None] = {}
    for path in to_write:
        d = path.rpartition(b"/")[0]
        chain = []
        while d and d not in wanted:
            chain.append(d)
            d = d.rpartition(b"/")[0]
        wanted.update(dict.fromkeys(reversed(chain)))
        if path not in tracked:
            wanted[path] = None
    paths = list(wanted)
    return dict(zip(paths, _lstat_many(root_b, paths, threads), strict=True))


def _untracked_below(root_b: bytes, d: bytes, tracked: set[bytes]) -> list[bytes]:
    found: list[bytes] = []
    for dirpath, dirnames, filenames in os.walk(full_path(root_b, d)):
        rel = os.path.relpath(dirpath, root_b)
        for name in filenames + [n for n in dirnames if os.path.islink(os.path.join(dirpath, n))]:
            p = os.path.join(rel, name)
            if p not in tracked:
                found.append(p)
    return found


def _delete_parallel(root_b: bytes, paths: list[bytes], threads: _Threads) -> None:
    """Unlink ``paths`` (a gitlink's directory only if empty), in parallel."""

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

    in_shares(rm, paths, threads.workers, threads.min_share)


def _remove_empty_dirs(root_b: bytes, deleted: set[bytes], written: list[Entry]) -> None:
    """Remove directories that held deleted entries and are now empty (deepest
    first).  A directory still holding anything (kept or untracked files) is
    left: rmdir refuses it.  Directories the new entries need are kept too."""
    needed = set()
    for e in written:
        d = e.path.rpartition(b"/")[0]
        while d and d not in needed:
            needed.add(d)
            d = d.rpartition(b"/")[0]
    candidates = set()
    for p in deleted:
        d = p.rpartition(b"/")[0]
        while d and d not in candidates:
            candidates.add(d)
            d = d.rpartition(b"/")[0]
    for d in sorted(candidates - needed, key=lambda x: x.count(b"/"), reverse=True):
        # not empty (untracked files) or already gone: keep it, as git does
        with contextlib.suppress(OSError):
            os.rmdir(full_path(root_b, d))
