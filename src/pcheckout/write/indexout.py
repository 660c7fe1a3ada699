"""The index a write leaves: entries from the tree with the stat data the
writers collected, the version and checksum git would use, and the wait that
keeps it from being racily clean where re-reading a file costs round trips."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from pcheckout.context import Context
from pcheckout.errors import PcheckoutError, quote_path
from pcheckout.fs.detect import FsInfo
from pcheckout.fs.files import unpack_stat
from pcheckout.git import cachetree, fsmonitor, sparseindex, untracked
from pcheckout.git import index as ix
from pcheckout.git import splitindex as si
from pcheckout.git.config import config_bool
from pcheckout.git.indexformat import HASH_SIZES
from pcheckout.git.lock import IndexLock
from pcheckout.git.sparse import Sparsity
from pcheckout.git.tree import Entry
from pcheckout.write.engine import Outcome

#: git (as usually built, without USE_NSEC) trusts an index entry's stat data
#: only if the index file is from a later *second* than the file's mtime; a
#: "racily clean" entry is re-hashed by the next ``git status``.  Measured with
#: strace on the dev VM (2 vCPU, virtio ext4): index written 50 ms after the
#: files -> every file re-hashed; 1.1 s later -> none.  Waiting costs up to a
#: second, so we wait only on network-like filesystems (SETTLE_KINDS: re-hashing
#: a file costs round trips) and only when at least this many entries would be
#: racy.  On tmpfs or a local or virtual disk the re-hash is cheaper than the
#: wait, and git's own checkout never waits.
SETTLE_MIN_RACY = 64

#: ...and only when the wait costs at most this share of the time spent writing:
#: a 40 s NFS checkout may wait a second, a 1 s one may not (on the FUSE
#: imitation of NFS, docs/latencyfs.md, an unconditional wait turned 0.97 s
#: checkouts into 1.9 s).
SETTLE_MAX_SHARE = 0.05

#: Where re-reading a file costs network round trips, a racily clean index is
#: worth avoiding: NFS, SMB, other network filesystems and FUSE (directly or as
#: an overlay's upper layer).  A virtual disk is latency-bound for creates but
#: re-hashing reads hit the page cache (dev VM: waiting cost a 1000-file switch
#: 0.5 s on average, re-hashing them ~20 ms).
SETTLE_KINDS = frozenset({"nfs", "smb", "network", "fuse"})


def settles_index(fs: FsInfo) -> bool:
    """Should the index wait out racy timestamps for this filesystem?"""
    kind = fs.upper_kind if fs.kind == "overlay" else fs.kind
    return kind in SETTLE_KINDS


def settle(fs: FsInfo, outcome: Outcome) -> None:
    """Wait out the writes' racy timestamps before their index is written, where
    ``fs`` asks for it (:func:`settles_index`)."""
    if settles_index(fs):
        settle_racy_timestamps(outcome.stats, outcome.seconds)


def settle_racy_timestamps(stats: Sequence[bytes | None], elapsed: float = float("inf")) -> float:
    """Sleep into the next second if many entries share the current one and the
    wait is small next to ``elapsed`` (the writing time); return the seconds slept."""
    seconds = [unpack_stat(st).mtime_ns // ix.NS_PER_S for st in stats if st is not None]
    newest = max(seconds, default=0)
    if not newest:
        return 0.0
    racy = sum(1 for s in seconds if s >= newest)
    wait = newest + 1 - time.time() + 0.001
    if racy < SETTLE_MIN_RACY or wait <= 0 or wait > SETTLE_MAX_SHARE * elapsed:
        return 0.0
    time.sleep(wait)
    return wait


def index_fields(e: Entry, packed: bytes) -> ix.Fields:
    """The index's fixed fields for ``e`` from the stat data a worker packed,
    in index-entry order."""
    st = unpack_stat(packed)
    c_s, c_ns, m_s, m_ns, dev, ino, uid, gid, size = ix.stat_fields(st)
    return (c_s, c_ns, m_s, m_ns, dev, ino, e.mode, uid, gid, size, bytes.fromhex(e.oid))


def index_entry(e: Entry, packed: bytes) -> ix.IndexEntry:
    """An IndexEntry for ``e`` (the switch mixes these with kept entries)."""
    st = unpack_stat(packed)
    c_s, c_ns, m_s, m_ns, dev, ino, uid, gid, size = ix.stat_fields(st)
    return ix.IndexEntry(
        e.path, e.mode, bytes.fromhex(e.oid), c_s, c_ns, m_s, m_ns, dev, ino, uid, gid, size
    )


class Outside(NamedTuple):
    """A fresh checkout's sparse checkout: per entry, whether it is outside (recorded with
    the skip-worktree bit, not written), and the rules (where git keeps a sparse index)."""

    skip_worktree: Sequence[bool]
    sparsity: Sparsity | None = None


def write_fresh_index(
    ctx: Context,
    entries: Sequence[Entry],
    outcome: Outcome,
    *,
    tree: str,
    outside: Outside | None = None,
    lock: IndexLock | None = None,
) -> None:
    """The index for a fresh checkout of ``tree`` (its id), encoded straight from its
    entries and stat data (their racy timestamps settled: :func:`settle`), committed
    through ``lock`` (held since the run began) if given.  Entries ``outside`` a sparse
    checkout (not written) get git's skip-worktree bit; the index is then version 3 (or
    stays 4), or a sparse index where git keeps one."""
    stats = outcome.stats
    skip = outside.skip_worktree if outside is not None and any(outside.skip_worktree) else None
    split = si.wants_split(ctx.config, None)
    layout = _layout(ctx, index_version(ctx.config, ctx.environ))
    sparsity = outside.sparsity if outside is not None else None
    if sparsity is not None and sparseindex.wanted(sparsity, ctx.config, split):
        full = [
            _skipped(e) if skip is not None and skip[i] else index_entry(e, _packed(e, stats[i]))
            for i, e in enumerate(entries)
        ]
        full.sort(key=ix.sort_key)
        around = _Around(tree, _first_untracked(ctx, layout.hash_name))
        _write_sparse(ctx, full, sparsity, layout, around, lock)
        return
    n = len(entries)
    order: Iterable[int] = range(n)
    # ls-tree's order is the index's (paths compared as bytes); sort only if not.
    if any(entries[i].path >= entries[i + 1].path for i in range(n - 1)):
        order = sorted(range(n), key=lambda i: entries[i].path)

    def rows() -> Iterator[ix.Row]:
        fromhex = bytes.fromhex
        for i in order:
            e, packed = entries[i], stats[i]
            if skip is not None and skip[i]:
                # Outside the sparse checkout: zero stat data, as git records it (``ls-files
                # --debug`` shows all-zero ctime/mtime/dev/ino/uid/gid/size).
                yield e.path, (e.mode, fromhex(e.oid)), 0, ix.EXT_FLAG_SKIP_WORKTREE
                continue
            yield e.path, index_fields(e, _packed(e, packed)), 0, 0

    fromhex = bytes.fromhex
    extensions = _cache_tree(
        ctx,
        ((e.path, e.mode, fromhex(e.oid), False) for e in map(entries.__getitem__, order)),
        tree,
    )
    extensions += _first_untracked(ctx, layout.hash_name)
    how = ix.Encoding(
        layout.version,
        layout.hash_name,
        skip_hash=layout.skip_hash and not split,
        extended=skip is not None,
        extensions=b"" if split else extensions,
    )
    if split:
        shared = bytes(ix.encode_rows(rows(), n, how))
        _commit(ctx, si.around_shared(shared, layout, extensions), lock)
    else:  # written as it is encoded: never held whole (42 MiB at 250,000 entries)
        _commit(ctx, ix.encoded_pieces(rows(), n, how), lock)


def _first_untracked(ctx: Context, hash_name: str) -> bytes:
    """The untracked cache a first checkout starts (empty) where the config asks for one."""
    if ctx.repo.work_tree is None:
        return b""
    return untracked.after_checkout(
        None, (), work_tree=ctx.repo.work_tree, config=ctx.config, rawsz=HASH_SIZES[hash_name]
    )


def _packed(e: Entry, packed: bytes | None) -> bytes:
    if packed is None:
        raise PcheckoutError(f"internal error: no stat data for {quote_path(e.path)}")
    return packed


def _skipped(e: Entry) -> ix.IndexEntry:
    """An entry outside the sparse checkout: zero stat data, the skip-worktree bit."""
    return ix.IndexEntry(
        e.path, e.mode, bytes.fromhex(e.oid), *ix.NO_STAT, extended_flags=ix.EXT_FLAG_SKIP_WORKTREE
    )


class _Around(NamedTuple):
    """What a sparse index is written with besides its entries."""

    tree: str  # the tree checked out (its cache tree)
    untracked: bytes = b""  # the untracked cache's extension (b"": none)
    fsmonitor: fsmonitor.Kept | None = None  # the fsmonitor extension's state to keep


def _write_sparse(
    ctx: Context,
    entries: list[ix.IndexEntry],
    sparsity: Sparsity,
    layout: si.Layout,
    around: _Around,
    lock: IndexLock | None,
) -> None:
    """A full index's ``entries`` (in index order) written collapsed, as git writes a
    sparse index (``git/sparseindex.py``): its cache tree, the untracked cache, the
    fsmonitor extension over the collapsed entries, then ``sdir``."""
    entries = sparseindex.collapse(entries, sparsity, layout.hash_name)
    ita = ix.EXT_FLAG_INTENT_TO_ADD
    extensions = _cache_tree(
        ctx, ((e.path, e.mode, e.oid, bool(e.extended_flags & ita)) for e in entries), around.tree
    )
    extensions += around.untracked
    if around.fsmonitor is not None:
        extensions += fsmonitor.extension(around.fsmonitor, ((e.path, e.mode) for e in entries))
    _commit(ctx, _encoded(entries, layout, extensions, sparse=True), lock)


def _cache_tree(ctx: Context, items: Iterable[cachetree.Item], tree: str) -> bytes:
    """The TREE extension git writes after a checkout of ``tree`` (``git/cachetree.py``):
    where the entries make that tree again, every subtree is known to exist (the
    listing read each) and git is not asked."""

    def missing(oids: list[bytes]) -> set[bytes]:
        root = _absent(ctx, oids[:1])  # the root tree there: the checkout listed every subtree
        return _absent(ctx, oids) if root else set()

    return cachetree.extension(items, ctx.repo.object_format, missing, bytes.fromhex(tree))


def _switch_cache_tree(
    ctx: Context, source: ix.Index | None, entries: list[ix.IndexEntry], tree: str
) -> bytes:
    """The TREE extension git's switch writes (``git/cachetree.py`` extension_after):
    the index read's (``source``), the paths whose entries changed invalidated, updated
    over ``entries``: only the directories that changed are computed again."""
    before = source.cache_tree if source is not None else None
    changed = _changed_paths(source.entries if source is not None else (), entries)

    def missing(oids: list[bytes]) -> set[bytes]:
        return _absent(ctx, oids)

    return cachetree.extension_after(
        entries,
        ctx.repo.object_format,
        before,
        changed,
        missing,
        bytes.fromhex(tree),
    )


def _changed_paths(before: Sequence[ix.IndexEntry], after: Sequence[ix.IndexEntry]) -> list[bytes]:
    """The paths whose entry's mode or object id differs between ``before`` and ``after``
    (both in index order), or that only one of them has: those git's checkout invalidates
    in the cache tree (unpack-trees.c: merged_entry, deleted_entry; keep_entry does not).
    An entry kept as it was read is the same object: compared by identity first."""
    changed: list[bytes] = []
    i = j = 0
    n, m = len(before), len(after)
    while i < n and j < m:
        b, a = before[i], after[j]
        if b is a:
            i += 1
            j += 1
        elif b.path == a.path:
            if b.mode != a.mode or b.oid != a.oid:
                changed.append(a.path)
            i += 1
            j += 1
        elif b.path < a.path:
            changed.append(b.path)
            i += 1
        else:
            changed.append(a.path)
            j += 1
    changed += [e.path for e in before[i:]]
    changed += [e.path for e in after[j:]]
    return changed


def _absent(ctx: Context, oids: list[bytes]) -> set[bytes]:
    """Which of the objects ``oids`` the repository lacks (cat-file --batch-check)."""
    out = ctx.git.out(
        "cat-file", "--batch-check", input=b"".join(o.hex().encode() + b"\n" for o in oids)
    )
    return {
        bytes.fromhex(line.split()[0].decode())
        for line in out.splitlines()
        if line.endswith(b" missing")
    }


def _layout(ctx: Context, version: int) -> si.Layout:
    return si.Layout(version, ctx.repo.object_format, skip_hash(ctx.config, ctx.git.version))


def _encoded(
    entries: Sequence[ix.IndexEntry], layout: si.Layout, extensions: bytes, *, sparse: bool = False
) -> bytes:
    """An index of ``entries`` in ``layout``, then ``extensions`` (``sparse``: a sparse
    index's ``sdir`` too)."""
    return ix.encode_index(
        entries,
        version=layout.version,
        hash_name=layout.hash_name,
        skip_hash=layout.skip_hash,
        extensions=extensions,
        sparse_directories=sparse,
    )


def _commit(
    ctx: Context,
    data: bytes | bytearray | Iterator[bytearray] | si.SplitWrite,
    lock: IndexLock | None,
) -> None:
    """Put the index (its bytes, or their pieces as they are encoded; and a split index's
    shared index first) in place, through ``lock`` (held since the run began) if given."""
    git_dir = os.fsencode(ctx.repo.git_dir)
    index = data.data if isinstance(data, si.SplitWrite) else data
    if isinstance(data, si.SplitWrite):
        si.put_shared(git_dir, data)
    if lock is not None:
        lock.commit(index)
    else:
        ix.write_index_bytes(ctx.repo.index_path, index)
    if isinstance(data, si.SplitWrite) and data.shared is not None:
        si.clean_shared(git_dir, data.shared_name, _shared_expiry(ctx))


def _shared_expiry(ctx: Context) -> float | None:
    """splitIndex.sharedIndexExpire as git parses it (an expiry date; "never": None)."""
    if "splitindex.sharedindexexpire" not in ctx.config:
        return si.default_expiry()
    try:
        out = ctx.git.out("config", "--type=expiry-date", "splitIndex.sharedIndexExpire")
        stamp = int(out.strip() or b"0")
    except (PcheckoutError, ValueError):
        return si.default_expiry()
    return float(stamp) if stamp else None


class KeptEntries(NamedTuple):
    """A switch's index besides the entries it writes (which get fresh stat data)."""

    keep: list[ix.IndexEntry]  # entries kept as they are, their stat data too
    recorded: list[ix.IndexEntry]  # recorded with the skip-worktree bit (outside the cone)
    version: int  # the version it is written in
    split: ix.SplitIndex | None = None  # the read index's tie to its shared index
    #: the untracked cache's extension as git's checkout leaves it (git/untracked.py; b"":
    #: none)
    untracked: bytes = b""
    #: the fsmonitor extension's token and entries' state to keep (git/fsmonitor.py; None:
    #: none is written)
    fsmonitor: fsmonitor.Kept | None = None
    #: written paths whose entries keep the skip-worktree bit (set without a sparse
    #: checkout: git carries it to the entry it writes)
    skip: frozenset[bytes] = frozenset()
    sparsity: Sparsity | None = None  # the sparse checkout's rules (a sparse index's cone)
    #: written paths whose entries keep the assume-unchanged bit (a kept entry --force
    #: writes again: git keeps the old entry, its flags)
    assumed: frozenset[bytes] = frozenset()
    #: the index read, whose entries ``keep`` holds as they were read: copied as stored
    #: where its bytes are kept (``git/index.py`` encoded_index_pieces)
    source: ix.Index | None = None


def write_switch_index(
    ctx: Context,
    written: Sequence[Entry],
    outcome: Outcome,
    kept: KeptEntries,
    *,
    tree: str,
    lock: IndexLock | None = None,
) -> None:
    """A switch's index: the ``kept`` entries beside the ``written`` ones of ``tree``
    (the target's id) with the stat data the writers collected, committed through
    ``lock`` (held since the run began) if given."""
    entries = list(kept.keep)
    for e, st in zip(written, outcome.stats, strict=True):
        if st is None:
            raise PcheckoutError(f"internal error: no stat data for {quote_path(e.path)}")
        entry = index_entry(e, st)
        if e.path in kept.skip:
            entry = dataclasses.replace(entry, extended_flags=ix.EXT_FLAG_SKIP_WORKTREE)
        if e.path in kept.assumed:
            entry = dataclasses.replace(entry, flags=ix.FLAG_ASSUME_VALID)
        entries.append(entry)
    entries += kept.recorded
    layout = _layout(ctx, kept.version)
    entries.sort(key=ix.sort_key)
    sparse = kept.sparsity
    if sparse is not None and sparseindex.wanted(sparse, ctx.config, _split(ctx, kept)):
        _write_sparse(
            ctx, entries, sparse, layout, _Around(tree, kept.untracked, kept.fsmonitor), lock
        )
        return
    cache = b""
    if not ix.unmerged(entries):  # (git writes no cache tree for an unmerged index)
        cache = _switch_cache_tree(ctx, kept.source, entries, tree)
    extensions = cache + kept.untracked  # (git's order: TREE, UNTR, FSMN)
    if kept.fsmonitor is not None:
        extensions += fsmonitor.extension(kept.fsmonitor, ((e.path, e.mode) for e in entries))
    if _split(ctx, kept):
        linked = kept.split.linked if kept.split is not None else {}
        tied = {k: linked[k] for k in map(ix.sort_key, kept.keep) if k in linked}
        split = si.encode_split(entries, kept.split, tied, ctx.config, layout, extensions)
        _commit(ctx, split, lock)
        return
    pieces = ix.encoded_index_pieces(
        entries,
        version=layout.version,
        hash_name=layout.hash_name,
        skip_hash=layout.skip_hash,
        extensions=extensions,
        source=kept.source,
    )
    _commit(ctx, pieces, lock)


def _split(ctx: Context, kept: KeptEntries) -> bool:
    return si.wants_split(ctx.config, kept.split)


def skip_hash(config: Mapping[str, str], git_version: tuple[int, int, int]) -> bool:
    """index.skipHash (implied by feature.manyFiles) exists from git 2.40 on; an
    older git rejects an index without its checksum, so never write one for it."""
    if git_version[:2] < (2, 40):
        return False
    return config_bool(
        config.get("index.skiphash"), config_bool(config.get("feature.manyfiles"), False)
    )


def index_version(config: Mapping[str, str], environ: Mapping[str, str]) -> int:
    """The version git writes a new index in: GIT_INDEX_VERSION, index.version,
    feature.manyFiles (4), else 2; an unusable value is 2, as in git."""
    value = environ.get("GIT_INDEX_VERSION") or config.get("index.version")
    if value is None and config_bool(config.get("feature.manyfiles"), False):
        value = "4"
    try:
        v = int(value) if value else 2
    except ValueError:
        v = 2
    return v if v in (2, 3, 4) else 2
