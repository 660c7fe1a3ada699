"""``index.lock`` held for a whole run, as git holds it.

git's lockfile protocol (lockfile.c, tempfile.c): ``<index>.lock`` is created
with ``O_CREAT|O_EXCL`` before anything is changed, the new index is written
into the lock file itself, and the lock is renamed over the index to commit
(or removed to roll back).  Whoever finds the lock there fails at once with
``unable_to_lock_message()``; so does a stale lock no process holds, and the
user removes it by hand.

pcheckout takes the lock before its first write and commits it with the new
index, so a second pcheckout or a git command started meanwhile fails at once
and harms nothing.  One addition to git's protocol: a pcheckout killed with
SIGKILL leaves its lock behind, and re-running the same command must finish the
checkout rather than ask the user to delete a file.  So, while it holds the
lock, pcheckout

* keeps a record lock (``fcntl`` ``F_OFD_SETLK``) on the lock file; the kernel
  drops it when the process and its forked writers are gone, however they die;
* writes one line into the (otherwise empty) lock file naming itself and the
  machine: ``pcheckout-lock 1 <hostname>/<machine-id> <boot-id> <pid>``.

A later run that finds a lock takes it over only if it can take the record
lock without waiting (no live process holds it), the file holds such a line,
and the line names this machine (record locks of two NFS clients may not see
each other under ``nolock``; on one machine they always do).  It then owns
that very file (no unlink and re-create, which two contenders could race).
Anything else -- git's own empty lock, a live pcheckout, a line from another
machine -- gets git's message, exit status 128, as git gives it.

So that a kill at *any* moment leaves a lock the re-run can take over, the lock
holds the line from the moment it exists (written into a file of a random name
that is then linked to ``index.lock``: link(2) fails on an existing name as
``O_EXCL`` does) until the index is in place (the new index is written beside
the lock and renamed over the index, then the lock is removed), where git's own
lock is empty at first and holds part of an index at the end.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import NamedTuple

from pcheckout.errors import IndexLockError, WriteError, unable_to_lock_message
from pcheckout.fdio import Data, write_each

#: First bytes of the line pcheckout writes into a lock it holds.
RECORD_PREFIX = b"pcheckout-lock 1 "

_MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
_BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


def _read_id(paths: tuple[str, ...]) -> str:
    for p in paths:
        try:
            with open(p, "rb") as f:
                return f.read(64).strip().decode("ascii", "replace") or "-"
        except OSError:
            continue
    return "-"


def machine() -> str:
    """This machine's name in a lock record: hostname and machine-id (cloned
    virtual machines may share one of them, rarely both)."""
    return f"{os.uname().nodename}/{_read_id(_MACHINE_ID_FILES)}".replace(" ", "_")


def record() -> bytes:
    """The line this process writes into a lock it holds."""
    boot = _read_id((_BOOT_ID_FILE,))
    return RECORD_PREFIX + f"{machine()} {boot} {os.getpid()}\n".encode()


def _stale_record(data: bytes) -> bool:
    """Whether ``data`` (a lock file's bytes) is a record of this machine.  Only its
    first line counts: a run that took a lock over and was killed before cutting the
    file to its own (shorter) record leaves that record first, whole."""
    line, newline, _rest = data.partition(b"\n")
    if not line.startswith(RECORD_PREFIX) or not newline:
        return False
    fields = line[len(RECORD_PREFIX) :].split()
    return len(fields) == 3 and fields[0].decode("utf-8", "replace") == machine()


#: ``struct flock`` for ``F_OFD_SETLK(W)`` on Linux: l_type, l_whence, l_start,
#: l_len, l_pid (must be 0 for OFD locks), padding: 64-bit Linux layout (fcntl(2)).
_FLOCK = struct.Struct("hhqqi4x")
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", None)
#: The record lock is held by another or not supported here (not an error: no lock taken).
_LOCK_REFUSED = frozenset(
    {
        errno.EACCES,
        errno.EAGAIN,
        errno.ENOLCK,
        errno.EOPNOTSUPP,
        errno.EINVAL,
        errno.EDEADLK,
        errno.ENOSYS,
    }
)


def _try_record_lock(fd: int, *, wait: bool) -> bool:
    """Take a write lock on all of ``fd``'s file; False if another holder has
    it or the filesystem cannot lock (then no takeover is ever possible).

    Open-file-description locks where the kernel has them (Linux >= 3.15):
    a classic POSIX lock belongs to the process and is dropped when the
    process closes *any* descriptor of the file, so merely looking at our own
    lock would release it.  An OFD lock is shared with forked writers (they
    inherit the descriptor), so it lasts while any of them still runs."""
    try:
        if _OFD_SETLK is not None and _OFD_SETLKW is not None:
            arg = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            fcntl.fcntl(fd, _OFD_SETLKW if wait else _OFD_SETLK, arg)
        else:  # pragma: no cover - not Linux
            fcntl.lockf(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _LOCK_REFUSED:
            return False
        raise
    return True


class IndexLock:
    """``<index>.lock``, created or taken over; :meth:`commit` renames it
    over the index with new contents, :meth:`rollback` removes it.  As a
    context manager it rolls back unless committed."""

    def __init__(
        self, index_path: str | bytes | os.PathLike[str], fd: int, *, took_over: bool
    ) -> None:
        self.index = os.fsencode(index_path)
        self.path = self.index + b".lock"
        self.took_over = took_over
        self._fd: int | None = fd
        self._size = 0

    @classmethod
    def acquire(cls, index_path: str | bytes | os.PathLike[str]) -> IndexLock:
        """Create ``<index>.lock`` (``O_EXCL``) or take over a dead pcheckout's;
        :class:`IndexLockError` (git's message, exit 128) if it is held."""
        lock = os.fsencode(index_path) + b".lock"
        mine = record()
        try:
            fd, size = _create_holding(lock, mine)
        except FileExistsError:
            fd = _take_over(lock)
            self = cls(index_path, fd, took_over=True)
            self._size = os.fstat(fd).st_size
            _remove_first_names(lock, fd)
        except OSError as exc:
            raise WriteError(lock, exc) from None
        else:
            self = cls(index_path, fd, took_over=False)
            self._size = size
            if size:
                return self
        try:
            self._write(mine)
        except OSError as exc:
            self.rollback()
            raise WriteError(lock, exc) from None
        except BaseException:
            self.rollback()
            raise
        return self

    @property
    def held(self) -> bool:
        return self._fd is not None

    def _write(self, data: bytes | bytearray | memoryview) -> None:
        assert self._fd is not None
        view = memoryview(data)
        off = 0
        while off < len(view):
            off += os.pwrite(self._fd, view[off:], off)
        if len(view) < self._size:
            os.ftruncate(self._fd, len(view))
        self._size = len(view)

    def commit(self, data: Data | Iterator[Data]) -> None:
        """Write ``data`` (an encoded index, or its pieces as they are encoded) beside the
        lock, rename it over the index, then remove the lock; the lock is gone afterwards
        either way (an encoding that fails half way included).

        Not into the lock itself, as git does: the lock keeps its record until the
        index is in place, so a kill at any moment leaves a lock that the re-run
        takes over (a lock holding half an index is git's, never taken over)."""
        if self._fd is None:
            raise IndexLockError(f"internal error: {self.path!r} is not held", self.path)
        new = self.index + NEW_SUFFIX  # only the lock's holder uses it: a stale one is ours
        try:
            fd = os.open(new, _O_NEW | os.O_TRUNC, 0o666)
            try:
                write_each(fd, data)
            finally:
                os.close(fd)
            os.rename(new, self.index)
        except OSError as exc:
            self.rollback()
            with contextlib.suppress(OSError):
                os.unlink(new)
            raise WriteError(self.path, exc) from None
        except BaseException:
            self.rollback()
            with contextlib.suppress(OSError):
                os.unlink(new)
            raise
        self.rollback()

    def commit_from(self, path: str | bytes | os.PathLike[str]) -> None:
        """Rename the index file at ``path`` (written by git, see
        :func:`scratch_index`) over the index, and drop the lock."""
        if self._fd is None:
            raise IndexLockError(f"internal error: {self.path!r} is not held", self.path)
        try:
            os.rename(path, self.index)
        except OSError as exc:
            self.rollback()
            raise WriteError(self.path, exc) from None
        self.rollback()

    def rollback(self) -> None:
        """Remove the lock if this object still holds it (else nothing)."""
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._close()

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> IndexLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.rollback()


class Scratch(NamedTuple):
    """An index file for git commands run while the lock is held."""

    path: bytes

    def env(self, base: Mapping[str, str] | None) -> dict[str, str]:
        """``base`` (None: this process's environment) with GIT_INDEX_FILE set."""
        env = dict(os.environ if base is None else base)
        env["GIT_INDEX_FILE"] = os.fsdecode(self.path)
        return env


@contextlib.contextmanager
def scratch_index(lock: IndexLock, *, copy: bool = False) -> Iterator[Scratch]:
    """A scratch index beside the index, for a git command that would otherwise
    take ``index.lock`` (ours): git reads and writes it through its own
    ``<scratch>.lock``.  ``copy`` starts it as a copy of the index, its mtime
    kept (git's racy-clean check compares entries with the index file's mtime).
    Commit it with :meth:`IndexLock.commit_from`; otherwise it is removed.

    The name is fixed: only the holder of ``index.lock`` uses it, so whatever is
    there (a killed run's) is removed first."""
    path = lock.index + b".pcheckout-scratch"
    for stale in (path, path + b".lock"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)
    try:
        if copy:
            try:
                _copy_file(lock.index, path)
                st = os.stat(lock.index)
                os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
            except FileNotFoundError:
                pass  # no index yet: git starts from none
            except OSError as exc:
                raise WriteError(path, exc) from None
        yield Scratch(path)
    finally:
        for left in (path, path + b".lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(left)


def _copy_file(src: bytes, dst: bytes) -> None:
    """``shutil.copyfile`` (the bytes, not the mode) in a few lines: shutil imports zlib, bz2
    and lzma, ~4 ms of a start in a plain venv, for a copy every checkout by git's writer
    makes.  In the kernel (``sendfile``) where it can, as shutil does."""
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size, done = os.fstat(fin.fileno()).st_size, 0
        try:
            while done < size and (sent := os.sendfile(fout.fileno(), fin.fileno(), done, size)):
                done += sent
        except OSError:  # (no sendfile between these two files: read and write)
            pass
        fin.seek(done)
        fout.seek(done)
        while chunk := fin.read(COPY_CHUNK):
            fout.write(chunk)


#: Bytes read at a time by :func:`_copy_file` where ``sendfile`` cannot copy.
COPY_CHUNK = 1 << 20

#: Beside the index: the new index, written there and renamed over the index (commit).
NEW_SUFFIX = b".pcheckout-new"
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NEW = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | _O_NOFOLLOW
_O_TMP = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | _O_NOFOLLOW
#: link(2) is not supported here: the lock is created empty, then written (git's way).
_NO_LINK = frozenset(
    {
        errno.EPERM,
        errno.EOPNOTSUPP,
        errno.ENOTSUP,
        errno.ENOSYS,
        errno.EXDEV,
        errno.EMLINK,
        errno.EACCES,
    }
)


def _create_holding(lock: bytes, mine: bytes) -> tuple[int, int]:
    """A new ``lock`` (FileExistsError if there is one), record-locked, that holds
    ``mine`` from the moment it exists: written into a file of a random name first and
    linked to ``lock`` (link(2) fails if the name exists, like ``O_EXCL``), so a kill at
    any moment leaves either no lock or one whose record a re-run recognises.  Where
    link(2) is not supported, created empty (``O_EXCL``) and then written.  Returns
    the descriptor and the bytes the lock holds (0: empty)."""
    tmp = lock + b"." + os.urandom(8).hex().encode() + b".pcheckout"
    fd = os.open(tmp, _O_TMP, 0o666)
    try:
        try:
            _try_record_lock(fd, wait=False)  # nobody else knows the name yet
            off = 0
            while off < len(mine):
                off += os.pwrite(fd, mine[off:], off)
            try:
                os.link(tmp, lock)
            except FileNotFoundError:
                # The holder removed our first name as a dead run's (it was not yet
                # record-locked): the lock is held.
                raise FileExistsError(errno.EEXIST, "File exists") from None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in _NO_LINK:
            raise
        return _create_empty(lock), 0
    except BaseException:
        os.close(fd)
        raise
    return fd, len(mine)


def _remove_first_names(lock: bytes, held: int) -> None:
    """Remove what killed runs left of their locks' first names (a kill between the
    link and the unlink in :func:`_create_holding`): another name of the lock taken
    over (``held``, its descriptor), or one no live process holds a record lock on.
    Only after a takeover, i.e. after a kill: it lists the git dir."""
    ours = os.fstat(held).st_ino
    d, _, base = lock.rpartition(b"/")
    try:
        names = os.listdir(d or b".")
    except OSError:
        return
    for name in names:
        if not (name.startswith(base + b".") and name.endswith(b".pcheckout")):
            continue
        path = (d + b"/" if d else b"") + name
        try:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | _O_NOFOLLOW)
        except OSError:
            continue
        try:
            if os.fstat(fd).st_ino == ours or _try_record_lock(fd, wait=False):
                with contextlib.suppress(OSError):
                    os.unlink(path)
        finally:
            os.close(fd)


def _create_empty(lock: bytes) -> int:
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        # A contender may hold the record lock for the moment it takes to read
        # our empty file and give up; wait for that.
        _try_record_lock(fd, wait=True)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)
        raise
    return fd


def _take_over(lock: bytes) -> int:
    """An fd of the existing ``lock``, record-locked, if a pcheckout of this
    machine left it and is dead; else git's error."""
    busy = IndexLockError(unable_to_lock_message(lock), lock)
    try:
        fd = os.open(lock, os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        # Committed or rolled back just now: git would have failed a moment
        # earlier; so do we (a retry loop is the caller's business, not ours).
        raise busy from None
    except OSError:
        raise busy from None
    try:
        if not _try_record_lock(fd, wait=False):
            raise busy
        data = os.pread(fd, 4096, 0)
        if not _stale_record(data):
            raise busy
        # Still the file at that name?  (It cannot change while we hold the
        # record lock: only a holder renames or removes a pcheckout lock.)
        try:
            same = os.fstat(fd).st_ino == os.lstat(lock).st_ino
        except OSError:
            same = False
        if not same:
            raise busy
    except BaseException:
        os.close(fd)  # drops our record lock too
        raise
    return fd


__all__ = ["RECORD_PREFIX", "IndexLock", "Scratch", "machine", "record", "scratch_index"]
