"""What ``git archive`` leaves out and substitutes: ``export-ignore`` and ``export-subst``.

``archive.c`` checks both attributes per entry, with the attributes of the archived tree
(or, with ``--worktree-attributes``, of the working tree):

* a directory is checked as ``"dir/"`` and, when ``export-ignore`` is set, its whole subtree
  is dropped unread; a file, symlink or gitlink is checked by its own path.  A directory is
  written once a non-directory entry below it is *visited*, before that entry's own check
  (``queue_or_write_archive_entry`` calls ``write_directory`` first): a directory whose
  files are all export-ignored still appears, empty (git 2.39.5: ``git archive | tar -t``
  lists it), one holding only ignored directories does not.
* a regular file with ``export-subst`` set gets every ``$Format:FMT$`` replaced by
  ``format_commit_message(commit, FMT)`` after the checkout conversion (``format_subst``),
  only when REV names a commit (a tree has no placeholders to fill).  Only the first
  ``%(describe)`` of the whole archive expands (``describe_status.max_invocations = 1``).

The tar it writes gives every member the commit's date as its mtime (the current time
where REV names a tree: ``parse_treeish_arg``) and the mode 0666 or 0777 (directories,
gitlinks and executables) less ``tar.umask`` (archive-tar.c ``write_tar_entry``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pcheckout.errors import GitError
from pcheckout.git.config import parse_int
from pcheckout.git.runner import Git
from pcheckout.git.tree import MODE_EXEC, MODE_FILE, Entry

FORMAT = b"$Format:"

#: archive-tar.c ``tar_umask``: what git archive takes away from 0666 and 0777.
TAR_UMASK = 0o002


class ArchiveError(GitError):
    """What git archive dies with (its ``fatal:`` line): exit 128, as git's die()."""

    exit_code = 128


def tar_umask(config: Mapping[str, str], user_umask: int) -> int:
    """``tar.umask`` as archive-tar.c ``git_tar_config`` reads it: an int (git's
    numbers: base 0, k/m/g), or ``user`` for the umask git archive runs under."""
    value = config.get("tar.umask")
    if value is None:
        return TAR_UMASK
    if value == "user":
        return user_umask
    try:
        return parse_int("tar.umask", value)
    except GitError as exc:
        raise ArchiveError(str(exc)) from None


def commit_time(git: Git, commit: str) -> int:
    """The commit's date as git's ``parse_commit_date`` reads it (commit.c): the
    committer line's timestamp, 0 where there is none."""
    raw = git.out("cat-file", "commit", commit, what="cannot read the commit")
    for line in raw.split(b"\n"):
        if not line:
            break
        if line.startswith(b"committer "):
            stamp = line[line.rfind(b">") + 1 :].split()[:1]
            return int(stamp[0]) if stamp and stamp[0].isdigit() else 0
    return 0


def directories(entries: Sequence[Entry]) -> list[bytes]:
    """Every directory holding an entry, each once, parents first (as ``"dir"``)."""
    seen: set[bytes] = set()
    out: list[bytes] = []
    for e in entries:
        parts = e.path.split(b"/")[:-1]
        for k in range(1, len(parts) + 1):
            d = b"/".join(parts[:k])
            if d not in seen:
                seen.add(d)
                out.append(d)
    return out


def ignored_dirs(dirs: Sequence[bytes], ignore: Sequence[bool]) -> set[bytes]:
    """The directories whose ``"dir/"`` has export-ignore set."""
    return {d for d, flag in zip(dirs, ignore, strict=True) if flag}


def kept(entries: Sequence[Entry], ignore: Sequence[bool], dropped_dirs: set[bytes]) -> list[int]:
    """Indexes of the entries an archive holds: not export-ignored themselves and under no
    export-ignored directory (archive.c never even looks inside one)."""
    out: list[int] = []
    for i, e in enumerate(entries):
        if ignore[i]:
            continue
        if dropped_dirs:
            parts = e.path.split(b"/")[:-1]
            if any(b"/".join(parts[:k]) in dropped_dirs for k in range(1, len(parts) + 1)):
                continue
        out.append(i)
    return out


def empty_dirs(
    entries: Sequence[Entry], kept_idx: Sequence[int], dropped_dirs: set[bytes]
) -> list[bytes]:
    """Directories an archive holds that no kept entry needs (their files are all
    export-ignored), parents first."""

    def ancestors(path: bytes) -> list[bytes]:
        parts = path.split(b"/")[:-1]
        return [b"/".join(parts[:k]) for k in range(1, len(parts) + 1)]

    needed = {d for i in kept_idx for d in ancestors(entries[i].path)}
    out: list[bytes] = []
    seen: set[bytes] = set()
    for e in entries:
        dirs = ancestors(e.path)
        if any(d in dropped_dirs for d in dirs):
            continue
        for d in dirs:
            if d not in needed and d not in seen:
                seen.add(d)
                out.append(d)
    return out


def substitutable(e: Entry) -> bool:
    """archive.c converts and substitutes regular files only."""
    return e.mode in (MODE_FILE, MODE_EXEC)


def formats(data: bytes) -> list[tuple[int, int, bytes]]:
    """Each ``$Format:FMT$`` of ``data`` as (start, end, FMT), as format_subst() finds
    them: up to the next ``$``, no nesting or escapes; an unterminated one ends the scan."""
    out: list[tuple[int, int, bytes]] = []
    pos = 0
    while True:
        b = data.find(FORMAT, pos)
        if b < 0:
            break
        c = data.find(b"$", b + len(FORMAT))
        if c < 0:
            break
        out.append((b, c + 1, data[b + len(FORMAT) : c]))
        pos = c + 1
    return out


_PLACEHOLDER = re.compile(rb"%(%|\(describe|S)")


class Substituter:
    """``format_subst()`` for one archive: each distinct format is expanded once with
    ``git log -1`` in archive's context (``--date=default``: DATE_NORMAL, no colour, no
    notes, no signatures), and the once-per-archive ``%(describe)`` rule is kept across
    calls, which must come in archive order (tree order)."""

    def __init__(self, git: Git, commit: str) -> None:
        self.git = git
        self.commit = commit
        self.describe_used = False
        self._cache: dict[bytes, bytes] = {}

    def _prepare(self, fmt: bytes) -> bytes:
        """``fmt`` as git log must see it for archive's output: later ``%(describe``
        and ``%S`` (archive has no revision sources) stay literal."""
        fmt = fmt.split(b"\0", 1)[0]  # format_commit_message() sees a C string

        def one(m: re.Match[bytes]) -> bytes:
            what = m.group(1)
            if what == b"%":
                return b"%%"
            if what == b"S":
                return b"%%S"
            if not self.describe_used:
                self.describe_used = True
                return m.group(0)
            return b"%%(describe"

        return _PLACEHOLDER.sub(one, fmt)

    def expand(self, fmt: bytes) -> bytes:
        key = self._prepare(fmt)
        if key not in self._cache:
            self._cache[key] = self.git.out(
                "log",
                "-1",
                "--no-color",
                "--no-notes",
                "--no-show-signature",
                "--date=default",
                "--pretty=format:" + key.decode("utf-8", "surrogateescape"),
                self.commit,
                "--",
                what="cannot expand export-subst placeholders",
            )
        return self._cache[key]

    def __call__(self, data: bytes) -> bytes:
        found = formats(data)
        if not found:
            return data
        out: list[bytes] = []
        pos = 0
        for start, end, fmt in found:
            out.append(data[pos:start])
            out.append(self.expand(fmt))
            pos = end
        out.append(data[pos:])
        return b"".join(out)
