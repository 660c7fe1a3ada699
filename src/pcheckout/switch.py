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
--refresh`` re-hashes only files whose stat data changed, then ``diff-files``.

Deletions run in parallel (each unlink is a round trip on NFS), then the
engine writes added and changed entries, then directories left empty are
removed, deepest first.
"""

from __future__ import annotations

import os
import stat as stat_mod
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pcheckout.errors import (
    SHOW_PATHS,
    DestinationError,
    PcheckoutError,
    WriteError,
    quote_path,
    quote_paths,
)
from pcheckout.git import index as ix
from pcheckout.git.objects import blob_oid
from pcheckout.git.runner import Git, Repo
from pcheckout.git.tree import MODE_GITLINK, MODE_SYMLINK, Entry

if TYPE_CHECKING:
    from pcheckout.checkout import CheckoutOptions, Reporter, Result, Target

T = TypeVar("T")


class LocalChangesError(DestinationError):
    pass


class UntrackedInTheWayError(DestinationError):
    pass


def _dirty_paths(git: Git) -> set[bytes]:
    """Tracked paths whose work-tree file differs from the index (stat first)."""
    git.run("update-index", "-q", "--refresh", "--ignore-submodules", ok_codes=(0, 1))
    out = git.out("diff-files", "--name-only", "-z", "--ignore-submodules")
    return {p for p in out.split(b"\0") if p}


_U32 = 0xFFFFFFFF


def _modified(
    git: Git, root_b: bytes, index_path: Path, entries: list[ix.IndexEntry], hash_name: str,
    workers: int = 1,
) -> set[bytes]:
    """Which of ``entries`` differ in the work tree, as git decides it: stat data
    that matches (and is not racy) means clean; otherwise the content is hashed
    (through ``git hash-object``, so clean filters and eol apply)."""
    try:
        index_mtime = os.stat(index_path).st_mtime_ns // 10**9
    except OSError:
        index_mtime = 0
    dirty: set[bytes] = set()
    suspects: list[ix.IndexEntry] = []
    stats = _lstat_many(root_b, [e.path for e in entries], workers)
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
        m_s, m_ns = divmod(st.st_mtime_ns, 10**9)
        c_s, c_ns = divmod(st.st_ctime_ns, 10**9)
        same = (e.mtime_s, e.mtime_ns, e.ctime_s, e.ctime_ns, e.ino, e.size, e.uid, e.gid) == (
            m_s & _U32, m_ns, c_s & _U32, c_ns, st.st_ino & _U32, st.st_size & _U32,
            st.st_uid & _U32, st.st_gid & _U32)
        if same and e.mtime_s < index_mtime:
            continue  # clean by stat data, and not racily so
        suspects.append(e)
    files = []
    for e in suspects:
        full = root_b + b"/" + e.path
        if e.mode == MODE_SYMLINK:
            if blob_oid(os.readlink(full), hash_name) != e.oid.hex():
                dirty.add(e.path)
        else:
            files.append(e)
    plain = [e for e in files if b"\n" not in e.path]
    if plain:
        out = git.out("hash-object", "--stdin-paths",
                      input=b"".join(e.path + b"\n" for e in plain)).split()
        for e, oid in zip(plain, out, strict=True):
            if bytes.fromhex(oid.decode()) != e.oid:
                dirty.add(e.path)
    for e in files:
        if b"\n" in e.path:
            oid = git.out("hash-object", "--", os.fsdecode(e.path)).strip()
            if bytes.fromhex(oid.decode()) != e.oid:
                dirty.add(e.path)
    return dirty


def _lexists(path: bytes) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def _in_shares(call: Callable[[bytes], T], paths: list[bytes], workers: int) -> list[T]:
    """``call(path)`` for each path, in order, over up to ``workers`` threads,
    each taking one contiguous share (neighbours share a directory, whose lock
    serializes creates and unlinks) with no per-path task overhead."""
    n = max(1, min(workers, len(paths) // MIN_PATHS_PER_THREAD))
    if n == 1:
        return [call(p) for p in paths]

    def share(part: list[bytes]) -> list[T]:
        return [call(p) for p in part]

    parts = [paths[len(paths) * j // n : len(paths) * (j + 1) // n] for j in range(n)]
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="pcheckout-io") as pool:
        return [r for part in pool.map(share, parts) for r in part]


#: A thread is worth starting for this many lstats or unlinks (a guess: on
#: tmpfs either is a few microseconds, a thread start ~50 us).
MIN_PATHS_PER_THREAD = 16


def _lstat_many(root_b: bytes, paths: list[bytes], workers: int) -> list[os.stat_result | None]:
    """``lstat`` of each path under ``root_b`` (None: absent): on NFS or FUSE
    each is a round trip (measured on the 1 ms latency mount: ~400 sequential
    lstats were 0.4 s of a 1.9 s switch)."""
    return _in_shares(lambda p: _lexists(root_b + b"/" + p), paths, workers)


def _stat_workers(fs: object, workers: int) -> int:
    """Threads for lstat: the writers' count where a call waits on a server,
    else one (on tmpfs or a disk an lstat is a microsecond of CPU)."""
    return workers if getattr(fs, "latency_bound", False) else 1


def switch(
    git: Git,
    repo: Repo,
    config: dict[str, str],
    opts: CheckoutOptions,
    target: Target,
    entries: list[Entry],
    head_entries: list[Entry],
    ui: Reporter,
) -> Result:
    from pcheckout import checkout as co


    assert repo.work_tree is not None
    root = repo.work_tree
    root_b = os.fsencode(root)
    index = ix.read_index(repo.index_path)
    if any(e.stage for e in index.entries):
        raise DestinationError("the index has unmerged entries; resolve them first")
    I = {e.path: e for e in index.entries}
    M = {e.path: e for e in entries}
    H = {e.path: e for e in head_entries}  # HEAD's tree (listed beside the target's)

    def same_im(i: ix.IndexEntry, m: Entry) -> bool:
        return i.mode == m.mode and i.oid.hex() == m.oid

    def same_ih(i: ix.IndexEntry | None, h: Entry | None) -> bool:
        if i is None or h is None:
            return i is None and h is None
        return i.mode == h.mode and i.oid.hex() == h.oid

    to_write: set[bytes] = set()
    to_delete: set[bytes] = set()
    keep_index: dict[bytes, ix.IndexEntry] = {}
    refused: list[bytes] = []
    change: list[bytes] = []  # paths the switch moves from I to M
    for path in I.keys() | M.keys():
        i, m, h = I.get(path), M.get(path), H.get(path)
        if i is not None and m is not None and same_im(i, m):
            keep_index[path] = i
            continue
        staged = not same_ih(i, h)
        if staged and not opts.force:
            m_is_h = (m is None and h is None) or (
                m is not None and h is not None and m.mode == h.mode and m.oid == h.oid
            )
            if m_is_h:
                if i is not None:
                    keep_index[path] = i  # carry the staged change over
                continue
            refused.append(path)
            continue
        change.append(path)
    # Stat (and delete) in parallel where each call is a round trip; the count
    # for these comes from the same policy as the writers'.
    fs, probe = co.plan_workers(git, config, root, [Entry(p, 0, "", 0) for p in change],
                                opts.workers, opts.environ, adapt=False)
    stat_workers = _stat_workers(fs, probe.workers)
    if opts.force:
        # git checkout -f: every tracked file with local changes is restored too.
        dirty = _dirty_paths(git)
        for path in list(keep_index):
            if path in dirty and path in M:
                del keep_index[path]
                change.append(path)
    else:
        # Only the paths the switch changes need checking, stat data first.
        dirty = _modified(git, root_b, repo.index_path, [I[p] for p in change if p in I],
                          repo.object_format, stat_workers)
    for path in change:
        i, m = I.get(path), M.get(path)
        if path in dirty and not opts.force and i is not None:
            refused.append(path)
            continue
        if i is not None:
            to_delete.add(path)
        if m is not None:
            to_write.add(path)
    if refused:
        raise LocalChangesError(
            "your local changes to these files would be overwritten by checkout: "
            + quote_paths(refused) + "; commit or stash them, or use --force to discard them"
        )

    # Untracked files in the way of what we are about to create.
    tracked = set(I)
    in_the_way: list[bytes] = []
    checked_dirs: dict[bytes, bool] = {}
    gone = to_delete
    looked = _look_up(root_b, sorted(to_write), tracked, stat_workers)
    for path in sorted(to_write):
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
            if M[path].mode == MODE_GITLINK:
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

    write_entries = [M[p] for p in sorted(to_write)]
    plan_entries = write_entries + [Entry(p, 0, "", 0) for p in sorted(to_delete)]
    fs, plan = co.plan_workers(git, config, root, plan_entries, opts.workers, opts.environ,
                               opts.adapt, fs=fs)
    result = co.Result(
        "switch",
        len(write_entries),
        sum(max(e.size, 0) for e in write_entries),
        plan,
        fs,
        dry_run=opts.dry_run,
        deleted=len(to_delete - to_write),
    )
    if opts.dry_run:
        return result

    t0 = time.monotonic()
    _delete_parallel(root_b, sorted(to_delete), max(1, plan.workers))
    _remove_empty_dirs(root_b, to_delete, write_entries)
    from pcheckout.git import attributes

    conversion = attributes.conversion_reasons(entries, config, repo.common_dir)
    outcome = co.write_tree(
        git, config, repo, target.tree, write_entries, root, plan, ui,
        conversion=bool(conversion), verify_existing=False, spawn=opts.spawn, overwrite=False,
    )
    new_entries = list(keep_index.values())
    for e, st in zip(write_entries, outcome.stats, strict=True):
        if st is None:
            raise PcheckoutError(f"internal error: no stat data for {quote_path(e.path)}")
        new_entries.append(co.index_entry(e, st))  # type: ignore[arg-type]
    if co.settles_index(fs):
        co.settle_racy_timestamps(outcome.stats, outcome.seconds)
    ix.write_index(
        repo.index_path,
        sorted(new_entries, key=ix.sort_key),
        version=co._index_version(config) if index.version not in (3, 4) else index.version,
        hash_name=repo.object_format,
        skip_hash=co.skip_hash(config, git.version),
    )
    result.head = co.update_head(git, repo, config, opts.rev, target)
    result.seconds = time.monotonic() - t0
    result.bytes = outcome.bytes
    result.written = len(write_entries)
    result.adapt_summary = getattr(outcome, "adapt_summary", None)
    result.processes = outcome.processes
    return result


def _look_up(
    root_b: bytes, to_write: list[bytes], tracked: set[bytes], workers: int
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
    return dict(zip(paths, _lstat_many(root_b, paths, workers), strict=True))


def _untracked_below(root_b: bytes, d: bytes, tracked: set[bytes]) -> list[bytes]:
    found: list[bytes] = []
    for dirpath, dirnames, filenames in os.walk(root_b + b"/" + d):
        rel = os.path.relpath(dirpath, root_b)
        for name in filenames + [n for n in dirnames if os.path.islink(os.path.join(dirpath, n))]:
            p = os.path.join(rel, name)
            if p not in tracked:
                found.append(p)
    return found


def _delete_parallel(root_b: bytes, paths: list[bytes], workers: int) -> None:
    """Unlink ``paths`` (a gitlink's directory only if empty), in parallel."""

    def rm(p: bytes) -> None:
        full = root_b + b"/" + p
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return
        try:
            if stat_mod.S_ISDIR(st.st_mode):  # a gitlink's directory: only if empty
                try:
                    os.rmdir(full)
                except OSError:
                    pass
            else:
                os.unlink(full)
        except OSError as exc:
            raise WriteError(p, exc) from None

    _in_shares(rm, paths, workers)


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
        try:
            os.rmdir(root_b + b"/" + d)
        except OSError:
            pass  # not empty (untracked files) or already gone: keep it, as git does


__all__ = ["switch", "LocalChangesError", "UntrackedInTheWayError"]
