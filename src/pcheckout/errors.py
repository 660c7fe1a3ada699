"""Every failure pcheckout reports to a user is a :class:`PcheckoutError`.

``str(error)`` is the one-line, user-facing sentence; the CLI prints it as
``pcheckout: error: <sentence>`` and exits 1 (2 for usage errors).  Anything
that is *not* a ``PcheckoutError`` is a bug and is shown with a traceback.

    PcheckoutError
    ├── UsageError              bad command line (exit 2)
    ├── GitError                a git command failed / git missing or too old
    │   ├── GitCloneError       git clone failed (it said why; exit with its code)
    │   ├── HookError           a hook run as git runs it (post-checkout) failed
    │   ├── NotARepositoryError
    │   ├── UnknownRevisionError    REV names nothing git checkout takes (git's pathspec error)
    │   │   ├── UnbornHeadError     REV is HEAD, and HEAD's branch has no commit yet
    │   │   └── RevisionRefusedError  git checkout dies on REV (a tree, two remotes' branch)
    │   ├── HeadUpdateError     HEAD could not be moved (its lock held): git's words, 128
    │   ├── CatFileError        a cat-file worker died, lied or was truncated
    │   │   └── MissingObjectError  the object is not in the repository
    │   ├── FilterError         git's filters failed on a path (names the path and filter)
    │   └── GitDiedError        git's own checkout (the git writer) died; git's message, 128
    ├── DestinationError        the working tree is not in a state we may write to
    │   ├── WorktreeNotEmptyError
    │   ├── LocalChangesError   a switch would overwrite local changes
    │   │   └── AssumedChangedError  --force over a changed assume-unchanged file (128)
    │   ├── UntrackedInTheWayError  a switch would overwrite untracked files
    │   └── GitRefusedError     git's own checkout (the git writer) refused; git's message
    ├── IndexFileError          the index could not be read or written
    │   ├── IndexLockError      <index>.lock exists: another process holds the index
    │   ├── CorruptIndexError
    │   └── UnsupportedIndexError
    ├── UnsafeTreeError         the tree would write outside the destination or into .git
    ├── WriteError              the filesystem refused a write (ENOSPC, EROFS, ...)
    ├── DetectError             the filesystem could not be examined
    │   └── MountinfoError      a mount table is unreadable or malformed
    └── Interrupted             SIGINT / SIGTERM (exit 130 / 143)
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
from collections.abc import Iterator


def decode(raw: bytes | str) -> str:
    """Render bytes from git or the filesystem for a human, never failing."""
    if isinstance(raw, str):
        return raw
    return raw.decode("utf-8", "backslashreplace")


def quote_path(path: bytes) -> str:
    """A path for a message: printable, unambiguous (newlines and tabs escaped)."""
    text = decode(path)
    if any(c in text for c in '\n\t\r"') or not text.isprintable():
        return '"' + text.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    return text


#: How many paths a message names before "and N more".
SHOW_PATHS = 5


def quote_paths(paths: list[bytes]) -> str:
    """The first few of ``paths`` (sorted) for a one-line message."""
    shown = ", ".join(quote_path(p) for p in sorted(paths)[:SHOW_PATHS])
    more = len(paths) - SHOW_PATHS
    return shown + (f" and {more} more" if more > 0 else "")


#: git's own sentences when its checkout refuses (unpack-trees.c
#: setup_unpack_trees_porcelain, "checkout" and "switch branches"), said by either writer
LOCAL_CHANGES = (
    "Your local changes to the following files would be overwritten by checkout:",
    "Please commit your changes or stash them before you switch branches.",
)
UNTRACKED = (
    "The following untracked working tree files would be overwritten by checkout:",
    "Please move or remove them before you switch branches.",
)


def refusal(words: tuple[str, str], paths: list[bytes]) -> str:
    """git's refusal on one line: its header, the paths, its advice and "Aborting"."""
    header, advice = words
    return f"{header} {quote_paths(paths)}; {advice} Aborting"


class PcheckoutError(Exception):
    """Base class; ``str()`` is the message a user sees."""

    exit_code = 1


class UsageError(PcheckoutError):
    exit_code = 2


class GitError(PcheckoutError):
    """A git command failed; carries the command line and git's stderr tail."""

    def __init__(self, message: str, *, cmd: list[str] | None = None, stderr: bytes = b"") -> None:
        tail = decode(stderr).strip().splitlines()[-1:] if stderr else []
        said = tail[0].removeprefix("fatal: ") if tail else ""
        if said and said not in message:
            message = f"{message} ({said})"
        super().__init__(message)
        self.cmd = cmd
        self.stderr = stderr


class NotARepositoryError(GitError):
    """No repository there (or no work tree: a bare one), in git's words; exit 128 as git's
    ``die()`` in setup.c."""

    exit_code = 128


class UnknownRevisionError(GitError):
    pass


def no_such_revision(rev: str) -> str:
    """What ``git checkout REV`` says (exit 1) of a REV that is neither a revision nor a
    remote-tracking branch to guess: it read REV as a path (builtin/checkout.c
    checkout_paths(), git 2.39's words)."""
    return f"pathspec '{rev}' did not match any file(s) known to git"


class UnbornHeadError(UnknownRevisionError):
    """REV is HEAD and HEAD names a branch with no commit yet (an empty repository, an
    orphan branch)."""


class RevisionRefusedError(UnknownRevisionError):
    """git checkout dies on this REV (``die()``: exit 128, git's message): a tree or a
    blob, a name several remotes' branches match, a branch checked out elsewhere."""

    exit_code = 128


class HeadUpdateError(GitError):
    """HEAD (or the branch git checkout makes) could not be moved after the work tree and
    the index were written, as git's checkout leaves them: git's words, exit 128."""

    exit_code = 128


