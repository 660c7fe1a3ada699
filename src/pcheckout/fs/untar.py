"""What ``tar -x`` (GNU tar) does to what it extracts besides writing the bytes: the
modes it leaves and the times it sets.

* Modes: an archive's member carries its mode; tar run by root restores it exactly
  (``--same-permissions`` is the superuser's default), anyone else gets it less their
  umask (``--no-same-permissions``).  Files and directories created with 0666, 0777
  under :func:`extract_umask` end with those modes, whoever writes them; a directory
  that was already there is given its member's mode (:func:`set_modes`).
* Times: every member's mtime is set, symlinks' included (``lutimes``), directories'
  once everything in them is written; the access time is set to now.  The directory
  tar extracts into is not a member: it is left alone.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence, Set
from typing import NamedTuple

from pcheckout.errors import DestinationError, WriteError
from pcheckout.fs.files import full_path
from pcheckout.fs.parallel import in_shares
from pcheckout.fs.retry import retrying

__all__ = [
    "Overlap",
    "extract_umask",
    "overlap",
    "process_umask",
    "set_modes",
    "set_times",
    "umask",
]


def process_umask() -> int:
    """This process's umask, read without changing it where Linux says it
    (``/proc/self/status``, 4.7+): setting it to read it races other threads."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def extract_umask(archive_umask: int) -> int:
    """The umask under which files made 0666/0777 get the modes ``tar -x`` leaves for
    members archived with ``archive_umask``: root's tar keeps the archived modes, another
    user's takes away its umask too."""
    if os.geteuid() == 0:
        return archive_umask & 0o777
    return (archive_umask | process_umask()) & 0o777


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    """This process (and what it starts) creates files under ``mask`` meanwhile."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def set_times(
    root: bytes, paths: Sequence[bytes], mtime_s: int, workers: int, min_share: int = 1
) -> None:
    """Set each path's mtime (symlinks' own) to ``mtime_s``, its access time to now, as
    tar -x sets a member's; over ``workers`` threads where each call is a round trip."""
    now = time.time_ns()
    times = (now, mtime_s * 1_000_000_000)

    def one(rel: bytes) -> None:
        path = full_path(root, rel)
        try:
            retrying(lambda _n: os.utime(path, ns=times, follow_symlinks=False))
        except OSError as exc:
            raise WriteError(rel, exc) from None

    in_shares(one, list(paths), max(1, workers), max(1, min_share))


def set_modes(root: bytes, paths: Sequence[bytes], mode: int) -> None:
    """Give each path (a directory that was already there) ``mode``, as tar -x gives
    an existing directory its member's."""
    for rel in paths:
        try:
            os.chmod(full_path(root, rel), mode)
        except OSError as exc:
            raise WriteError(rel, exc) from None


class Overlap(NamedTuple):
    """Where an archive meets what a directory already holds."""

    in_the_way: list[bytes]  # what tar -x would replace: a member's path taken by anything
    #: but a directory where the member is one (a symlink to one too: tar replaces it)
    directories: list[bytes]  # directories already there that are members (tar keeps them)


def overlap(root: bytes, files: Set[bytes], dirs: Set[bytes]) -> Overlap:
    """Which of the members ``files`` (files, symlinks) and ``dirs`` (directories) the
    directory ``root`` already holds; only the directories that are members are read."""
    found = Overlap([], [])
    todo = [b""]
    while todo:
        here = todo.pop()
        try:
            with os.scandir(full_path(root, here) if here else root) as it:
                names = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        except OSError as exc:
            raise DestinationError(f"cannot read {os.fsdecode(root)}: {exc.strerror}") from None
        for name, is_dir in names:
            rel = here + b"/" + name if here else name
            if rel in files or (rel in dirs and not is_dir):
                found.in_the_way.append(rel)
            elif rel in dirs:
                found.directories.append(rel)
                todo.append(rel)
    found.in_the_way.sort()
    return found
