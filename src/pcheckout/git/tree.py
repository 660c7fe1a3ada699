"""Listing a git tree: one ``git ls-tree -r -z`` process, names as bytes."""

from __future__ import annotations

from typing import NamedTuple

from pcheckout.errors import GitError
from pcheckout.git.runner import Git

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_SYMLINK = 0o120000
MODE_GITLINK = 0o160000


class Entry(NamedTuple):
    """One path of the tree to be written (a tuple: 100k of them are made per
    checkout, and a NamedTuple is ~3x cheaper to build than a frozen dataclass)."""

    path: bytes
    mode: int
    oid: str  # hex
    size: int  # -1 when not known (gitlinks, or listing without sizes)


def list_tree(git: Git, tree: str, *, sizes: bool = False) -> list[Entry]:
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
    modes: dict[bytes, int] = {}
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, sep, path = record.partition(b"\t")
        if not sep:
            raise GitError(f"unexpected ls-tree output: {record[:80]!r}")
        fields = meta.split()
        mode = modes.get(fields[0])
        if mode is None:
            mode = modes[fields[0]] = int(fields[0], 8)
        size = -1
        if sizes and len(fields) > 3 and fields[3] != b"-":
            size = int(fields[3])
        append(Entry(path, mode, fields[2].decode("ascii"), size))
    return entries
