"""A long-lived ``git cat-file --batch`` process, spoken to byte-exactly.

Protocol (git-cat-file(1), BATCH OUTPUT): for each request line git answers
``<oid> SP <type> SP <size> LF <contents> LF`` or ``<object> SP missing LF``.
With ``--filters`` a request is ``<oid> SP <path>`` and the contents are what
``git checkout`` would write for that path (eol, ident, smudge filters).

With ``--filters`` the header's size is the size of the *stored* blob, not of
the converted contents that follow (git's t8010 pins this), so converted
answers are not self-delimiting.  Each filtered request is therefore followed
by a request that git answers with ``<name> missing``: the empty tree (an
object every git knows in memory, sha1 or sha256 after the request's object
id) with a path that cannot exist in it, ``<empty tree>:<nonce>``.  Resolving
it costs no file access and never a fetch in a partial clone (cached empty
tree, failed path lookup; strace: 10 such requests add 1 file syscall where
10 missing random object ids add 61, a pack-directory rescan each,
``packfile.c: reprepare_packed_git``).  The converted contents are exactly the
bytes before ``LF <name> SP missing LF``; the nonce is 128 fresh random bits
per process, drawn after every blob it delimits was written, so no content
can contain it.

The caller pipelines: it may send many requests before reading answers.  It
must keep the unread request bytes below one pipe page (``REQUEST_WINDOW``) so
that a write to git's stdin can never block while git itself is blocked
writing answers we have not read yet (the classic two-pipe deadlock).
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any, NoReturn, Protocol

from pcheckout.errors import CatFileError, MissingObjectError, decode
from pcheckout.git.runner import Git

#: Unread request bytes allowed in git's stdin pipe.  4096 is the smallest pipe
#: capacity Linux ever gives (one page, when pipe-user-pages-soft is exceeded);
#: ~100 sha1 requests, enough to keep git busy while we write files.
REQUEST_WINDOW = 4096
#: Read buffer for git's stdout and the chunk size for streaming large blobs:
#: a 1 GiB blob passes through in 64 KiB pieces (bounded memory).  A pipe holds
#: 64 KiB on Linux, so a larger buffer never fills and only costs memory (x64
#: workers).
READ_BUFFER = 64 * 1024
#: What a cat-file printed on stderr kept for the user at its clean exit (its last bytes):
#: git's lines about the files it converted ("error: external filter 'x' failed", a
#: filter process's own words), which git's checkout prints as it writes.
SAID_LIMIT = 1 << 20
#: Blobs up to this size are read in one call and written with one write().
SMALL_BLOB = 1024 * 1024
#: The empty tree of each object format (``git hash-object -t tree /dev/null``),
#: chosen by the length of the requested object id.
EMPTY_TREE = {
    40: "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    64: "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
}


class Spawn(Protocol):
    """Seam for tests: build the process from git's argv and the Popen keywords.

    The keywords are the pipes, the stderr file, ``env`` and buffering that a
    real cat-file would get; a stand-in should pass them on to ``Popen`` (its
    stderr then shows up in error messages like git's would).
    """

    def __call__(self, argv: Sequence[str], **popen_kw: Any) -> subprocess.Popen[bytes]: ...


class State(enum.Enum):
    OPEN = 1
    CLOSED = 2  # we closed it
    BROKEN = 3  # it died, lied or was cut short


class _Reader:
    """A small buffered reader over a pipe that can also scan for a marker."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw  # the unbuffered pipe (owns the fd)
        self.buf = b""
        self.pos = 0

    def _fill(self) -> bool:
        chunk = self.raw.read(READ_BUFFER)
        if not chunk:
            return False
        self.buf = self.buf[self.pos :] + chunk
        self.pos = 0
        return True

    def readline(self) -> bytes:
        while True:
            i = self.buf.find(b"\n", self.pos)
            if i >= 0:
                line = self.buf[self.pos : i + 1]
                self.pos = i + 1
                return line
            if not self._fill():
                rest = self.buf[self.pos :]
                self.pos = len(self.buf)
                return rest

    def read(self, n: int) -> bytes:
        while len(self.buf) - self.pos < n:
            if not self._fill():
                break
        data = self.buf[self.pos : self.pos + n]
        self.pos += len(data)
        return data

    def read_until(self, marker: bytes, sink: Callable[[bytes], None]) -> bool:
        """Pass everything before ``marker`` to ``sink``; consume the marker."""
        keep = len(marker) - 1
        while True:
            i = self.buf.find(marker, self.pos)
            if i >= 0:
                if i > self.pos:
                    sink(self.buf[self.pos : i])
                self.pos = i + len(marker)
                return True
            safe = len(self.buf) - keep
            if safe > self.pos + READ_BUFFER // 4:  # bounded memory for huge answers
                sink(self.buf[self.pos : safe])
                self.pos = safe
            if not self._fill():
                return False

    def close(self) -> None:
        self.raw.close()


def _start_failure(exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        reason += "; use fewer workers (-j) or raise the open-file limit (ulimit -n)"
    return f"cannot start git cat-file: {reason}"


def _scratch_file() -> IO[bytes]:
    """Where a child's stderr goes: memory where Linux offers it (``memfd``),
    so starting 64 workers touches no disk (on this machine's throttled virtio
    disk every create counts), else an unlinked temporary file."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        try:
            return open(memfd("pcheckout-catfile-stderr", os.MFD_CLOEXEC), "w+b")  # noqa: SIM115
        except OSError:
            pass
    return tempfile.TemporaryFile(prefix="pcheckout-catfile-")  # noqa: SIM115


class CatFile:
    """One ``git cat-file --batch`` child; belongs to exactly one worker thread."""

    def __init__(
        self,
        git: Git,
        *,
        filters: bool = False,
        nul: bool = False,
        attr_source: str | None = None,
        spawn: Spawn | None = None,
        name: str = "cat-file",
    ) -> None:
        self.name = name
        self.filters = filters
        self.nul = nul
        args: list[str] = []
        if attr_source is not None:
            args.append(f"--attr-source={attr_source}")
        args += ["cat-file", "--batch"]
        if filters:
            args.append("--filters")
        if nul:
            args.append("-z")
        try:
            # Lives as long as the process; closed by close() / kill().
            self._stderr = _scratch_file()
        except OSError as exc:
            raise CatFileError(_start_failure(exc)) from None
        #: The last request sent (named in an error if git dies before answering).
        self.last_request = b""
        #: The object whose answer is being read (named when the answer is bad).
        self.asked = ""
        #: What git printed on stderr, once it exited cleanly (:meth:`close`).
        self.said = b""
        self._failure: CatFileError | None = None
        popen_kw: dict[str, Any] = dict(
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            bufsize=0 if filters else READ_BUFFER,
            close_fds=True,
        )
        try:
            if spawn is None:
                self.proc = git.popen(args, **popen_kw)
            else:
                env = None if git.env is None else dict(git.env)
                self.proc = spawn(git.argv(args), env=env, **popen_kw)
        except OSError as exc:
            self._stderr.close()
            raise CatFileError(_start_failure(exc)) from None
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        #: Answers: the buffered pipe, or with filters the reader that can scan for the
        #: sentinel's answer (``_reader``, the same object).
        self._out: IO[bytes] | _Reader = self.proc.stdout
        if filters:
            self._reader = self._out = _Reader(self.proc.stdout)
            nonce = os.urandom(16).hex()
            #: oid length -> (sentinel request name, the answer that ends contents)
            self._sentinels = {
                n: (name, b"\n" + name + b" missing\n")
                for n, name in ((n, f"{t}:{nonce}".encode("ascii")) for n, t in EMPTY_TREE.items())
            }
            self._marker = self._sentinels[40][1]
        self.state = State.OPEN

    # -- requests -------------------------------------------------------------
    def request_line(self, oid: str, path: bytes | None = None) -> bytes:
        term = b"\0" if self.nul else b"\n"
        if self.filters:
            assert path is not None
            sentinel = self._sentinels[len(oid)][0]
            return oid.encode("ascii") + b" " + path + term + sentinel + b" -" + term
        return oid.encode("ascii") + term

    def send(self, *requests: bytes) -> None:
        """Write ``requests`` (lines from :meth:`request_line`) to git in one write; the
        last is named in the error if git turns out to have died."""
        self._check_open()
        self.last_request = requests[-1]
        try:
            self._in.write(b"".join(requests))
            self._in.flush()
        except (BrokenPipeError, ValueError, OSError) as exc:
            self._broken(f"stopped reading requests ({exc.__class__.__name__})")

    # -- answers --------------------------------------------------------------
    def read_header(self, oid: str) -> tuple[bytes, int]:
        """The answer's (type, size) for a request of ``oid``."""
        self._check_open()
        self.asked = oid
        if self.filters:
            self._marker = self._sentinels[len(oid)][1]
        line = self._out.readline()
        if not line:
            self._broken("exited before answering")
        if not line.endswith(b"\n"):
            self._broken("sent a truncated header")
        parts = line[:-1].split(b" ")
        if len(parts) == 2 and parts[1] == b"missing" and parts[0] == oid.encode("ascii"):
            # A complete answer, not a fault of the process: retrying cannot help.
            self.state = State.BROKEN
            self._failure = MissingObjectError(
                f"object {oid} is missing from the repository", stderr=self.stderr_tail()
            )
            self._failure.request = oid
            raise self._failure
        if len(parts) != 3 or parts[0] != oid.encode("ascii") or not parts[2].isdigit():
            self._broken(f"answered {decode(line[:120]).strip()!r}")
        return parts[1], int(parts[2])

    def read_small(self, size: int) -> bytes:
        data: bytes = self._out.read(size + 1)
        if len(data) != size + 1 or data[-1] != 10:
            if len(data) >= size:
                self._broken("sent an answer without its trailing newline")
            self._broken(f"cut an answer short ({len(data)} of {size} bytes)")
        return data[:-1]

    def read_filtered(self, sink: Callable[[bytes], None]) -> None:
        """Converted contents (after ``read_header``): up to the sentinel's answer."""
        if not self._reader.read_until(self._marker, sink):
            self._broken("cut a converted answer short")

    def stream_to(self, size: int, sink: Callable[[bytes], None]) -> None:
        """Pass ``size`` bytes of contents to ``sink`` in bounded pieces."""
        remaining = size
        read = self._out.read
        while remaining:
            chunk = read(min(remaining, READ_BUFFER))
            if not chunk:
                self._broken(f"cut an answer short ({size - remaining} of {size} bytes)")
            sink(chunk)
            remaining -= len(chunk)
        if read(1) != b"\n":
            self._broken("sent an answer without its trailing newline")

    def skip(self, size: int) -> None:
        self.stream_to(size, lambda _chunk: None)

    # -- lifecycle ------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> None:
        """Close stdin, reap the child, check its exit status."""
        if self.state is not State.OPEN:
            self.kill()
            return
        self.state = State.CLOSED
        with contextlib.suppress(OSError):
            self._in.close()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return
        finally:
            self._out.close()
        err = self.stderr_tail(SAID_LIMIT)
        self._stderr.close()
        if code != 0:
            raise CatFileError(f"git cat-file exited with status {code}", stderr=err[-2000:])
        self.said = err

    def kill(self) -> None:
        """Stop the child now (any state) and reap it."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # an unkillable child: give up
            self.proc.wait(5)
        for stream in (self._in, self._out):
            with contextlib.suppress(OSError):
                stream.close()
        if self.state is State.OPEN:
            self.state = State.CLOSED
        if not self._stderr.closed:
            self._stderr.close()

    def stderr_tail(self, limit: int = 2000) -> bytes:
        if self._stderr.closed:
            return b""
        try:
            self._stderr.flush()
            size = os.fstat(self._stderr.fileno()).st_size
            self._stderr.seek(max(0, size - limit))
            tail: bytes = self._stderr.read()
            return tail
        except OSError:
            return b""

    def _check_open(self) -> None:
        if self.state is State.OPEN:
            return
        if self.state is State.BROKEN and self._failure is not None:
            raise self._failure  # what broke it, with git's stderr
        what = "closed" if self.state is State.CLOSED else "it broke"
        raise CatFileError(f"{self.name}: used after it was {what}")

    def _broken(self, what: str) -> NoReturn:
        """Raise (and remember) what went wrong with the process, with git's stderr."""
        self.state = State.BROKEN
        with contextlib.suppress(subprocess.TimeoutExpired):  # let it finish dying
            self.proc.wait(0.2)
        err = self.stderr_tail()
        req = self.asked or decode(self.last_request).strip()
        exc = CatFileError(f"{self.name} {what} (request: {req})", stderr=err)
        exc.detail = f"{self.name} {what}"
        exc.request = req
        self._failure = exc
        raise exc


class Prestarted:
    """Plain ``cat-file --batch`` processes started ahead of the writers that will use them.

    A cat-file is ready only once git has found the repository and read its config: on
    a network mount tens of round trips (one answering one object took 51-58 ms on the
    1 ms latency mount) that each writer otherwise waits for before its first file.
    Started here, in a thread, as soon
    as the worker count is planned, they warm up while the run still checks the tree,
    plans conversions and proves what a resume keeps.  :meth:`take` hands one over,
    waits for one being started that no other writer waits for, or (None) lets the writer
    start its own, at once and beside the others: then one fewer is started here, so there
    are never more than ``count`` in all.  (Writers that all waited for this one thread
    got their cat-files one every ~25 ms: the 32nd ~0.4 s after the first on the 1 ms
    mount.)  They are handed only to a writer that runs the same git (command line and
    environment: a partial clone's writers may read a staging directory, or be told not
    to fetch).  :meth:`close` kills those never taken."""

    def __init__(self, git: Git, count: int, *, spawn: Spawn | None = None) -> None:
        self._git = git
        self._ready: list[CatFile] = []
        self._lock = threading.Condition()
        self._left = count  # still to be started, here or by a writer
        self._starting = False  # one is being started here
        self._claimed = 0  # a writer waits for it (0 or 1)
        self._closed = False
        self._thread = threading.Thread(
            target=self._start, args=(git, spawn), name="pcheckout-prestart", daemon=True
        )
        self._thread.start()

    def _start(self, git: Git, spawn: Spawn | None) -> None:
        while True:
            with self._lock:
                if self._left <= 0 or self._closed:
                    return
                self._left -= 1
                self._starting = True
            cf = None
            try:
                cf = CatFile(git, spawn=spawn, name="cat-file")
            except CatFileError:
                pass  # a writer that starts its own gets the error, with its context
            finally:
                with self._lock:
                    self._starting = False
                    if cf is not None and not self._closed:
                        self._ready.append(cf)
                        cf = None
                    elif cf is None:
                        self._left = 0  # (it failed: stop starting)
                    self._lock.notify_all()
            if cf is not None:
                cf.kill()  # closed meanwhile
                return

    def ready(self) -> int:
        """How many are started and not yet taken."""
        with self._lock:
            return len(self._ready)

    def take(self, git: Git) -> CatFile | None:
        """One started for ``git`` (waiting for one being started); None: start your own."""
        if git.argv([]) != self._git.argv([]) or git.env != self._git.env:
            return None
        with self._lock:
            while True:
                if self._ready:
                    return self._ready.pop()
                if not (self._starting and not self._claimed):
                    break
                # (the one being started is nobody else's: wait for it; should a writer
                # that came later take it first, wait for the next or start one's own)
                self._claimed += 1
                try:
                    while not self._ready and self._starting:
                        self._lock.wait()
                finally:
                    self._claimed -= 1
            if self._left > 0:
                self._left -= 1  # (the writer starts its own: one fewer here)
            return None

    def close(self) -> None:
        with self._lock:
            self._closed = True  # nothing more starts; one being started is killed
        self._thread.join()
        with self._lock:
            left, self._ready = self._ready, []
        for cf in left:
            cf.kill()
