"""Running git: one place that builds command lines, logs them and maps failures.

Everything pcheckout learns about a repository comes from git plumbing run
through ``Git``; nothing parses ``.git`` by hand except the index (``git/index.py``)
and HEAD under the files backend (``git/refs.py``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from pcheckout.errors import GitError, NotARepositoryError, decode
from pcheckout.git import round1

#: Oldest git we support.  2.25 is the first with ``rev-parse --show-object-format``
#: (sha1/sha256 aware) and is what Ubuntu 20.04 ships; ``cat-file --batch --filters``
#: (2.11) and ``ls-tree -z -l`` are far older.
MIN_GIT = (2, 25)
#: ``cat-file -z`` (NUL-terminated requests, so paths may contain newlines) came in 2.38.
GIT_CATFILE_Z = (2, 38)
#: ``git check-attr --source=<tree-ish>`` came in 2.40 (RelNotes/2.40.0.txt: "git check-attr"
#: learned to take an optional tree-ish to read the .gitattributes file from).
GIT_CHECK_ATTR_SOURCE = (2, 40)
#: ``git --attr-source=<tree>`` for any command (attributes read from that tree, not the work
#: tree) came in 2.41 (RelNotes/2.41.0.txt: "git --attr-source=<tree> cmd $args" is a new way
#: to have any command to read attributes not from the working tree).
GIT_ATTR_SOURCE = (2, 41)

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
    early = round1.taken([exe, "version"], None)  # (started beside the command line's parse)
    if early is not None and early.returncode == 0:
        out = early.stdout
    else:  # (round 1 started nothing: few files may be left to open, not even a module's)
        try:
            out = subprocess.run([exe, "version"], capture_output=True, check=True).stdout
        except FileNotFoundError:
            raise GitError("git is not installed or not on PATH") from None
        except (OSError, subprocess.CalledProcessError) as exc:
            raise GitError(f"cannot run git: {exc}") from None
    version = parse_version(decode(out))
    if version[:2] < MIN_GIT:
        have = ".".join(map(str, version))
        need = ".".join(map(str, MIN_GIT))
        raise GitError(f"git {have} is too old; pcheckout needs git {need} or newer")
    return version


class Git:
    """A git command runner bound to a directory (like ``git -C DIR``)."""

    # (a plain class, not a dataclass: every run builds one, and ``dataclasses`` with what it
    # imports costs ~13 ms of a start in a plain venv; docs/benchmarks.md)
    __slots__ = ("cwd", "debug", "env", "exe", "version", "hooks")

    def __init__(
        self,
        cwd: Path,
        debug: Debug | None = None,
        env: Mapping[str, str] | None = None,
        exe: str = "git",
        version: tuple[int, int, int] = (0, 0, 0),
        #: commands run where git's checkout runs them, whose hooks must see what git gives
        #: them (:meth:`hooked`): without ``--no-pager`` (git passes it on as GIT_PAGER=cat)
        hooks: bool = False,
    ) -> None:
        self.cwd = cwd
        self.debug = debug
        self.env = env
        self.exe = exe
        self.version = git_version(exe) if version == (0, 0, 0) else version
        self.hooks = hooks

    def __repr__(self) -> str:
        return f"Git({self.cwd!r}, exe={self.exe!r}, version={self.version!r}, hooks={self.hooks})"

    def replace(self, *, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Git:
        """This runner in ``cwd`` and with ``env``, where given."""
        return Git(
            self.cwd if cwd is None else cwd,
            self.debug,
            self.env if env is None else env,
            self.exe,
            self.version,
            self.hooks,
        )

    def argv(self, args: Sequence[str]) -> list[str]:
        # --no-pager: no output of ours goes to a terminal's pager, and without it every
        # command that sets up a repository reads all its config files once more
        # (git.c run_builtin: check_pager_config -> read_early_config) to look for
        # pager.<cmd>: on a 1 ms mount ~5 round trips, ~11 with a config.worktree.
        # (Not for a command whose hooks must see what git's checkout gives them.)
        pager = [] if self.hooks else ["--no-pager"]
        return [self.exe, "-C", str(self.cwd), *pager, *args]

    def hooked(self) -> Git:
        """This runner for commands run where git's checkout runs them: their hooks see
        what git's own would (no ``--no-pager``)."""
        return Git(self.cwd, self.debug, self.env, self.exe, self.version, hooks=True)

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
        extra_env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """``git ARGS`` run to its end (``extra_env``: variables set for it alone)."""
        cmd = self.argv(args)
        proc = None if self.hooks else self.prestarted(args, input, extra_env)
        if proc is not None:
            if proc.returncode not in ok_codes:
                raise error(what or f"'{_fmt(args)}' failed", cmd=cmd, stderr=proc.stderr)
            return proc
        self.log(cmd)
        try:
            proc = subprocess.run(
                cmd,
                input=input,
                capture_output=True,
                env=self._env(extra_env),
                check=False,
            )
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}", cmd=cmd) from None
        if proc.returncode not in ok_codes:
            raise error(what or f"'{_fmt(args)}' failed", cmd=cmd, stderr=proc.stderr)
        return proc

    def out(
        self,
        *args: str,
        input: bytes | None = None,
        ok_codes: tuple[int, ...] = (0,),
        error: type[GitError] = GitError,
        what: str | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> bytes:
        """``run``'s standard output."""
        return self.run(
            *args, input=input, ok_codes=ok_codes, error=error, what=what, extra_env=extra_env
        ).stdout

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str] | None:
        """A process's environment: the runner's (None: this process's), and ``extra``."""
        if extra is None:
            return None if self.env is None else dict(self.env)
        return {**(os.environ if self.env is None else self.env), **extra}

    def prestarted(
        self,
        args: Sequence[str],
        input: bytes | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes] | None:
        """The finished run of ``git ARGS`` (given ``input``, with ``extra_env``) if round 1
        started it before the checkout's modules were imported (``git/round1.py``), logged
        as if run now; None: it was not (only a runner in the process's own environment
        takes one)."""
        if self.env is not None:
            return None
        cmd = self.argv(args)
        proc = round1.taken(cmd, input, extra_env)
        if proc is not None:
            self.log(cmd)
        return proc

    def popen(self, args: Sequence[str], **kw: object) -> subprocess.Popen[bytes]:
        cmd = self.argv(args)
        self.log(cmd)
        env = kw.pop("env", None if self.env is None else dict(self.env))
        # Popen's keywords pass through as given; its overloads cannot be matched from **kw.
        return subprocess.Popen(cmd, env=env, **kw)  # type: ignore[call-overload,no-any-return]

    def has(self, version: tuple[int, int]) -> bool:
        return self.version[:2] >= version


