"""Listing a git tree (one ``git ls-tree -r -z`` process) and what changes between two
(one ``git diff-tree -r -z``); names as bytes."""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import threading
from array import array
from collections.abc import Callable, Generator, Iterator, Sequence
from itertools import accumulate
from operator import itemgetter
from typing import IO, Any, NamedTuple, overload

from pcheckout.errors import GitError
from pcheckout.git.round1 import DIFF_TREE, DIFF_TREE_ENV, LISTING
from pcheckout.git.runner import Git

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_SYMLINK = 0o120000
MODE_GITLINK = 0o160000
MODE_TREE = 0o40000  # a subtree's line in ls-tree -t (git's tree entry writes it "40000")
#: A subtree's record in ``ls-tree -r -t -z`` output, after the NUL that ends the one before.
_TREE_RECORD = b"\x00" + b"040000 tree "


class Entry(NamedTuple):
    """One path of the tree to be written (a tuple: 100k of them are made per
    checkout, and a NamedTuple is ~3x cheaper to build than a frozen dataclass)."""

    path: bytes
    mode: int
    oid: str  # hex
    size: int  # -1 when not known (gitlinks, or listing without sizes)


def list_tree(git: Git, tree: str, *, sizes: bool = False) -> list[Entry]:
    """Every non-tree entry of ``tree``, recursively, in git's order.

    ``sizes=True`` adds ``-l``: git then reads each blob's header, which the dry
    run and the progress bar's byte total need.

    The output is parsed as it arrives: at 40k entries git takes ~40 ms to list and
    Python ~60 ms to parse, which then overlap instead of adding up.
    """
    args = ["ls-tree", "-r", "-z", "--full-tree"]
    if sizes:
        args.append("-l")
    args.append(tree)
    entries: list[Entry] = []
    modes: dict[bytes, int] = {}
    _stream(git, args, lambda records: _parse(records, sizes, modes, entries))
    return entries


