"""Loose objects read in-process: where each one is, and its bytes.

A ``cat-file --batch`` answers a loose object by looking for it in every object
directory in turn (the repository's own first, then the alternates), opening it two or
three times (its type and size, then its contents).  On a network mount each of those is
a round trip, and one cat-file makes them one after the other for its worker: a checkout
from a clone whose own ``.git/objects`` is on the mount pays them even for the objects it
borrows from a local repository.  Here the object directories are listed once (which
loose object is in which directory), and a writer thread opens the one file that holds
its blob, once, beside the other writers.  Packed objects, and anything not found where
the listing said, are still git's (the caller falls back to cat-file).

The object directories are git's: ``GIT_OBJECT_DIRECTORY`` or the repository's
``objects``, ``GIT_ALTERNATE_OBJECT_DIRECTORIES`` and each directory's
``info/alternates``, recursively (relative paths from the directory naming them, at most
:data:`MAX_ALTERNATE_DEPTH` deep as in git's ``link_alt_odb_entries``).
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pcheckout.errors import CorruptObjectError

#: git's limit on nested alternates (sha1-file.c: "alternate ref depth").
MAX_ALTERNATE_DEPTH = 5
#: Compressed bytes read at a time (a pipe's worth, as cat-file's answers).
CHUNK = 64 * 1024
#: Inflated bytes given out at a time at most (a highly compressed blob cannot balloon).
PIECE = 256 * 1024
#: The longest header git writes ("commit 18446744073709551615\0").
MAX_HEADER = 32
_HEX = frozenset("0123456789abcdef")
#: C escapes git's quoting writes (quote.c), as the byte each stands for.
_ESCAPES = {ord(k): ord(v) for k, v in zip('ntabfrv"\\', '\n\t\a\b\f\r\v"\\', strict=True)}


def object_dirs(common_dir: Path, cwd: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """The object directories git reads for a repository whose common git dir is
    ``common_dir``, run in ``cwd`` with environment ``env`` (None: this process's), in
    git's order, each once; directories that do not exist are left out."""
    env = os.environ if env is None else env
    primary = env.get("GIT_OBJECT_DIRECTORY")
    first = cwd / primary if primary else common_dir / "objects"
    found: list[Path] = []
    seen: set[Path] = set()

    def add(d: Path, depth: int) -> None:
        try:
            real = d.resolve()
        except OSError:
            return
        if real in seen or not real.is_dir():
            return
        seen.add(real)
        found.append(real)
        if depth >= MAX_ALTERNATE_DEPTH:
            return
        try:
            text = (real / "info" / "alternates").read_bytes()
        except OSError:
            return
        for name in _alternates(text.split(b"\n")):
            add(real / os.fsdecode(name), depth + 1)

    add(first, 0)
    extra = env.get("GIT_ALTERNATE_OBJECT_DIRECTORIES")
    if extra:
        for name in _alternates(os.fsencode(extra).split(b":")):
            add(cwd / os.fsdecode(name), 1)
    return found


def _alternates(lines: list[bytes]) -> Iterator[bytes]:
    """The paths a list of alternates names (git's rules: blank lines and ``#`` comments
    skipped, a C-quoted name unquoted)."""
    for line in lines:
        line = line.rstrip(b"\r")
        if not line or line.startswith(b"#"):
            continue
        if line.startswith(b'"') and line.endswith(b'"') and len(line) > 1:
            line = _unquote(line[1:-1])
        yield line


def _unquote(s: bytes) -> bytes:
    """A C-quoted name's bytes (quote.c's unquote_c_style: \\n \\t \\" \\\\ and octal)."""
    out = bytearray()
    i = 0
    simple = _ESCAPES
    while i < len(s):
        c = s[i]
        if c == 92 and i + 1 < len(s):
            n = s[i + 1]
            if n in simple:
                out.append(simple[n])
                i += 2
                continue
            digits = s[i + 1 : i + 4]
            if len(digits) == 3 and all(48 <= d <= 55 for d in digits):
                out.append(int(digits, 8) & 0xFF)
                i += 4
                continue
        out.append(c)
        i += 1
    return bytes(out)


class LooseObjects:
    """Which loose objects the object directories hold, listed once (:func:`scan`)."""

    def __init__(self, dirs: list[Path], where: dict[str, int]) -> None:
        self.dirs = [os.fsencode(d) + b"/" for d in dirs]
        self._where = where  # oid -> index in dirs

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, oid: object) -> bool:
        return oid in self._where

    def path(self, oid: str) -> bytes | None:
        d = self._where.get(oid)
        if d is None:
            return None
        return b"%s%s/%s" % (self.dirs[d], oid[:2].encode(), oid[2:].encode())

    def open(self, oid: str) -> LooseObject | None:
        """The object, its header read; None when it is no longer where it was listed
        (packed and pruned since: git has it).  Raises :class:`CorruptObjectError`."""
        path = self.path(oid)
        if path is None:
            return None
        try:
            f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by LooseObject
        except FileNotFoundError:
            return None
        except OSError as exc:
            error = CorruptObjectError(f"cannot read loose object {oid}: {exc.strerror}")
            error.detail = f"{os.fsdecode(path)}: {exc.strerror}"
            raise error from None
        return LooseObject(oid, path, f)


