"""One writer thread: its cat-file processes, the requests in flight, and restarts.

The engine (``write/engine.py``) runs one :class:`Worker` per thread and hands it batches of
entries.  A worker pipelines: it asks its cat-file for entries ahead of writing them, in
bursts (one write per ~50 requests instead of one per file, for us and for git), so git
inflates the next blobs while Python creates and writes the current file.  At most
``REQUEST_WINDOW`` bytes of requests and :data:`PENDING_BATCHES` batches are unanswered at a
time.  When the cat-file dies, the worker starts a fresh one and asks it again for
everything unanswered, at most :data:`MAX_RESTARTS` times.

A blob the engine's listing of loose objects holds (``git/odb.py``) is not asked of
cat-file: the worker reads it itself when its turn comes (its place in the queue is kept,
with no request).  One that is no longer there (packed since) is asked of a fallback
cat-file, one at a time; a damaged one is an error.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pcheckout.errors import (
    CatFileError,
    CorruptObjectError,
    FilterError,
    GitError,
    LfsError,
    MissingObjectError,
    PcheckoutError,
    quote_path,
)
from pcheckout.fs.files import Destination, Fill, unpack_stat
from pcheckout.git.catfile import REQUEST_WINDOW, SMALL_BLOB, CatFile, State
from pcheckout.git.convert import Conversion
from pcheckout.git.lfs import Smudge
from pcheckout.git.odb import LooseObject, LooseObjects
from pcheckout.git.runner import Git
from pcheckout.git.tree import MODE_GITLINK, MODE_SYMLINK, Entry
from pcheckout.write.journal import Journal
from pcheckout.write.lfsread import ReadAhead

#: A worker whose cat-file process dies is given a fresh one this many times
#: before the checkout stops (a crash that repeats is not a fluke).
MAX_RESTARTS = 2
#: Entries one worker may have asked for and not yet written, in batches.  The
#: request window alone (4 KiB, ~100 requests) let the first workers to start
#: claim ~100 entries each before the last had begun: on the 1 ms latency
#: mount (~6 ms per file) a 368-file switch at 8 workers had three workers
#: writing ~100 files (0.6 s) while four wrote 5.  Two batches keep git
#: inflating ahead of the writer (an answer takes microseconds, a create
#: milliseconds) and leave the rest to be stolen; where batches are large
#: (few workers, many entries: CPU-bound) the byte window still binds first.
PENDING_BATCHES = 2
#: Refill the request window only when it has drained to half: requests go out
#: in bursts of ~50 (one write syscall each side) while git always has work.
REQUEST_LOW_WATER = REQUEST_WINDOW // 2


class Stop(Exception):
    """Internal: another worker failed or the run was interrupted."""


@dataclass
class WorkerStats:
    files: int = 0
    bytes: int = 0
    restarts: int = 0


class Pool(Protocol):
    """The engine as its workers see it."""

    @property
    def git(self) -> Git: ...
    @property
    def entries(self) -> Sequence[Entry]: ...
    @property
    def skip(self) -> Sequence[bool] | None: ...
    @property
    def stats(self) -> list[bytes | None]: ...  # packed stat data, filled in per entry
    @property
    def dest(self) -> Destination: ...
    @property
    def journal(self) -> Journal | None: ...  # where completed entries are recorded
    @property
    def loose(self) -> LooseObjects | None: ...  # blobs read in-process (git/odb.py)
    @property
    def batch(self) -> int: ...  # entries per batch now (a new limit changes it)
    @property
    def stopping(self) -> threading.Event: ...  # set when the run must stop
    @property
    def lfs_reads(self) -> ReadAhead | None: ...  # LFS objects read ahead (write/lfsread.py)
    @property
    def git_said(self) -> list[bytes]: ...  # what the cat-files printed on stderr, for the user

    def take(self, wid: int) -> range | None:
        """The next batch for worker ``wid``; None when all is handed out (raises Stop)."""
        ...

    def open_catfile(self, wid: int, *, filters: bool) -> CatFile:
        """A new cat-file for worker ``wid``, known to the engine (raises Stop)."""
        ...


class Worker:
    """One thread's pipeline.  Each entry is converted as ``conversions`` says (None: no
    entry converts): written as stored or converted in-process (ident, CRLF: see
    ``git/convert.py``) from the pipelined plain ``cat-file --batch``, or, for the few
    entries git converts (filter drivers, encodings), through a ``cat-file --filters`` asked
    one entry at a time.  ``nul`` says whether filtered requests are NUL-terminated (git >=
    2.38; before, a path with a newline cannot be said on a request line and is read with a
    one-shot ``git cat-file``)."""

    def __init__(
        self,
        pool: Pool,
        wid: int,
        counts: WorkerStats,
        *,
        conversions: Sequence[Conversion | None] | None = None,
        nul: bool = False,
    ) -> None:
        self.pool = pool
        self.wid = wid
        self.counts = counts
        self.conversions = conversions
        self.one_shot_newlines = not nul
        self.entries = pool.entries
        self.stats = pool.stats
        self.dest = pool.dest
        self.journal = pool.journal
        self.loose = pool.loose
        self.reads = pool.lfs_reads
        self.cf: CatFile | None = None  # plain cat-file --batch, started when first needed
        self.plain: CatFile | None = None  # cat-file --filters, for the entries git converts
        #: plain cat-file --batch asked again for a streamed file's blob, while it is retried
        self.side: CatFile | None = None
        #: plain cat-file --batch for a loose object gone or damaged, asked one at a time
        self.fallback: CatFile | None = None
        self.pending: deque[int] = deque()  # entries asked for, not yet answered
        #: their request lengths (the same after a restart); 0: read in-process (loose)
        self.sizes: deque[int] = deque()
        self.pending_bytes = 0
        self.exhausted = False  # the engine has no more batches for us
        self._batch: range | None = None
        self._pos = 0

    def run(self) -> None:
        """Write entries until none are left, then close the cat-files (which checks that
        they exited cleanly).  Raises :class:`Stop` when the run stops early."""
        pool = self.pool
        stopping = pool.stopping
        entries = self.entries
        pending, sizes = self.pending, self.sizes
        while True:
            if stopping.is_set():
                raise Stop
            if (
                not self.exhausted
                and self.pending_bytes <= REQUEST_LOW_WATER
                and len(pending) < PENDING_BATCHES * pool.batch
            ):
                self._ask()
            if not pending:
                if self.exhausted:
                    break
                continue
            if not sizes[0]:  # a loose object: no request was sent
                self._write_loose(pending[0])
                pending.popleft()
                sizes.popleft()
                continue
            cf = self.cf
            assert cf is not None  # entries are pending only once it was asked
            i = pending[0]
            try:
                self._write(cf, i, entries[i])
            except CatFileError as exc:
                # Ask a fresh process again for everything unanswered (the file of
                # entry i, if begun, was removed by the destination).
                self._restart(exc, entries[i])
                continue
            pending.popleft()
            self.pending_bytes -= sizes.popleft()
        for proc in (self.cf, self.plain, self.fallback):
            if proc is not None:
                proc.close()
                if proc.said:
                    self.pool.git_said.append(proc.said)

    def kill(self) -> None:
        """Stop this worker's cat-file processes now (any state)."""
        for proc in (self.cf, self.plain, self.side, self.fallback):
            if proc is not None:
                proc.kill()

    # -- requests -----------------------------------------------------------------
    def _ask(self) -> None:
        """Ask for more entries in one burst, until the request window or the pending
        cap is full, writing at once what needs no answer from this worker's cat-file."""
        pool = self.pool
        entries, skip = self.entries, pool.skip
        pending, sizes = self.pending, self.sizes
        pending_bytes = self.pending_bytes
        most = PENDING_BATCHES * pool.batch
        batch, pos = self._batch, self._pos
        cf = self.cf
        loose = self.loose
        out: list[bytes] = []
        while len(pending) < most and pending_bytes < REQUEST_WINDOW:
            if batch is None or pos >= len(batch):
                batch = pool.take(self.wid)
                pos = 0
                if batch is None:
                    self.exhausted = True
                    break
                if self.reads is not None:
                    self.reads.want(batch)
            i = batch[pos]
            pos += 1
            if skip is not None and skip[i]:
                continue
            e = entries[i]
            if e.mode == MODE_GITLINK:
                # As git: an empty directory for a submodule that is not checked out.
                self._store(i, self.dest.write_dir(e.path))
                self.counts.files += 1
                continue
            conv = self.conversions[i] if self.conversions is not None else None
            if conv is not None and conv.by_git:
                if conv.lfs is not None:
                    self._write_lfs(i, e, conv.lfs)
                else:
                    self._write_filtered(i, e, conv)
                continue
            if loose is not None and e.oid in loose:
                pending.append(i)
                sizes.append(0)
                continue
            if cf is None:
                cf = self.cf = pool.open_catfile(self.wid, filters=False)
            line = cf.request_line(e.oid)
            out.append(line)
            pending.append(i)
            sizes.append(len(line))
            pending_bytes += len(line)
        self._batch, self._pos = batch, pos
        self.pending_bytes = pending_bytes
        if out:
            assert cf is not None
            try:
                cf.send(*out)
            except CatFileError as exc:  # it died: a send is where that shows first
                first = next(j for j, n in zip(pending, self.sizes, strict=True) if n)
                self._restart(exc, entries[first])

    def _restart(self, exc: CatFileError, e: Entry) -> None:
        """Raise the error a user sees, or start a fresh cat-file and ask it again for
        every entry not yet answered (``e`` is the first)."""
        if self.pool.stopping.is_set():
            raise Stop from None  # killed by us (another worker failed or an interrupt)
        where = f"{e.oid} for {quote_path(e.path)}"
        if isinstance(exc, MissingObjectError):
            raise MissingObjectError(
                f"object {where} is missing from the repository", stderr=exc.stderr
            ) from None
        restarts = self.counts.restarts
        if restarts >= MAX_RESTARTS:
            raise CatFileError(
                f"{exc.detail} (last request: {where}; gave up after {restarts} restart"
                f"{'s' if restarts != 1 else ''})",
                stderr=exc.stderr,
            ) from None
        self.counts.restarts += 1
        if self.cf is not None:
            self.cf.kill()
        cf = self.cf = self.pool.open_catfile(self.wid, filters=False)
        entries = self.entries
        asked = zip(self.pending, self.sizes, strict=True)
        lines = [cf.request_line(entries[j].oid) for j, n in asked if n]  # (n == 0: loose)
        self.pending_bytes = sum(len(x) for x in lines)
        if lines:
            # If it broke already, the next read re-raises that and counts a restart.
            with contextlib.suppress(CatFileError):
                cf.send(*lines)

    # -- writing ------------------------------------------------------------------
    def _store(self, i: int, packed: bytes) -> None:
        """Entry ``i`` is complete (written and closed): keep its stat data for the
        index and, if it was written raw, record it in the journal so that a resume
        keeps it unread (a converted entry is written again)."""
        self.stats[i] = packed
        if self.journal is not None and (self.conversions is None or self.conversions[i] is None):
            self.journal.done(i, packed)

    def _write(self, cf: CatFile, i: int, e: Entry) -> None:
        """Read the answer for entry ``i`` from ``cf`` and write it."""
        kind, size = cf.read_header(e.oid)
        self._write_answer(cf, kind, size, i, e)

    def _write_answer(
        self, cf: CatFile | LooseObject, kind: bytes, size: int, i: int, e: Entry
    ) -> None:
        """Write entry ``i`` from an answer whose header said ``kind`` and ``size``: the
        rest of it is read from ``cf`` (a cat-file, or a loose object read in-process)."""
        if kind != b"blob":
            cf.skip(size)
            raise PcheckoutError(
                f"tree entry {e.path.decode('utf-8', 'backslashreplace')} is a {kind.decode()}, "
                "not a blob"
            )
        dest = self.dest
        if isinstance(cf, CatFile) and cf.filters:
            if size <= SMALL_BLOB:
                parts: list[bytes] = []
                cf.read_filtered(parts.append)
                data = b"".join(parts)
                packed = dest.write_file(e.path, e.mode, data)
                size = len(data)
            else:
                packed = dest.write_file(
                    e.path, e.mode, None, cf.read_filtered, lambda: self._ask_again(cf, e)
                )
                size = unpack_stat(packed).size  # a new file holds what was written
        elif e.mode == MODE_SYMLINK:
            packed = dest.write_symlink(e.path, cf.read_small(size))
        elif self.conversions is not None and (conv := self.conversions[i]) is not None:
            # ident and CRLF as git's checkout applies them; the whole blob is needed
            # (text=auto looks at all of it), as git reads it whole too.
            data = conv.apply(cf.read_small(size), e.oid)
            packed = dest.write_file(e.path, e.mode, data)
            size = len(data)
        elif size <= SMALL_BLOB:
            packed = dest.write_file(e.path, e.mode, cf.read_small(size))
        else:
            try:
                packed = dest.write_file(
                    e.path, e.mode, None, lambda sink: cf.stream_to(size, sink), self._again(e)
                )
            finally:
                self._close_side()
        self._store(i, packed)
        counts = self.counts
        counts.files += 1
        counts.bytes += size

    def _again(self, e: Entry) -> Callable[[], Fill]:
        """How a streamed file's blob is had again for another attempt."""
        if self.loose is not None and e.oid in self.loose:
            return lambda: self._reopen(e)
        return lambda: self._fetch_again(e)

    def _reopen(self, e: Entry) -> Fill:
        """A fresh stream of a loose ``e``'s blob (git's, if it is gone meanwhile)."""
        assert self.loose is not None
        obj = self.loose.open(e.oid)
        if obj is None:
            return self._fetch_again(e)
        return lambda sink: obj.stream_to(obj.size, sink)

    def _write_loose(self, i: int) -> None:
        """Entry ``i``'s blob read from its loose object, written; git's answer where the
        object is gone from where it was listed.  A damaged one stops the run: git's own
        answer for it cannot be trusted (a cut-short object whose header says 99 bytes is
        answered with 5 by ``cat-file blob``, exit 0, and stalls ``--batch``)."""
        assert self.loose is not None
        e = self.entries[i]
        try:
            obj = self.loose.open(e.oid)
            if obj is not None:
                try:
                    self._write_answer(obj, obj.kind, obj.size, i, e)
                finally:
                    obj.close()
                return
        except CorruptObjectError as exc:
            raise CorruptObjectError(
                f"object {e.oid} for {quote_path(e.path)} is damaged in the repository "
                f"(loose object {exc.detail})"
            ) from None
        self._write_by_git(i, e)

    def _write_by_git(self, i: int, e: Entry) -> None:
        """Entry ``i`` asked of the fallback cat-file alone."""
        fb = self.fallback
        if fb is None or fb.state is not State.OPEN:
            if fb is not None:
                fb.kill()
            fb = self.fallback = self.pool.open_catfile(self.wid, filters=False)
        try:
            fb.send(fb.request_line(e.oid))
            self._write(fb, i, e)
        except CatFileError as exc:
            if self.pool.stopping.is_set():
                raise Stop from None
            if isinstance(exc, MissingObjectError):
                raise MissingObjectError(
                    f"object {e.oid} for {quote_path(e.path)} is missing from the repository",
                    stderr=exc.stderr,
                ) from None
            raise

    def _fetch_again(self, e: Entry) -> Fill:
        """A fresh stream of ``e``'s blob, for another attempt at a streamed file after a
        network filesystem error (the pipelined answer was consumed by the failed one):
        asked of a side cat-file, started for this file and closed after it, so that the
        pipeline's order is untouched.  If the side process dies, its CatFileError
        restarts the pipeline as any cat-file failure does (entry ``e`` is still first)."""
        side = self.side
        if side is None or side.state is not State.OPEN:
            if side is not None:
                side.kill()
            side = self.side = self.pool.open_catfile(self.wid, filters=False)
        side.send(side.request_line(e.oid))
        _kind, size = side.read_header(e.oid)  # the same object: a blob of the same size
        return lambda sink: side.stream_to(size, sink)

    def _close_side(self) -> None:
        side, self.side = self.side, None
        if side is not None:
            with contextlib.suppress(CatFileError):
                side.close()

    def _ask_again(self, cf: CatFile, e: Entry) -> Fill:
        """Converted contents once more from the ``--filters`` cat-file, asked and answered
        one entry at a time, so nothing else is in its pipe (another attempt at a streamed
        file after a network filesystem error)."""
        cf.send(cf.request_line(e.oid, e.path))
        cf.read_header(e.oid)
        return cf.read_filtered

    def _write_filtered(self, i: int, e: Entry, conv: Conversion) -> None:
        """Entry ``i`` through git's filters, asked and answered at once (few paths: the
        plain pipeline's order is untouched); a failure names the path and the filter,
        and stops the run (a required filter that fails: nothing is recorded)."""
        try:
            if self.one_shot_newlines and b"\n" in e.path:
                self._write_one_shot(i, e)
                return
            plain = self.plain
            if plain is None:
                plain = self.plain = self.pool.open_catfile(self.wid, filters=True)
            plain.send(plain.request_line(e.oid, e.path))
            self._write(plain, i, e)
        except (CatFileError, GitError) as exc:
            if self.pool.stopping.is_set():
                raise Stop from None
            raise FilterError(
                f"git could not convert {quote_path(e.path)} ({conv.describe()})",
                stderr=exc.stderr,
            ) from None

    def _write_lfs(self, i: int, e: Entry, smudge: Smudge) -> None:
        """git-lfs's smudge of a local object, done here (``git/lfs.py`` proved it equal):
        the object's bytes as one more plain file."""
        try:
            if smudge.size <= SMALL_BLOB:
                data = self.reads.take(i) if self.reads is not None else None
                if data is None:
                    with open(smudge.path, "rb") as f:
                        data = f.read()
                if len(data) != smudge.size:
                    raise OSError(0, f"holds {len(data)} bytes, not {smudge.size}")
                packed = self.dest.write_file(e.path, e.mode, data)
            else:
                packed = self.dest.write_file(
                    e.path, e.mode, None, _copy_of(smudge.path), lambda: _copy_of(smudge.path)
                )
        except OSError as exc:
            raise LfsError(
                f"cannot read the LFS object of {quote_path(e.path)} ({smudge.path}): "
                f"{exc.strerror or exc}"
            ) from None
        self._store(i, packed)
        self.counts.files += 1
        self.counts.bytes += smudge.size

    def _write_one_shot(self, i: int, e: Entry) -> None:
        """Filtered contents for a path with a newline, on git < 2.38."""
        proc = self.pool.git.run("cat-file", "--filters", f"--path={os.fsdecode(e.path)}", e.oid)
        if e.mode == MODE_SYMLINK:
            self._store(i, self.dest.write_symlink(e.path, proc.stdout))
        else:
            self._store(i, self.dest.write_file(e.path, e.mode, proc.stdout))
        self.counts.files += 1
        self.counts.bytes += len(proc.stdout)


def _copy_of(path: str) -> Fill:
    """A large LFS object streamed to the file in 1 MiB pieces."""

    def fill(sink: Callable[[bytes], None]) -> None:
        with open(path, "rb") as f:
            while piece := f.read(SMALL_BLOB):
                sink(piece)

    return fill