class CatFileError(GitError):
    """A cat-file process failed; ``detail`` and ``request`` name what and where."""

    def __init__(self, message: str, *, cmd: list[str] | None = None, stderr: bytes = b"") -> None:
        super().__init__(message, cmd=cmd, stderr=stderr)
        self.detail = message  # the message without the request and git's stderr
        self.request = ""  # the request being answered when it failed


class FilterError(GitError):
    """git's checkout conversion of one path failed (a filter driver, an encoding): git's
    checkout dies of it (``fatal:``), exit status 128."""

    exit_code = 128


class GitDiedError(GitError):
    """git's own checkout, writing for pcheckout, died (``fatal:``, status 128): its
    message, its status."""

    exit_code = 128


class CorruptObjectError(GitError):
    """An object's stored bytes are damaged (a loose object read in-process: git/odb.py);
    ``detail`` says how, and where."""

    exit_code = 128  # git dies on it: "loose object ... is corrupt"

    def __init__(self, message: str, *, cmd: list[str] | None = None, stderr: bytes = b"") -> None:
        super().__init__(message, cmd=cmd, stderr=stderr)
        self.detail = message


class LfsError(GitError):
    """A Git LFS object could not be read or fetched (the message names it)."""


class MissingObjectError(CatFileError):
    """git answered ``missing``: the repository lacks the object (no retry helps)."""


class DestinationError(PcheckoutError):
    pass


class WorktreeNotEmptyError(DestinationError):
    pass


class LocalChangesError(DestinationError):
    """A switch would overwrite local changes to tracked files (git's "Your local
    changes to the following files would be overwritten by checkout")."""


class AssumedChangedError(LocalChangesError):
    """``--force`` would overwrite an assume-unchanged file the user changed: git's
    checkout -f dies of it (exit 128)."""

    exit_code = 128


class UntrackedInTheWayError(DestinationError):
    """A switch would overwrite untracked files or directories."""


class GitRefusedError(DestinationError):
    """git's own checkout, writing for pcheckout, refused to touch the work tree (local
    changes, untracked files in the way); the message is git's, on one line."""


class IndexFileError(PcheckoutError):
    """The index file could not be read or written; ``path`` names it (bytes) and
    ``errno`` is set when the operating system refused (ENOENT: no index yet)."""

    def __init__(self, message: str, path: bytes = b"", errno: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno


class IndexLockError(IndexFileError):
    """``<index>.lock`` exists: another git (or pcheckout) process holds the index.
    Exit status 128, as git's ``die()`` gives for it."""

    exit_code = 128


def unable_to_lock_message(lock: bytes) -> str:
    """git's lockfile.c ``unable_to_lock_message()`` for EEXIST (git 2.39), its
    paragraphs joined into the one line pcheckout's errors are."""
    return (
        f"Unable to create '{decode(lock)}': File exists. "
        "Another git process seems to be running in this repository, e.g. "
        "an editor opened by 'git commit'. Please make sure all processes "
        "are terminated then try again. If it still fails, a git process "
        "may have crashed in this repository earlier: "
        "remove the file manually to continue."
    )


class CorruptIndexError(IndexFileError):
    """The file is not a well-formed index (signature, length, checksum, order)."""


class UnsupportedIndexError(IndexFileError):
    """A well-formed index pcheckout cannot handle (sparse, split, unknown version)."""


class UnsafeTreeError(PcheckoutError):
    pass


class WriteError(PcheckoutError):
    """A filesystem call failed for a path of the checkout."""

    def __init__(self, path: bytes, exc: OSError) -> None:
        reason = exc.strerror or os.strerror(exc.errno or 0)
        name = errno.errorcode.get(exc.errno or 0, "")
        suffix = f" ({name})" if name else ""
        attempts = getattr(exc, "attempts", 0)  # fs.retry.GaveUp: retried, then given up
        if attempts:
            suffix += f"; gave up after {attempts} attempts"
        super().__init__(f"cannot write {quote_path(path)}: {reason}{suffix}")
        self.path = path
        self.errno = exc.errno


class DetectError(PcheckoutError):
    pass


class MountinfoError(DetectError):
    """A mount table could not be read or a line of it is malformed."""


class Interrupted(PcheckoutError):
    def __init__(self, signum: int, hint: str = "") -> None:
        name = signal.Signals(signum).name
        super().__init__(f"interrupted by {name}" + (f"; {hint}" if hint else ""))
        self.signum = signum
        self.exit_code = 128 + signum


@contextlib.contextmanager
def finished_by(hint: str) -> Iterator[None]:
    """An interruption inside (SIGINT, or an ``Interrupted``) is re-raised naming
    ``hint``: what finishes the interrupted run."""
    try:
        yield
    except Interrupted as exc:
        raise Interrupted(exc.signum, hint) from None
    except KeyboardInterrupt:
        raise Interrupted(signal.SIGINT, hint) from None


class GitCloneError(GitError):
    """``git clone`` failed and has said why on stderr already: ``str()`` is
    empty (nothing more to print) and the exit code is git's own (128)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class HookError(GitError):
    """A git hook pcheckout ran as git would (post-checkout) failed, after a complete
    checkout: ``result`` is its report (a ``Result``), where there is one; ``status`` the
    hook's exit status (git clone exits with it; git checkout exits 1)."""

    def __init__(self, message: str, *, result: object = None, status: int = 1) -> None:
        super().__init__(message)
        self.result = result
        self.status = status


class SubmoduleError(HookError):
    """A submodule could not be moved (submodule.recurse) after the superproject was
    switched, as git's checkout says it and exits 1; ``result`` is the run's report."""