class RootedListing(Sequence[Entry]):
    """:func:`list_rooted`'s answer: ``ls-tree -r -t -z`` output as git printed it, a
    sequence of the tree's non-tree entries parsed on first use (at 40k entries the parse
    is ~60 ms of Python that a checkout by git's writer never needs: it counts the entries,
    checks their names, :func:`pcheckout.git.pathsafety.listing_looks_safe`, and looks for
    a ``.gitattributes``, all on the records as git printed them).

    Only git's output is held whole: records are split from it a piece at a time
    (:data:`RECORD_CHUNK` bytes), and the entries hold the very path objects
    :meth:`paths` made (at 250,000 entries the records held whole were 44 MiB, and the
    entries' own copies of the paths 33 MiB more)."""

    __slots__ = ("_entries", "_paths", "_starts", "_width", "raw")

    def __init__(self, raw: bytes) -> None:
        if not raw.startswith(b"\0"):
            raise ValueError("the output is held after a NUL")
        if not raw.endswith(b"\0"):
            raise GitError(f"unexpected ls-tree output: {raw[-80:]!r}")
        self.raw = raw  # a NUL, then git's output: every record is then between two NULs
        self._paths: list[bytes] | None = None
        self._entries: list[Entry] | None = None
        self._starts: array[int] | None = None  # where each record starts (mode_at)
        self._width = -1  # every record's length less its path's, where one (paths)

    def record_chunks(self) -> Iterator[list[bytes]]:
        """The records ("MODE TYPE ID\tPATH", subtrees' too), in order, a list of those in
        about :data:`RECORD_CHUNK` bytes of the output at a time."""
        raw = self.raw
        start, last = 1, len(raw) - 1  # (raw[0] and raw[last] are NULs)
        while start <= last:
            end = raw.find(b"\0", min(start + RECORD_CHUNK, last))
            yield raw[start:end].split(b"\0")
            start = end + 1

    @property
    def entries(self) -> list[Entry]:
        """Every non-tree entry, in git's order."""
        if self._entries is None:
            entries: list[Entry] = []
            paths, at = self._paths, 0
            modes: dict[bytes, int] = {}
            for records in self.record_chunks():
                known = None if paths is None else paths[at : at + len(records)]
                _parse(records, False, modes, entries, [], known)
                at += len(records)
            self._entries = entries
            self._paths = None  # (the entries hold the non-tree ones)
        return self._entries

    def __len__(self) -> int:
        if self._entries is not None:
            return len(self._entries)
        # A subtree's record starts "040000 tree " (ls-tree's "%06o %s %s\t"), after a
        # NUL, and no path holds one; every record ends in a NUL, the first follows one.
        trees = self.raw.count(_TREE_RECORD)
        return self.raw.count(b"\0") - 1 - trees

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        return self.entries[index]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def paths(self) -> list[bytes]:
        """Every record's path, subtrees' included, in the records' order (held until
        the entries are parsed, which then hold them)."""
        if self._paths is not None:
            return self._paths
        paths: list[bytes] = []
        gitlinks = b" commit " in self.raw  # a gitlink's record is two bytes longer
        width = self.raw.find(b"\t") if not gitlinks else -1  # "MODE blob|tree ID\t"
        for records in self.record_chunks():
            if gitlinks:
                paths += [r.partition(b"\t")[2] for r in records]
            else:  # one width for every record (sliced in C: 5 ms less at 40k records)
                paths += map(itemgetter(slice(width, None)), records)
        if self._entries is None:
            self._paths = paths
            self._width = width
        return paths

    def mode_at(self, index: int) -> int:
        """The mode of record ``index`` (:meth:`paths`' order)."""
        if self._starts is None:
            # Where each record starts, accumulated in C from the records' lengths: from the
            # paths where every record is as long as its path and one width (splitting the
            # records again, or a Python loop over them, took ~40 ms at 270,000 records).
            starts, width = array("q"), self._width
            if self._paths is not None and width > 0:
                starts.extend(
                    accumulate(map((width + 1).__add__, map(len, self._paths)), initial=1)
                )
            else:
                at = 1
                for records in self.record_chunks():
                    starts.extend(accumulate(map((1).__add__, map(len, records)), initial=at))
                    at = starts.pop()  # (the next chunk's first record)
            self._starts = starts
        at = self._starts[index]
        return int(self.raw[at : at + 6], 8)

    def has_file(self, name: bytes) -> bool:
        """Whether a non-tree entry is named ``name`` (in any directory)."""
        return bool(self.files_named(name))

    def files_named(self, name: bytes) -> list[bytes]:
        """The paths of the non-tree entries named ``name`` (in any directory)."""
        raw, found = self.raw, []
        for framed in (b"\t" + name + b"\0", b"/" + name + b"\0"):
            at = raw.find(framed)
            while at >= 0:
                start = raw.rfind(b"\0", 0, at) + 1
                tab = raw.index(b"\t", start)
                path = raw[tab + 1 : at + len(framed) - 1]
                if not raw.startswith(b"040000 tree ", start) and path.rpartition(b"/")[2] == name:
                    found.append(path)
                at = raw.find(framed, at + 1)
        return sorted(found)

    def root(self) -> bytes:
        """The root tree object's body, rebuilt from the top-level records (git's tree
        entry: octal mode without leading zeros, space, name, NUL, the binary object id).
        Each subtree's records follow its own, every one of their paths below its name: a
        binary search over the output finds the next top-level record, so the root of a
        40k-entry listing is rebuilt without splitting its records (~15 ms)."""
        raw = self.raw
        out = []
        at, last = 1, len(raw) - 1  # (raw[0] and raw[last] are NULs)
        try:
            while at < last:
                tab = raw.index(b"\t", at)
                nul = raw.index(b"\0", tab)
                meta, name = raw[at:tab].split(b" "), raw[tab + 1 : nul]
                oid = bytes.fromhex(meta[2].decode())
                out.append(b"%o %s\0%s" % (int(meta[0], 8), name, oid))
                at = nul + 1
                if meta[1] == b"tree":
                    at = _after_subtree(raw, at, name + b"/")
        except (ValueError, IndexError):
            raise GitError(f"unexpected ls-tree output: {raw[at : at + 80]!r}") from None
        return b"".join(out)

    def tree_id(self, hash_name: str) -> str:
        """The root tree's object id (``hash_name``: the repository's object format)."""
        root = self.root()
        return _small_digest(hash_name, b"tree %d\0" % len(root), root)


