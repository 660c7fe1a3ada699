"""Running git: one place that builds command lines, logs them and maps failures.

Everything pcheckout learns about a repository comes from git plumbing run
here; nothing parses ``.git`` by hand except the index (see ``index.py``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import GitError, NotARepositoryError, UnknownRevisionError, decode

#: Oldest git we support.  2.25 is the first with ``rev-parse --show-object-format``
#: (sha1/sha256 aware) and is what Ubuntu 20.04 ships; ``cat-file --batch --filters``
#: (2.11) and ``ls-tree -z -l`` are far older.
MIN_GIT = (2, 25)
#: ``cat-file -z`` (NUL-terminated requests, so paths may contain newlines) came in 2.38.
GIT_CATFILE_Z = (2, 38)
#: ``git --attr-source=<tree>`` (attributes read from the tree being checked out) came in 2.40.
GIT_ATTR_SOURCE = (2, 40)

Debug = Callable[[str], None]


def _fmt(cmd: Sequence[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)


def parse_version(text: str) -> tuple[int, int, int]:
    """``git version 2.39.5`` (or ``2.45.windows.1``) -> (2, 39, 5)."""
    words = text.split()
    numbers = words[2] if len(words) >= 3 else ""
    parts: list[int] = []
    for piece in numbers.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    while len(parts) < 3:
        parts.append(0)
    return (parts[0], parts[1], parts[2])


def git_version(exe: str = "git") -> tuple[int, int, int]:
    if shutil.which(exe) is None:
        raise GitError("git is not installed or not on PATH")
    try:
        out = subprocess.run([exe, "version"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise GitError(f"cannot run git: {exc}") from None
    version = parse_version(decode(out))
    if version[:2] < MIN_GIT:
        have = ".".join(map(str, version))
        need = ".".join(map(str, MIN_GIT))
        raise GitError(f"git {have} is too old; pcheckout needs git {need} or newer")
    return version


@dataclass
class Git:
    """A git command runner bound to a directory (like ``git -C DIR``)."""

    cwd: Path
    debug: Debug | None = None
    env: Mapping[str, str] | None = None
    exe: str = "git"
    version: tuple[int, int, int] = field(default=(0, 0, 0))

    def __post_init__(self) -> None:
        if self.version == (0, 0, 0):
            self.version = git_version(self.exe)

    def argv(self, args: Sequence[str]) -> list[str]:
        return [self.exe, "-C", str(self.cwd), *args]

    def log(self, cmd: Sequence[str]) -> None:
        if self.debug is not None:
            self.debug(f"running: {_fmt(cmd)}")

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        ok_codes: tuple[int, ...] = (0,),
        error: type[GitError] = GitError,
        what: str | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        cmd = self.argv(args)
        self.log(cmd)
        try:
            proc = subprocess.run(
                cmd,
                input=input,
                capture_output=True,
                env=None if self.env is None else dict(self.env),
                check=False,
            )
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}", cmd=cmd) from None
        if proc.returncode not in ok_codes:
            raise error(what or f"'{_fmt(args)}' failed", cmd=cmd, stderr=proc.stderr)
        return proc

    def out(self, *args: str, **kw: object) -> bytes:
        return self.run(*args, **kw).stdout  # type: ignore[arg-type]

    def popen(self, args: Sequence[str], **kw: object) -> subprocess.Popen[bytes]:
        cmd = self.argv(args)
        self.log(cmd)
        env = kw.pop("env", None if self.env is None else dict(self.env))
        return subprocess.Popen(cmd, env=env, **kw)  # type: ignore[call-overload,no-any-return]

    def has(self, version: tuple[int, int]) -> bool:
        return self.version[:2] >= version


@dataclass(frozen=True)
class Repo:
    """Where things are, as git itself reports them."""

    git_dir: Path
    common_dir: Path
    work_tree: Path | None  # None for a bare repository
    index_path: Path
    object_format: str  # "sha1" | "sha256"

    @property
    def oid_hex_len(self) -> int:
        return 64 if self.object_format == "sha256" else 40


def discover(git: Git) -> Repo:
    """Locate the repository that ``git -C cwd`` would use."""
    if not git.cwd.is_dir():
        raise NotARepositoryError(f"cannot change to '{git.cwd}': no such directory")
    # One git call answers everything (each git process costs ~1.5 ms here).
    proc = git.run(
        "rev-parse",
        "--git-dir",
        "--git-common-dir",
        "--is-bare-repository",
        "--show-object-format",
        "--git-path",
        "index",
        "--is-inside-work-tree",
        "--show-cdup",
        ok_codes=(0, 128),
    )
    if proc.returncode != 0:
        raise NotARepositoryError(f"not a git repository: {git.cwd}", stderr=proc.stderr)
    lines = os.fsdecode(proc.stdout).split("\n")
    git_dir = (git.cwd / lines[0]).resolve()
    common = (git.cwd / lines[1]).resolve()
    bare = lines[2] == "true"
    fmt = lines[3] or "sha1"
    index_path = (git.cwd / lines[4]).resolve()
    work_tree: Path | None = None
    if not bare and lines[5] == "true":
        work_tree = (git.cwd / lines[6]).resolve() if len(lines) > 6 else git.cwd.resolve()
    return Repo(git_dir, common, work_tree, index_path, fmt)


def read_config(git: Git) -> dict[str, str]:
    """All config as ``{lower-cased key: last value}`` (``git config -z --list``)."""
    proc = git.run("config", "-z", "--list", ok_codes=(0, 1))
    config: dict[str, str] = {}
    for item in proc.stdout.split(b"\0"):
        if not item:
            continue
        key, sep, value = item.partition(b"\n")
        if not sep:
            value = b"true"  # a valueless key ("[core] bare") is boolean true in git
        name = decode(key)
        # section and variable names are case-insensitive; subsections are not
        first, _, rest = name.partition(".")
        sub, _, var = rest.rpartition(".")
        norm = f"{first.lower()}.{sub}.{var.lower()}" if sub else f"{first.lower()}.{var.lower()}"
        config[norm] = decode(value)
    return config


# Largest value git_parse_int() accepts (C int on every platform git supports).
_GIT_INT_MAX = 2**31 - 1
# git's get_unit_factor(): suffixes accepted after an integer config value.
_GIT_UNIT_FACTORS = {b"": 1, b"k": 1024, b"m": 1024**2, b"g": 1024**3}
_GIT_INT_RE = re.compile(rb"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)([kKmMgG]?)")


def parse_bool(key: str, value: str) -> bool:
    """git_config_bool(): text booleans (the empty string is false), else an int
    (base 0, k/m/g suffix); anything else is the error git itself dies with.
    A key written without ``=`` is true: ``read_config`` stores it as "true"."""
    lowered = value.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off", ""):
        return False
    match = _GIT_INT_RE.fullmatch(value.encode("utf-8", "surrogateescape"))
    if match is not None:
        _sign, digits, unit = match.groups()
        if digits[:2] in (b"0x", b"0X"):
            number = int(digits[2:], 16)
        else:
            number = int(digits, 8 if digits.startswith(b"0") else 10)
        if number * _GIT_UNIT_FACTORS[unit.lower()] <= _GIT_INT_MAX:
            return number != 0
    raise GitError(f"bad boolean config value '{value}' for '{key}'")


def config_bool(value: str | None, default: bool) -> bool:
    """``parse_bool`` for settings where an unusable value means the default."""
    if value is None:
        return default
    try:
        return parse_bool("", value)
    except GitError:
        return default


def resolve(git: Git, rev: str, peel: str) -> str:
    """``rev^{peel}`` as a hex oid, or UnknownRevisionError."""
    if not rev or rev.startswith("-"):
        raise UnknownRevisionError(f"invalid revision '{rev}'")
    proc = git.run("rev-parse", "--verify", "--quiet", f"{rev}^{{{peel}}}", ok_codes=(0, 1, 128))
    if proc.returncode != 0 or not proc.stdout.strip():
        kind = "commit" if peel == "commit" else "tree-ish"
        raise UnknownRevisionError(f"unknown revision '{rev}' (not a {kind} in this repository)")
    return decode(proc.stdout.strip())


#: Chunk size for hashing a file as a blob: bounded memory for any file size.
HASH_CHUNK = 1024 * 1024


def blob_oid(data: bytes, hash_name: str) -> str:
    """The object id git gives ``data`` as a blob (``git hash-object --no-filters``)."""
    h = hashlib.new(hash_name, b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def file_blob_oid(path: bytes, size: int, hash_name: str) -> str:
    """``blob_oid`` of the ``size``-byte file at ``path``, read in bounded pieces."""
    h = hashlib.new(hash_name, b"blob %d\0" % size)
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


_OBJECT_TYPES = frozenset({"blob", "tree", "commit", "tag"})


def batch_check(git: Git, names: Sequence[str]) -> list[tuple[str, str] | None]:
    """``(oid, type)`` for each object name (any rev syntax: ``v1^{tree}``,
    ``HEAD~2``), None where git finds none: all of them in one ``git cat-file
    --batch-check``.  On a network mount each git process costs tens of round
    trips to the repository before it does anything, so lookups share one."""
    if any("\n" in n for n in names):
        raise ValueError("an object name with a newline cannot be asked in a batch")
    data = "".join(n + "\n" for n in names).encode("utf-8", "surrogateescape")
    out = git.out("cat-file", "--batch-check=%(objectname) %(objecttype)", input=data)
    lines = decode(out).split("\n")[: len(names)]
    if len(lines) != len(names):
        raise GitError(f"git cat-file --batch-check answered {len(lines)} of {len(names)} names")
    found: list[tuple[str, str] | None] = []
    for line in lines:
        oid, _, kind = line.rpartition(" ")
        # Unknown names come back as "<name> missing" (or "ambiguous"); echoed, not parsed.
        ok = kind in _OBJECT_TYPES and len(oid) in (40, 64) and all(
            c in "0123456789abcdef" for c in oid)
        found.append((oid, kind) if ok else None)
    return found


_NOT_IN_BRANCH_NAMES = frozenset(" ~^:?*[\\\x7f") | {chr(c) for c in range(32)}


def is_branch_name(name: str) -> bool:
    """Whether ``refs/heads/<name>`` is a well-formed ref name (git's
    check_refname_format, conservatively), so that naming it cannot be read
    as revision syntax (``v1~2``, ``x^{tree}``, ``@{-1}``)."""
    if not name or name in ("HEAD", "@") or name.startswith("-") or "@{" in name:
        return False
    if ".." in name or "//" in name or name.endswith(("/", ".")):
        return False
    if any(c in _NOT_IN_BRANCH_NAMES for c in name):
        return False
    return all(part and not part.startswith(".") and not part.endswith(".lock")
               for part in name.split("/"))


_HEX_HEAD = re.compile(rb"(?:[0-9a-f]{40}|[0-9a-f]{64})\n?")


def symbolic_head(git: Git, repo: Repo, config: Mapping[str, str]) -> str | None:
    """The ref HEAD points to (``refs/heads/main``), None when detached.

    With the files ref backend HEAD is a file in the git dir (gitrepository-layout:
    ``ref: refs/heads/main`` or an object id), read directly: one git process
    fewer, which on a network mount is tens of round trips.  Anything else (the
    reftable backend, an unexpected content) asks ``git symbolic-ref``."""
    if "extensions.refstorage" not in config:
        try:
            data = (repo.git_dir / "HEAD").read_bytes()
        except OSError:
            data = b""
        if data.startswith(b"ref: refs/") and data.endswith(b"\n") and b"\n" not in data[:-1]:
            return decode(data[5:-1].strip())
        if _HEX_HEAD.fullmatch(data):
            return None
    proc = git.run("symbolic-ref", "--quiet", "HEAD", ok_codes=(0, 1, 128))
    return decode(proc.stdout.strip()) or None


def is_local_branch(git: Git, name: str) -> bool:
    if name == "HEAD" or name.startswith("-"):
        return False
    proc = git.run("show-ref", "--verify", "--quiet", f"refs/heads/{name}", ok_codes=(0, 1, 128))
    return proc.returncode == 0
