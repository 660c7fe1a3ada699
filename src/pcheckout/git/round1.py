"""Round 1 of a checkout: the git processes every run asks first, their command lines in
one place, and their start the moment the command line is read.

A checkout's first questions (git's version, the repository, its config, REV's
resolution, the target's listing where the destination looks like a fresh checkout, and
the switch's changes where it looks like a switch by git's writer) depend on nothing but
the command line.  The CLI starts them (:func:`start`) before it imports the checkout's
modules (~40 ms of imports on the dev VM), so git answers while Python imports; ``session.py`` then
asks the same questions through :class:`~pcheckout.git.runner.Git`, which takes a
process started here for the very same command line (:func:`taken`) instead of starting
one.  What is not taken by the end of round 1 is stopped (:func:`discard`).

Each process writes into an anonymous memory file (``memfd_create``), not a pipe: no
reader is needed while Python imports (a 40k-entry listing is 6 MB, a pipe holds 64 KiB).
Where that is not available nothing is started early.  They are started on a thread:
the interpreter lock is let go while each is forked and exec'd, so the imports go on.
This module imports nothing of pcheckout's and little of Python's: it runs first.
"""

from __future__ import annotations

import os
import resource
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import NamedTuple

__all__ = [
    "CONFIG",
    "DIFF_TREE",
    "DIFF_TREE_ENV",
    "DISCOVER",
    "IN_PROGRESS",
    "LISTING",
    "RESOLVE",
    "Early",
    "discard",
    "is_branch_name",
    "looks",
    "start",
    "taken",
    "target_names",
]

#: Marker left in the git dir while a checkout is writing; a re-run that finds
#: it resumes (verifies what is there, writes the rest) instead of refusing.
IN_PROGRESS = "pcheckout-in-progress"

#: ``git rev-parse``'s answers that locate a repository (``runner.discover``).
DISCOVER = (
    "rev-parse",
    "--git-dir",
    "--git-common-dir",
    "--is-bare-repository",
    "--show-object-format",
    "--git-path",
    "index",
    "--is-inside-work-tree",
    "--show-cdup",
)
#: Every config value (``config.read_config``).
CONFIG = ("config", "-z", "--list")
#: Object names resolved in one batch (``objects.batch_check``).
RESOLVE = ("cat-file", "--batch-check=%(objectname) %(objecttype)")
#: A tree listed with its subtrees' records (``tree.list_rooted``), before the tree-ish.
LISTING = ("ls-tree", "-r", "-t", "-z", "--full-tree")
#: What changes between two trees (``tree.tree_changes``), before the two tree-ishes; the
#: changed subtrees' own records too (``-t``), whose names a switch's check reads; every
#: gitlink that moves, whatever ``submodule.<name>.ignore`` says (in .gitmodules or the
#: config, diff-tree leaves out a submodule so marked; git's checkout moves it).
DIFF_TREE = (
    "diff-tree",
    "-r",
    "-t",
    "-z",
    "--no-renames",
    "--no-commit-id",
    "--ignore-submodules=none",
)
#: ... run with an index file that is not there: git 2.39's diff-tree reads the index,
#: which a diff of two trees never looks at (9 of its 37 ms at 40k entries, trace2); a
#: missing one reads as empty (read-cache.c do_read_index: ENOENT), and nothing can be
#: made under /proc/self/fdinfo.
DIFF_TREE_ENV = {"GIT_INDEX_FILE": "/proc/self/fdinfo/pcheckout-no-index"}

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
    return all(
        part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/")
    )


def batchable(rev: str) -> bool:
    """Whether ``rev`` can be named on a line of a batch, or after a command's options."""
    return bool(rev) and not rev.startswith("-") and "\n" not in rev


def target_names(rev: str) -> list[str]:
    """The names ``refs.resolve_target`` resolves in one batch for ``rev`` (batchable):
    HEAD's tree and commit, ``rev`` peeled to a commit and a tree and as it is (a tree or
    a blob, refused as git refuses them), and as a local branch."""
    names = ["HEAD^{tree}", "HEAD^{commit}"]
    if rev != "HEAD":  # each lookup of HEAD is several round trips on a network mount
        names += [f"{rev}^{{commit}}", f"{rev}^{{tree}}", rev]
    if is_branch_name(rev):
        names += [f"refs/heads/{rev}^{{commit}}", f"refs/heads/{rev}^{{tree}}"]
    return names


def batch_input(names: Sequence[str]) -> bytes:
    """``cat-file --batch-check``'s standard input for ``names`` (none holds a newline)."""
    return "".join(n + "\n" for n in names).encode("utf-8", "surrogateescape")


class Early(NamedTuple):
    """What a destination looks like before the run opens it: where round 1 lists the
    target (and a switch's changes) beside the rest."""

    fresh: bool  # ``.git`` alone, or beside an interrupted run's journal: list the target
    switch: bool  # files and an index, no journal, not forced: a switch git's checkout makes