def _small_digest(hash_name: str, *parts: bytes) -> str:
    """The hex digest of a few kB, by a hash cheap to start: every run checks the root
    tree's id (:meth:`RootedListing.tree_id`), and ``import hashlib`` starts OpenSSL
    first, 3.7-3.9 ms on the dev VM against 0.3 ms for CPython's own ``_sha1`` module
    (``Modules/sha1module.c``, hashlib's own fallback).  Other formats, and an
    interpreter without it, take hashlib's."""
    h: Any = None
    if hash_name == "sha1":
        with contextlib.suppress(ImportError):
            h = importlib.import_module("_sha1").sha1()
    if h is None:
        import hashlib

        h = hashlib.new(hash_name)
    for part in parts:
        h.update(part)
    return str(h.hexdigest())


def _after_subtree(raw: bytes, at: int, prefix: bytes) -> int:
    """Where the first record at or after ``at`` whose path does not start with ``prefix``
    starts (the records from ``at`` that do are contiguous: a subtree's, in ls-tree's
    order), in ``raw`` as :class:`RootedListing` holds it."""

    def below(pos: int) -> bool:  # the record starting after the NUL at or after pos-1
        start = raw.find(b"\0", pos - 1) + 1
        return start < len(raw) and raw.startswith(prefix, raw.index(b"\t", start) + 1)

    lo, hi = at, len(raw) - 1
    if not below(lo):  # (an empty subtree)
        return lo
    while hi - lo > 1:  # invariant: below(lo), not below(hi) (hi: the final NUL)
        mid = (lo + hi) // 2
        if below(mid):
            lo = mid
        else:
            hi = mid
    return raw.find(b"\0", hi - 1) + 1


def list_rooted(git: Git, rev: str) -> RootedListing:
    """As :func:`list_tree` for a tree-ish ``rev`` not yet resolved, with the means to
    check which tree was listed: ``-t`` adds the subtrees' lines, and the top-level ones
    rebuild the root tree object (:meth:`RootedListing.tree_id`).  So a listing started
    beside ``rev``'s resolution is known to be of the tree that resolution found, or not,
    whatever moved in between."""
    args = [*LISTING, rev]
    chunks: list[bytes] = [b"\0"]
    _read(git, args, chunks.append)
    return RootedListing(b"".join(chunks))


def _stream(git: Git, args: list[str], parse: Callable[[list[bytes]], None]) -> None:
    """Run ``git ARGS`` and hand its NUL-terminated records to ``parse`` as they arrive."""
    rest = b""

    def take(chunk: bytes) -> None:
        nonlocal rest
        records = (rest + chunk).split(b"\0")
        rest = records.pop()  # the unterminated tail, completed by the next chunk
        parse(records)

    _read(git, args, take)
    if rest:
        raise GitError(f"unexpected ls-tree output: {rest[:80]!r}")


