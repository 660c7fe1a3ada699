"""Creating a work tree's files, symlinks and directories, and the stat data kept of each.

A fresh checkout writes into an empty directory, so nothing is checked per path: every file
is created with ``O_EXCL`` (:data:`O_CREATE`), which turns any surprise into an error instead
of a silent overwrite.  Where something may be in the way (a resumed run, ``--force``) a
:class:`Destination` made with ``overwrite=True`` removes it and creates again.  Directories
are made on demand by whichever thread first needs one (:class:`DirMaker`): each is made
exactly once and other threads wait only for that one ``mkdir``.

Paths are bytes relative to the destination's root, joined as :func:`full_path` does.
Errors are :class:`~pcheckout.errors.WriteError` naming the relative path; a file that could
not be completed is removed, never left truncated.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
import struct
import threading
from collections.abc import Callable
from typing import NamedTuple

from pcheckout.errors import WriteError
from pcheckout.fdio import write_all
from pcheckout.fs.retry import retryable, retrying
from pcheckout.git.tree import MODE_EXEC, MODE_FILE

__all__ = [
    "O_CREATE",
    "STAT_SIZE",
    "Abandoned",
    "Destination",
    "DirMaker",
    "Fill",
    "StatData",
    "full_path",
    "pack_stat",
    "remove_in_the_way",
    "unpack_stat",
]

#: How every work-tree file is created: exclusively, never through a symlink, not inherited
#: by child processes (the cat-file processes started while other threads write).
O_CREATE = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)

#: Stat data kept per written entry until the index is written: packed, 48
#: bytes instead of a ~580-byte os.stat_result (23 MiB per 40k files measured
#: with tracemalloc, which alone broke the 150 MB-per-100k-files RSS budget).
_STAT = struct.Struct("=qqQQIIQ")
STAT_SIZE = _STAT.size


class StatData(NamedTuple):
    ctime_ns: int
    mtime_ns: int
    dev: int
    ino: int
    uid: int
    gid: int
    size: int


def pack_stat(st: os.stat_result) -> bytes:
    return _STAT.pack(
        st.st_ctime_ns, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_uid, st.st_gid, st.st_size
    )


def unpack_stat(packed: bytes) -> StatData:
    return StatData(*_STAT.unpack(packed))


def full_path(root: bytes, path: bytes) -> bytes:
    """``path`` (relative, as in a tree) under ``root`` (absolute)."""
    return root + b"/" + path


def remove_in_the_way(path: bytes) -> None:
    """Remove what is at ``path``: a directory with everything in it, else the one entry."""
    if stat_mod.S_ISDIR(os.lstat(path).st_mode):
        import shutil  # (not imported ahead: ~3 ms of a start in a plain venv)

        shutil.rmtree(path)
    else:
        os.unlink(path)


def _unlink_quietly(path: bytes) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class Abandoned(Exception):
    """Internal: a directory another thread was making could not be made.  That thread
    reports why; whoever waited for the directory stops without a second report."""


class DirMaker:
    """Makes each directory under ``root`` exactly once, whichever thread asks first.

    A thread that asks for a directory another thread is making waits for that one
    ``mkdir`` (a per-directory claim), not for a lock held across every ``mkdir``.
    """

    def __init__(self, root: bytes, *, overwrite: bool = False) -> None:
        self.root = root
        self.overwrite = overwrite
        #: Directories made (relative).  Read without the lock: a directory is added
        #: only once it exists.
        self.made: set[bytes] = set()
        self._lock = threading.Lock()
        self._claimed: dict[bytes, threading.Event] = {}

    def make(self, d: bytes) -> None:
        """Make directory ``d`` (relative) and its parents, unless made already."""
        if d in self.made:
            return
        parent = d.rpartition(b"/")[0]
        if parent:
            self.make(parent)
        with self._lock:
            if d in self.made:
                return
            ev = self._claimed.get(d)
            owner = ev is None
            if ev is None:
                ev = self._claimed[d] = threading.Event()
        if not owner:
            ev.wait()
            if d not in self.made:
                raise Abandoned
            return
        path = full_path(self.root, d)

        def once(_attempt: int) -> None:
            try:
                os.mkdir(path, 0o777)
            except FileExistsError:  # (a retried mkdir finds what the failed one made)
                if not stat_mod.S_ISDIR(os.lstat(path).st_mode):
                    if not self.overwrite:
                        raise
                    remove_in_the_way(path)
                    os.mkdir(path, 0o777)

        try:
            retrying(once)
            self.made.add(d)
        except OSError as exc:
            raise WriteError(d, exc) from None
        finally:
            ev.set()


#: What streams a file's contents: called with the sink that writes one piece.
Fill = Callable[[Callable[[bytes], None]], None]


class _Streams:
    """The streams of one file's attempts: the first as given (until an attempt has
    used it: a create that failed did not), then a fresh one per attempt."""

    def __init__(self, first: Fill, again: Callable[[], Fill]) -> None:
        self._first: Fill | None = first
        self._again = again

    def next(self) -> Fill:
        first, self._first = self._first, None
        return first if first is not None else self._again()


def _fill_to(fd: int, fill: Fill) -> None:
    """Write what ``fill`` streams to ``fd``.  After a write fails with an error worth
    another attempt, the rest of the stream is read and dropped (its source stays in
    step), then that error is raised; any other error is raised at once."""
    failed: list[OSError] = []

    def sink(chunk: bytes) -> None:
        if failed:
            return
        try:
            write_all(fd, chunk)
        except OSError as exc:
            if not retryable(exc):
                raise
            failed.append(exc)

    fill(sink)
    if failed:
        raise failed[0]


class Destination:
    """Creates entries under ``root``; ``overwrite`` replaces what is in the way (resume,
    ``--force``); ``symlinks=False`` (git's ``core.symlinks``) writes a symlink as a plain
    file holding its target.  Safe to use from many threads at once."""

    def __init__(self, root: bytes, *, overwrite: bool = False, symlinks: bool = True) -> None:
        self.root = root
        self.overwrite = overwrite
        self.symlinks = symlinks
        self.dirs = DirMaker(root, overwrite=overwrite)
        # The per-file paths: full_path() with the root's slash joined once.
        self._prefix = full_path(root, b"")
        self._made = self.dirs.made

    def write_file(
        self,
        rel: bytes,
        mode: int,
        data: bytes | None,
        fill: Fill | None = None,
        again: Callable[[], Fill] | None = None,
    ) -> bytes:
        """Create file ``rel`` holding ``data``, or the pieces ``fill`` passes to its sink
        (large or converted contents); git mode ``mode`` 100755 makes it executable.
        Return its packed stat data.

        On a network filesystem's transient error (fs/retry.py) the whole file is written
        again, a bounded number of times: from ``data``, or for a streamed file from a
        fresh stream that ``again()`` asks for (``fill``'s was consumed).  A stream whose
        write failed that way is still read to its end, so that its source stays in step
        (the next answer of a pipelined cat-file).  Without ``again`` a streamed file has
        one attempt."""
        parent = rel.rpartition(b"/")[0]
        if parent and parent not in self._made:
            self.dirs.make(parent)
        path = self._prefix + rel
        perm = 0o777 if mode == MODE_EXEC else 0o666
        try:
            if data is not None:
                return retrying(lambda n: self._file_once(path, perm, data, None, again=n > 0))
            assert fill is not None
            if again is None:  # its bytes cannot be had again for another attempt
                return self._file_once(path, perm, None, lambda: fill, again=False)
            streams = _Streams(fill, again)
            return retrying(lambda n: self._file_once(path, perm, None, streams.next, again=n > 0))
        except OSError as exc:
            raise WriteError(rel, exc) from None

    def _file_once(
        self,
        path: bytes,
        perm: int,
        data: bytes | None,
        stream: Callable[[], Fill] | None,
        *,
        again: bool,
    ) -> bytes:
        """One attempt at a file: create, fill (``data``, or the stream ``stream()`` gives,
        asked for once the file exists), stat, close; on any failure the file is removed
        (never left truncated) and the OSError raised as it came.  ``again``: an earlier
        attempt failed, and what it may have left at ``path`` is its own."""
        try:
            fd = os.open(path, O_CREATE, perm)
        except FileExistsError:
            if not (self.overwrite or again):
                raise
            remove_in_the_way(path)
            fd = os.open(path, O_CREATE, perm)
        try:
            try:
                if data is not None:
                    write_all(fd, data)
                else:
                    assert stream is not None
                    _fill_to(fd, stream())
                packed = pack_stat(os.fstat(fd))
            finally:
                os.close(fd)
        except BaseException:
            _unlink_quietly(path)  # never leave a truncated file behind
            raise
        return packed

    def write_symlink(self, rel: bytes, target: bytes) -> bytes:
        """Create symlink ``rel`` pointing at ``target``; return its packed stat data."""
        if not self.symlinks:
            return self.write_file(rel, MODE_FILE, target)
        parent = rel.rpartition(b"/")[0]
        if parent and parent not in self._made:
            self.dirs.make(parent)
        path = self._prefix + rel

        def once(attempt: int) -> bytes:
            try:
                os.symlink(target, path)
            except FileExistsError:
                if not (self.overwrite or attempt > 0):
                    raise
                remove_in_the_way(path)
                os.symlink(target, path)
            return pack_stat(os.lstat(path))

        try:
            return retrying(once)
        except OSError as exc:
            raise WriteError(rel, exc) from None

    def write_dir(self, rel: bytes) -> bytes:
        """Make directory ``rel`` (an empty one, as git leaves a submodule that is not
        checked out); return its packed stat data."""
        self.dirs.make(rel)
        try:
            return pack_stat(os.lstat(self._prefix + rel))
        except OSError as exc:
            raise WriteError(rel, exc) from None