def scan(dirs: list[Path], oid_len: int, threads: int = 1) -> LooseObjects:
    """List the loose objects of ``dirs`` (ids of ``oid_len`` hex digits): one listing of
    each directory, then one of each fan-out directory present, ``threads`` at a time
    (each is a round trip or three on a network mount)."""
    fanouts: list[tuple[int, str]] = []
    for k, d in enumerate(dirs):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        fanouts += [(k, n) for n in names if len(n) == 2 and n[0] in _HEX and n[1] in _HEX]

    def listing(item: tuple[int, str]) -> tuple[int, str, list[str]]:
        k, n = item
        try:
            return k, n, os.listdir(dirs[k] / n)
        except OSError:
            return k, n, []

    if threads > 1 and len(fanouts) > 1:
        with ThreadPoolExecutor(min(threads, len(fanouts)), "pcheckout-odb") as pool:
            listings = list(pool.map(listing, fanouts))
    else:
        listings = [listing(f) for f in fanouts]
    rest = oid_len - 2
    where: dict[str, int] = {}
    for k, n, names in listings:
        for name in names:
            if len(name) == rest and all(c in _HEX for c in name):
                where.setdefault(n + name, k)  # git's order: the first directory wins
    return LooseObjects(dirs, where)


class LooseObject:
    """One open loose object: ``kind`` and ``size`` from its header, then its contents
    once (:meth:`read_small` or :meth:`stream_to`), which closes it.  Damage (not zlib,
    cut short, a bad header, a size that does not match) raises
    :class:`CorruptObjectError` naming the object and its file."""

    def __init__(self, oid: str, path: bytes, f: io.FileIO) -> None:
        self.oid = oid
        self.path = path
        self._f = f
        self._z = zlib.decompressobj()
        self._body = b""  # inflated bytes after the header, not yet given out
        try:
            self.kind, self.size = self._header()
        except BaseException:
            self.close()
            raise

    def _more(self) -> bytes | None:
        """The next inflated piece (at most :data:`PIECE` bytes, maybe none); None once
        the file has no more input."""
        data = self._z.unconsumed_tail or self._f.read(CHUNK)
        if not data:
            return None
        try:
            return self._z.decompress(data, PIECE)
        except zlib.error as exc:
            raise self._corrupt(f"inflate: {exc}") from None

    def _corrupt(self, why: str) -> CorruptObjectError:
        self.close()
        exc = CorruptObjectError(
            f"loose object {self.oid} (stored in {os.fsdecode(self.path)}) is corrupt: {why}"
        )
        exc.detail = f"{os.fsdecode(self.path)}: {why}"
        return exc

    def _header(self) -> tuple[bytes, int]:
        got = b""
        while b"\0" not in got:
            if len(got) > MAX_HEADER or self._z.eof:
                raise self._corrupt("no valid header")
            piece = self._more()
            if piece is None:
                raise self._corrupt("no valid header")
            got += piece
        header, _, self._body = got.partition(b"\0")
        kind, _, size = header.partition(b" ")
        if kind not in (b"blob", b"tree", b"commit", b"tag") or not size.isdigit():
            raise self._corrupt("no valid header")
        return kind, int(size)

    def _pieces(self) -> Iterator[bytes]:
        """The contents in bounded pieces, checked against the header's size."""
        left = self.size
        body, self._body = self._body, b""
        while True:
            if len(body) > left:
                raise self._corrupt("more bytes than its header says")
            if body:
                left -= len(body)
                yield body
            if self._z.eof:
                break
            more = self._more()
            if more is None:
                raise self._corrupt("cut short")
            body = more
        if left:
            raise self._corrupt(f"cut short ({self.size - left} of {self.size} bytes)")
        self.close()

    def read_small(self, size: int) -> bytes:
        """The whole contents (``size`` as the header said)."""
        return b"".join(self._pieces())

    def stream_to(self, size: int, sink: Callable[[bytes], None]) -> None:
        """Pass the contents to ``sink`` in pieces of at most :data:`PIECE` bytes."""
        for piece in self._pieces():
            sink(piece)

    def skip(self, size: int) -> None:
        self.close()

    def close(self) -> None:
        self._f.close()