def _read(git: Git, args: list[str], take: Callable[[bytes], None]) -> None:
    """Run ``git ARGS`` and hand its output to ``take`` as it arrives (or all of it, where
    round 1 started it: ``git/round1.py``)."""
    done = git.prestarted(args)
    if done is not None:
        take(done.stdout)
        if done.returncode != 0:
            raise GitError(f"'{' '.join(args)}' failed", cmd=git.argv(args), stderr=done.stderr)
        return
    pipe = subprocess.PIPE
    proc = git.popen(args, stdin=subprocess.DEVNULL, stdout=pipe, stderr=pipe)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        while chunk := os.read(proc.stdout.fileno(), _CHUNK):
            take(chunk)
        err = proc.stderr.read()
    finally:
        proc.stdout.close()
        proc.stderr.close()
        code = proc.wait()
    if code != 0:
        raise GitError(f"'{' '.join(args)}' failed", cmd=git.argv(args), stderr=err)


#: Bytes of a :class:`RootedListing`'s output split into records at a time.
RECORD_CHUNK = 1 << 20

#: Bytes read from ls-tree at a time: a pipe's capacity (git fills the next as Python parses).
_CHUNK = 1 << 16


def _parse(
    records: list[bytes],
    sizes: bool,
    modes: dict[bytes, int],
    out: list[Entry],
    top: list[bytes] | None = None,
    paths: list[bytes] | None = None,
) -> None:
    """ls-tree's records as entries.  With ``top`` (``ls-tree -r -t``): subtrees are not
    entries, and the top-level lines go to ``top`` as the root tree object holds them
    (git's tree entry: octal mode without leading zeros, space, name, NUL, the binary
    object id).  ``paths``: each record's path, split from it already (the entries then
    hold these objects, not copies)."""
    append = out.append
    known = iter(paths) if paths is not None else None
    for record in records:
        meta, sep, path = record.partition(b"\t")
        if not sep:
            raise GitError(f"unexpected ls-tree output: {record[:80]!r}")
        if known is not None:
            path = next(known)
        fields = meta.split()
        mode = modes.get(fields[0])
        if mode is None:
            mode = modes[fields[0]] = int(fields[0], 8)
        if top is not None:
            if b"/" not in path:
                top.append(b"%o %s\0%s" % (mode, path, bytes.fromhex(fields[2].decode("ascii"))))
            if mode == MODE_TREE:
                continue
        size = -1
        if sizes and len(fields) > 3 and fields[3] != b"-":
            size = int(fields[3])
        append(Entry(path, mode, fields[2].decode("ascii"), size))


class TreeChanges(NamedTuple):
    """What a switch between two trees writes and removes (``git diff-tree``); gitlinks
    count as the engine counts them (an empty directory made or removed)."""

    written: list[bytes]  # paths added, modified or changing type
    modes: list[int]  # the new tree's mode of each written path
    deleted: list[bytes]  # paths removed
    #: the new tree's subtrees that differ from the old's (their ids), every one a written
    #: path goes through but the root: an unchanged subtree holds nothing that is written
    trees: tuple[str, ...] = ()


def _diff(git: Git, old_tree: str, new_tree: str) -> Iterator[tuple[list[bytes], bytes]]:
    """Each record of one ``diff-tree -r -t`` from ``old_tree`` to ``new_tree``
    (unchanged subtrees are skipped by id, so it costs what changed): its fields
    ``:OLDMODE NEWMODE OLDID NEWID STATUS`` (diff-tree's raw format), and its path."""
    out = git.out(*DIFF_TREE, old_tree, new_tree, extra_env=DIFF_TREE_ENV)
    fields = out.split(b"\0")
    for k in range(0, len(fields) - 1, 2):
        meta, path = fields[k], fields[k + 1]
        parts = meta.split(b" ")
        if not meta.startswith(b":") or len(parts) != 5:
            raise GitError(f"unexpected diff-tree output: {meta[:80]!r}")
        yield parts, path


