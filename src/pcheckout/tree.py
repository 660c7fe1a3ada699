"""Listing a git tree: one ``git ls-tree -r -z`` process, names as bytes."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import GitError
from .git import Git

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_SYMLINK = 0o120000
MODE_GITLINK = 0o160000


@dataclass(frozen=True, slots=True)
class Entry:
    """One path of the tree to be written."""

    path: bytes
    mode: int
    oid: str  # hex
    size: int  # -1 when not known (gitlinks, or listing without sizes)


def list_tree(git: Git, tree: str, *, sizes: bool = True) -> list[Entry]:
    """Every non-tree entry of ``tree``, recursively, in git's order.

    ``sizes=True`` adds ``-l``: git then reads each blob's header, which the dry
    run and the progress bar's byte total need.
    """
    args = ["ls-tree", "-r", "-z", "--full-tree"]
    if sizes:
        args.append("-l")
    out = git.out(*args, tree)
    entries: list[Entry] = []
    append = entries.append
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, sep, path = record.partition(b"\t")
        if not sep:
            raise GitError(f"unexpected ls-tree output: {record[:80]!r}")
        fields = meta.split()
        mode = int(fields[0], 8)
        size = -1
        if sizes and len(fields) > 3 and fields[3] != b"-":
            size = int(fields[3])
        append(Entry(path, mode, fields[2].decode("ascii"), size))
    return entries
