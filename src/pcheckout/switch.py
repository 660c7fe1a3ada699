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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import DestinationError, PcheckoutError, WriteError, quote_path
from .git import Git, Repo
from .tree import MODE_GITLINK, Entry, list_tree

if TYPE_CHECKING:
    from .checkout import CheckoutOptions, Reporter, Result

SHOW_PATHS = 5


class LocalChangesError(DestinationError):
    pass


class UntrackedInTheWayError(DestinationError):
    pass


def _names(paths: list[bytes]) -> str:
    shown = ", ".join(quote_path(p) for p in sorted(paths)[:SHOW_PATHS])
    return shown + (f" and {len(paths) - SHOW_PATHS} more" if len(paths) > SHOW_PATHS else "")


def _dirty_paths(git: Git) -> set[bytes]:
    """Tracked paths whose work-tree file differs from the index (stat first)."""
    git.run("update-index", "-q", "--refresh", "--ignore-submodules", ok_codes=(0, 1))
    out = git.out("diff-files", "--name-only", "-z", "--ignore-submodules")
    return {p for p in out.split(b"\0") if p}


def _lexists(path: bytes) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def switch(
    git: Git,
    repo: Repo,
    config: dict[str, str],
    opts: CheckoutOptions,
    commit: str,
    branch: str | None,
    entries: list[Entry],
    ui: Reporter,
) -> Result:
    from . import checkout as co
    from . import index as ix

    assert repo.work_tree is not None
    root = repo.work_tree
    root_b = os.fsencode(root)
    index = ix.read_index(repo.index_path)
    if any(e.stage for e in index.entries):
        raise DestinationError("the index has unmerged entries; resolve them first")
    I = {e.path: e for e in index.entries}
    M = {e.path: e for e in entries}
    head = git.run("rev-parse", "--verify", "--quiet", "HEAD^{tree}", ok_codes=(0, 1, 128))
    H: dict[bytes, Entry] = {}
    if head.returncode == 0:
        H = {e.path: e for e in list_tree(git, head.stdout.decode().strip(), sizes=False)}

    def same_im(i: ix.IndexEntry, m: Entry) -> bool:
        return i.mode == m.mode and i.oid.hex() == m.oid

    def same_ih(i: ix.IndexEntry | None, h: Entry | None) -> bool:
        if i is None or h is None:
            return i is None and h is None
        return i.mode == h.mode and i.oid.hex() == h.oid

    dirty = _dirty_paths(git)
    to_write: set[bytes] = set()
    to_delete: set[bytes] = set()
    keep_index: dict[bytes, ix.IndexEntry] = {}
    refused: list[bytes] = []
    for path in I.keys() | M.keys():
        i, m, h = I.get(path), M.get(path), H.get(path)
        if i is not None and m is not None and same_im(i, m):
            if opts.force and path in dirty:
                to_delete.add(path)  # git checkout -f restores it
                to_write.add(path)
            else:
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
            + _names(refused) + "; commit or stash them, or use --force to discard them"
        )

    # Untracked files in the way of what we are about to create.
    tracked = set(I)
    in_the_way: list[bytes] = []
    checked_dirs: dict[bytes, bool] = {}
    gone = to_delete
    for path in sorted(to_write):
        # leading directories must be real directories, or absent, or tracked files we delete
        parts = path.split(b"/")
        for k in range(1, len(parts)):
            d = b"/".join(parts[:k])
            if d in checked_dirs:
                continue
            st = _lexists(root_b + b"/" + d)
            ok = st is None or stat_mod.S_ISDIR(st.st_mode) or d in gone
            if st is not None and stat_mod.S_ISLNK(st.st_mode) and d not in gone:
                ok = False
            checked_dirs[d] = ok
            if not ok:
                in_the_way.append(d)
        if path in tracked:
            continue
        st = _lexists(root_b + b"/" + path)
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
            + _names(sorted(set(in_the_way)))
            + "; move or remove them first (pcheckout never deletes untracked files)"
        )

    write_entries = [M[p] for p in sorted(to_write)]
    plan_entries = write_entries + [Entry(p, 0, "", 0) for p in sorted(to_delete)]
    fs, plan = co.plan_workers(git, config, root, plan_entries, opts.workers, opts.environ,
                               opts.adapt)
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
    _remove_empty_dirs(root_b, to_delete, M)
    from . import attributes

    conversion = attributes.conversion_reasons(entries, config, repo.common_dir)
    outcome = co.write_tree(
        git, config, repo, commit, write_entries, root, plan, ui,
        conversion=bool(conversion), verify_existing=False, spawn=opts.spawn, overwrite=False,
    )
    new_entries = list(keep_index.values())
    for e, st in zip(write_entries, outcome.stats):
        if st is None:
            raise PcheckoutError(f"internal error: no stat data for {quote_path(e.path)}")
        new_entries.append(co.index_entry(e, st))  # type: ignore[arg-type]
    if co.latency_bound(fs):
        co.settle_racy_timestamps(outcome.stats)
    ix.write_index(
        repo.index_path,
        sorted(new_entries, key=ix.sort_key),
        version=co._index_version(config) if index.version not in (3, 4) else index.version,
        hash_name=repo.object_format,
        skip_hash=co.skip_hash(config, git.version),
    )
    result.head = co.update_head(git, opts.rev, commit, branch)
    result.seconds = time.monotonic() - t0
    result.bytes = outcome.bytes
    result.written = len(write_entries)
    result.adapt_summary = getattr(outcome, "adapt_summary", None)
    return result


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
    if not paths:
        return

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

    if workers <= 1 or len(paths) < 16:
        for p in paths:
            rm(p)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pcheckout-rm") as pool:
        for _ in pool.map(rm, paths):
            pass


def _remove_empty_dirs(root_b: bytes, deleted: set[bytes], M: dict[bytes, Entry]) -> None:
    """Remove directories that held deleted entries and are now empty (deepest first)."""
    needed = set()
    for p in M:
        parts = p.split(b"/")
        for k in range(1, len(parts)):
            needed.add(b"/".join(parts[:k]))
    candidates = set()
    for p in deleted:
        parts = p.split(b"/")
        for k in range(1, len(parts)):
            candidates.add(b"/".join(parts[:k]))
    for d in sorted(candidates - needed, key=lambda x: x.count(b"/"), reverse=True):
        try:
            os.rmdir(root_b + b"/" + d)
        except OSError:
            pass  # not empty (untracked files) or already gone: keep it, as git does


__all__ = ["switch", "LocalChangesError", "UntrackedInTheWayError"]
_ = Path