def tree_changes(git: Git, old_tree: str, new_tree: str) -> TreeChanges:
    """The paths ``git checkout`` updates and removes going from ``old_tree`` to
    ``new_tree``, and the new tree's subtrees that changed."""
    written: list[bytes] = []
    modes: list[int] = []
    deleted: list[bytes] = []
    trees: list[str] = []
    for parts, path in _diff(git, old_tree, new_tree):
        if parts[4] == b"D":
            if parts[0] != b":040000":  # (a removed subtree's paths are listed one by one)
                deleted.append(path)
        elif parts[1] == b"040000":  # (-t: a subtree added or changed; it is never "T")
            trees.append(parts[3].decode("ascii"))
        else:
            written.append(path)
            modes.append(int(parts[1], 8))
    return TreeChanges(written, modes, deleted, tuple(trees))


class OldSide(NamedTuple):
    """What a switch needs of the tree it leaves, besides the target's listing."""

    #: each path whose entry differs between the two trees, with its entry in the old
    #: one (None: not there)
    entries: dict[bytes, Entry | None]
    #: the new tree's subtrees that differ from the old's (:attr:`TreeChanges.trees`)
    trees: tuple[str, ...]


def old_side(git: Git, old_tree: str, new_tree: str) -> OldSide:
    """:class:`OldSide` from one ``diff-tree``: with ``new_tree``'s listing its entries are
    all of ``old_tree``, for what changed costs instead of a second listing."""
    old: dict[bytes, Entry | None] = {}
    trees: list[str] = []
    for parts, path in _diff(git, old_tree, new_tree):
        if parts[1] == b"040000":
            trees.append(parts[3].decode("ascii"))
            continue  # (-t: a subtree added or changed; the paths in it come one by one)
        if parts[0] == b":040000":
            continue  # (a subtree removed, or become a file: the file comes as added)
        mode = int(parts[0][1:], 8)
        old[path] = Entry(path, mode, parts[2].decode("ascii"), -1) if mode else None
    return OldSide(old, tuple(trees))


def read_trees(git: Git, ids: Sequence[str]) -> Generator[bytes, None, None]:
    """The tree objects ``ids`` as git stores them (``mode SP name NUL id``, repeated), each
    as ``cat-file --batch --buffer`` answers it: the caller reads one while git looks up the
    next (a thread feeds the ids).  Closing the iterator early stops git."""
    proc = git.popen(
        ["cat-file", "--batch", "--buffer"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    feeder = threading.Thread(target=_feed, args=(proc.stdin, ids), daemon=True)
    feeder.start()
    out, pending, at, done = proc.stdout, b"", 0, False
    try:
        for oid in ids:
            while (end := pending.find(b"\n", at)) < 0:
                pending, at = pending[at:] + _more(out, proc), 0
            header = pending[at:end].split(b" ")
            if len(header) != 3 or header[0] != oid.encode() or header[1] != b"tree":
                raise GitError(f"unexpected cat-file answer for tree {oid}: {pending[at:end]!r}")
            start, stop = end + 1, end + 1 + int(header[2])
            while len(pending) < stop + 1:  # (and the newline after the contents)
                pending += _more(out, proc)
            yield pending[start:stop]
            at = stop + 1
        done = True
    finally:
        if not done:  # (closed early, or an error)
            proc.kill()
        out.close()
        proc.stderr.close()
        proc.wait()
        feeder.join()


def _feed(stdin: IO[bytes], ids: Sequence[str]) -> None:
    try:
        with stdin:
            stdin.write("".join(i + "\n" for i in ids).encode("ascii"))
    except OSError:
        pass  # git stopped reading: its status and its words say why


def _more(out: IO[bytes], proc: subprocess.Popen[bytes]) -> bytes:
    """The next bytes git wrote; GitError with its words where it ended first."""
    got = out.read1(READ_CHUNK)  # type: ignore[attr-defined]
    if not got:
        assert proc.stderr is not None
        said = proc.stderr.read().decode(errors="replace").strip()
        raise GitError(f"git cat-file failed reading trees: {said or 'no answer'}")
    return bytes(got)


#: Bytes read from cat-file at a time (a pipe holds 64 KiB on Linux).
READ_CHUNK = 1 << 16