def looks(directory: str, rev: str, *, dry_run: bool, force: bool, writer: str | None) -> Early:
    """What ``directory`` looks like for a checkout of ``rev`` (names only: whether the
    filesystem is local, which a switch by git's writer also needs, is ``session.py``'s)."""
    if dry_run or not batchable(rev):
        return Early(False, False)
    git_dir = os.path.join(directory, ".git")
    try:
        names = os.listdir(directory)
    except OSError:
        return Early(False, False)
    if ".git" not in names:
        return Early(False, False)
    journal = len(names) > 1 and os.path.exists(os.path.join(git_dir, IN_PROGRESS))
    if len(names) == 1 or journal:
        return Early(True, False)
    switch = not force and writer != "pcheckout" and os.path.exists(os.path.join(git_dir, "index"))
    return Early(False, switch)


class _Started(NamedTuple):
    proc: subprocess.Popen[bytes]
    out: int  # the memory files its standard output and error go to
    err: int


#: (argv, standard input, the variables set for it alone) -> its process
_Key = tuple[tuple[str, ...], bytes | None, tuple[tuple[str, str], ...]]
_started: dict[_Key, _Started] = {}
#: Below this many open files allowed, nothing is started early: round 1's memory files
#: would be held while the imports open theirs (two per process, and Popen's pipes).
MIN_OPEN_FILES = 256

#: The thread starting them (the interpreter lock is let go while each process is forked
#: and exec'd: the imports go on meanwhile, ~1 ms per process on the dev VM)
_spawner: threading.Thread | None = None


def start(
    git: str, directory: str, rev: str, *, dry_run: bool, force: bool, writer: str | None
) -> None:
    """Start round 1's processes for ``checkout REV`` in ``directory`` (as ``git -C
    DIRECTORY``: ``runner.Git.argv``), each for :func:`taken` to collect, on a thread."""
    global _spawner
    if not hasattr(os, "memfd_create") or rev == "-" or rev.startswith("@{-"):
        return  # (``-`` is resolved by a process of its own before round 1)
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < MIN_OPEN_FILES:
        return
    base = [git, "-C", directory, "--no-pager"]
    wanted: list[_Wanted] = [
        _Wanted([git, "version"]),
        _Wanted([*base, *DISCOVER]),
        _Wanted([*base, *CONFIG]),
    ]
    if batchable(rev):
        wanted.append(_Wanted([*base, *RESOLVE], batch_input(target_names(rev))))
        early = looks(directory, rev, dry_run=dry_run, force=force, writer=writer)
        if early.fresh:
            wanted.append(_Wanted([*base, *LISTING, rev]))
        if early.switch:
            wanted.append(_Wanted([*base, *DIFF_TREE, "HEAD", rev], None, DIFF_TREE_ENV))
    _spawner = threading.Thread(target=_spawn_all, args=(wanted,), name="pcheckout-round1")
    _spawner.daemon = True
    _spawner.start()


class _Wanted(NamedTuple):
    argv: list[str]
    data: bytes | None = None  # its standard input
    env: Mapping[str, str] | None = None  # variables set for it alone


def _key(argv: Sequence[str], data: bytes | None, env: Mapping[str, str] | None) -> _Key:
    return tuple(argv), data, tuple(sorted((env or {}).items()))


def _spawn_all(wanted: list[_Wanted]) -> None:
    for one in wanted:
        if not _spawn(one):
            # Out of file descriptors (or no git): nothing early, every one given back
            # before this thread ends (its end may need one); the run says why.
            _stop()
            return


def _wait() -> None:
    """Until every process :func:`start` asked for is started."""
    global _spawner
    if _spawner is not None:
        _spawner.join()
        _spawner = None


def _spawn(one: _Wanted) -> bool:
    argv, data = one.argv, one.data
    env = None if one.env is None else {**os.environ, **one.env}
    fds: list[int] = []
    try:
        fds += [os.memfd_create("pcheckout-out"), os.memfd_create("pcheckout-err")]
        stdin = subprocess.PIPE if data is not None else subprocess.DEVNULL
        proc = subprocess.Popen(argv, stdin=stdin, stdout=fds[0], stderr=fds[1], env=env)
    except OSError:
        for fd in fds:
            os.close(fd)
        return False
    if proc.stdin is not None:
        try:
            proc.stdin.write(data or b"")  # a few names: less than a pipe holds
            proc.stdin.close()
        except OSError:
            pass  # git failed first: its status says why
        proc.stdin = None
    _started[_key(argv, data, one.env)] = _Started(proc, fds[0], fds[1])
    return True


def started(argv: Sequence[str], env: Mapping[str, str] | None = None) -> bool:
    """Whether a process was started for ``argv`` (without input, with ``env`` set for it)
    and not yet taken."""
    _wait()
    return _key(argv, None, env) in _started


def taken(
    argv: Sequence[str], data: bytes | None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes] | None:
    """The finished run of the process started for ``argv`` given ``data`` on its standard
    input and ``env`` set for it (None: none was started)."""
    _wait()
    got = _started.pop(_key(argv, data, env), None)
    if got is None:
        return None
    code = got.proc.wait()
    out, err = _read(got.out), _read(got.err)
    return subprocess.CompletedProcess(list(argv), code, out, err)


def _read(fd: int) -> bytes:
    """All of a memory file, which is then closed."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 24):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def discard() -> None:
    """Stop and forget the processes nobody took (the run asked otherwise)."""
    _wait()
    _stop()


def _stop() -> None:
    while _started:
        _, got = _started.popitem()
        if got.proc.poll() is None:
            got.proc.kill()
        got.proc.wait()
        os.close(got.out)
        os.close(got.err)