class Repo(NamedTuple):
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
    if not git.cwd.is_dir():  # git -C's own words (git.c handle_options)
        why = "Not a directory" if git.cwd.exists() else "No such file or directory"
        raise NotARepositoryError(f"cannot change to '{git.cwd}': {why}")
    # One git call answers everything (each git process costs ~1.5 ms here).
    proc = git.run(*round1.DISCOVER, ok_codes=(0, 128))
    if proc.returncode != 0:  # git's own words: "not a git repository (or any of ...)"
        said = [line.strip() for line in decode(proc.stderr).splitlines() if line.strip()]
        text = " ".join(said).removeprefix("fatal: ") or f"not a git repository: {git.cwd}"
        raise NotARepositoryError(text, stderr=proc.stderr)
    lines = os.fsdecode(proc.stdout).split("\n")
    git_dir = (git.cwd / lines[0]).resolve()
    common = (git.cwd / lines[1]).resolve()
    bare = lines[2] == "true"
    fmt = lines[3] or "sha1"
    index_path = (git.cwd / lines[4]).resolve()
    # Outside its work tree (core.worktree, GIT_WORK_TREE) git prints the top as an absolute
    # path; inside the git dir of a repository with none it prints nothing.
    cdup = lines[6] if len(lines) > 6 else ""
    work_tree: Path | None = None
    if not bare and (lines[5] == "true" or os.path.isabs(cdup)):
        work_tree = (git.cwd / cdup).resolve()
    return Repo(git_dir, common, work_tree, index_path, fmt)
