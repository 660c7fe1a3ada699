"""Paths that collide on a case-insensitive destination, written as git's checkout writes
them.

On a filesystem that matches names ignoring case (an SMB share, NTFS, APFS;
``fs/casefold.py`` probes it as ``git init`` does), ``README`` and ``readme``, or ``A/x``
and ``a/x``, are one file.  git's checkout (entry.c ``checkout_entry``, run in index
order by its default ``checkout.workers=1``) meets them so: where an entry's path finds
something already there (another spelling), it removes it (a directory with everything in
it) and writes its own; a leading directory that is not a directory is unlinked and made;
a directory spelled otherwise is used as it is.  So the last of a group in index order is
on disk, under its own name and the spelling of whichever entry first made each directory;
the index keeps every entry, each with the stat data of the file it wrote.  A clone marks
the entries that met (``mark_colliding_entries``: the one that found a file and the one
that wrote it, by stat data, or by a path equal to it under ``fspathcmp``) and warns with
``report_collided_checkout``'s text; a checkout or a switch says nothing.

:func:`plan` replays that on names alone for the entries involved (those with a path or a
leading directory that folds to a name spelled otherwise in the tree): the round the
engine writes each in (an entry that removes another's file or directory is written a
round after it, one below a directory another makes in that one's round or later; every
other entry in round 1), the removals and directories made before each round, and the
paths git's warning names.  Folding is ASCII, as git's ``strcasecmp`` and ``core.ignorecase``
name hashing fold.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, NamedTuple

from pcheckout.context import Context
from pcheckout.fs.casefold import folds
from pcheckout.git.config import config_bool
from pcheckout.git.tree import Entry, RootedListing

__all__ = [
    "WARNING",
    "Collisions",
    "Step",
    "clashing",
    "find",
    "find_switch",
    "plan",
    "plan_switch",
    "warning",
]

#: unpack-trees.c report_collided_checkout(), then one "  '<path>'" line per path.
WARNING = (
    "the following paths have collided (e.g. case-sensitive paths\n"
    "on a case-insensitive filesystem) and only one from the same\n"
    "colliding group is in the working tree:\n"
)


class Step(NamedTuple):
    """What is done on disk before a round's writes: ``path`` as spelled on disk."""

    round: int
    op: Literal["unlink", "rmtree", "mkdir"]
    path: bytes


class Collisions(NamedTuple):
    """How the colliding entries of a checkout are written (see the module docstring)."""

    rounds: dict[int, int]  # entry index -> its round, for rounds after the first
    steps: list[Step]  # in order
    collided: list[bytes]  # the paths a clone's warning names, in git's order
    lost: list[bytes]  # entries whose file another one replaced, in index order
    involved: int  # entries involved
    warn: bool = False  # a clone's checkout: git's warning is said


class _Node(NamedTuple):
    dir: bool
    disk: bytes  # the path as spelled on disk
    owner: int  # the entry that wrote or made it (KEPT: there before)
    round: int


#: The owner of what a switch keeps: there before its first round.
KEPT = -1


def _prefixes(path: bytes) -> list[bytes]:
    """``a``, ``a/b``, ``a/b/c`` for ``a/b/c``."""
    parts = path.split(b"/")
    return [b"/".join(parts[: k + 1]) for k in range(len(parts))]


def clashing(paths: Sequence[bytes]) -> set[bytes]:
    """The folded names (files and leading directories) spelled more than one way among
    ``paths`` (distinct, as a tree's); empty, and quick, when none is.  Two names fold
    together only if one of them has a capital letter, so only those are folded: each
    folds to a name of its own, and to none of the others (folding every path made a new
    name for each, all held at once)."""
    # (a capital letter is all bytes.lower folds: a name it changes has one; comparing
    # the two took 0.3 ms for 4,800 paths where a regular expression took 16 ms)
    spelled = [p for p in paths if p != p.lower()]
    if not spelled:
        return set()  # no capital letter anywhere
    dirs: set[bytes] = set()
    for d in {p.rpartition(b"/")[0] for p in paths}:
        while d and d not in dirs:
            dirs.add(d)
            d = d.rpartition(b"/")[0]
    spelled += [d for d in dirs if d != d.lower()]
    folded = {x.lower() for x in spelled}
    if len(folded) == len(spelled):
        names = set(paths)
        if not any(f in names or f in dirs for f in folded):
            return set()
    spellings: dict[bytes, set[bytes]] = {}
    for x in (*paths, *dirs):
        spellings.setdefault(x.lower(), set()).add(x)
    return {k for k, v in spellings.items() if len(v) > 1}


class _Replay:
    """git's sequential checkout of the involved entries, on folded names."""

    def __init__(self, entries: Sequence[Entry], ignore_case: bool) -> None:
        self.entries = entries
        self.ignore_case = ignore_case
        self.nodes: dict[bytes, _Node] = {}
        self.rounds: dict[int, int] = {}
        self.steps: list[tuple[int, Literal["unlink", "rmtree", "mkdir"], bytes]] = []
        self.marked: list[int] = []
        self.done: list[int] = []  # entries checked out so far, in index order

    def _remove(self, key: bytes, subtree: bool) -> int:
        """Remove the node at ``key`` (and, for a directory, all below it); the round the
        remover must come after."""
        after = 0
        doomed = [key]
        if subtree:
            doomed += [k for k in self.nodes if k.startswith(key + b"/")]
        for k in doomed:
            after = max(after, self.nodes.pop(k).round)
        return after

    def _mark(self, i: int, found: _Node) -> None:
        """mark_colliding_entries(): this entry, and the first earlier one unmarked that
        wrote what it found or whose path collides with its own."""
        self.marked.append(i)
        path = self.entries[i].path
        for d in self.done:
            if d in self.marked:
                continue
            other = self.entries[d].path
            same = other.lower() == path.lower() if self.ignore_case else other == path
            if (not found.dir and found.owner == d) or (len(other) == len(path) and same):
                self.marked.append(d)
                return

    def checkout(self, i: int) -> None:
        """checkout_entry() for entry ``i``: its round, and the steps before it."""
        path = self.entries[i].path
        prefixes = _prefixes(path)
        keys = [p.lower() for p in prefixes]
        steps: list[tuple[Literal["unlink", "rmtree", "mkdir"], bytes]] = []
        need = 1
        dirs_only = all(k in self.nodes and self.nodes[k].dir for k in keys[:-1])
        found = self.nodes.get(keys[-1]) if dirs_only else None
        if found is not None:
            self._mark(i, found)
            need = max(need, self._remove(keys[-1], found.dir) + 1)
            steps.append(("rmtree" if found.dir else "unlink", found.disk))
        disk = b""
        made: list[tuple[bytes, bytes]] = []  # (key, spelling on disk) of directories made
        for name, key in zip(prefixes[:-1], keys[:-1], strict=True):
            node = self.nodes.get(key)
            if node is not None and node.dir:
                need = max(need, node.round)
                disk = node.disk
                continue
            if node is not None:  # a file where a directory goes: unlinked, then made
                need = max(need, self._remove(key, False) + 1)
                steps.append(("unlink", node.disk))
            last = name.rpartition(b"/")[2]
            disk = disk + b"/" + last if disk else last
            steps.append(("mkdir", disk))
            made.append((key, disk))
        name = prefixes[-1].rpartition(b"/")[2]
        mine = disk + b"/" + name if disk else name
        for key, where in made:
            self.nodes[key] = _Node(True, where, i, need)
        self.nodes[keys[-1]] = _Node(False, mine, i, need)
        if need > 1:
            self.rounds[i] = need
        self.steps += [(need, op, p) for op, p in steps]
        self.done.append(i)


def plan(entries: Sequence[Entry], wanted: Sequence[int], ignore_case: bool) -> Collisions | None:
    """How git's checkout writes ``entries`` (those at ``wanted``, in index order) where
    names fold; None where no two of them collide.  ``ignore_case``: git's
    ``core.ignorecase`` (its ``fspathcmp`` in the clone's marking and warning)."""
    paths = [entries[i].path for i in wanted]
    folded = clashing(paths)
    if not folded:
        return None
    return _replayed(_Replay(entries, ignore_case), wanted, folded)


def plan_switch(
    kept: Sequence[bytes], entries: Sequence[Entry], ignore_case: bool
) -> Collisions | None:
    """How git's checkout writes a switch's ``entries`` (in index order) where their names
    fold with each other's or with those of the entries it keeps (``kept``: their files
    are there, written before round 1; the switch's deletes are done); None where
    nothing collides."""
    folded = clashing([*kept, *(e.path for e in entries)])
    if not folded:
        return None
    replay = _Replay(entries, ignore_case)
    for path in kept:
        prefixes = _prefixes(path)
        keys = [p.lower() for p in prefixes]
        if not any(k in folded for k in keys):
            continue
        for name, key in zip(prefixes[:-1], keys[:-1], strict=True):
            replay.nodes.setdefault(key, _Node(True, name, KEPT, 0))
        replay.nodes.setdefault(keys[-1], _Node(False, path, KEPT, 0))
    return _replayed(replay, range(len(entries)), folded)


def _replayed(replay: _Replay, wanted: Iterable[int], folded: set[bytes]) -> Collisions:
    """The replay of the entries at ``wanted`` whose names (or leading directories')
    are among the ``folded`` clashing ones."""
    entries = replay.entries
    for i in wanted:
        if any(k in folded for k in (p.lower() for p in _prefixes(entries[i].path))):
            replay.checkout(i)
    on_disk = {n.owner for n in replay.nodes.values() if not n.dir}
    marked = [entries[i].path for i in sorted(set(replay.marked))]
    key = (lambda p: p.lower()) if replay.ignore_case else (lambda p: p)
    steps = [Step(r, op, p) for r, op, p in replay.steps]
    steps.sort(key=lambda s: s.round)  # stable: each round's steps in index order
    return Collisions(
        rounds=replay.rounds,
        steps=steps,
        collided=sorted(marked, key=key),
        lost=[entries[i].path for i in replay.done if i not in on_disk],
        involved=len(replay.done),
    )


def find(
    ctx: Context,
    root: Path,
    entries: Sequence[Entry],
    wanted: Sequence[int],
    clone: bool,
    *,
    local: bool = False,
) -> Collisions | None:
    """The collisions of writing ``entries`` (at ``wanted``) into ``root``: only where two
    paths fold together, and the destination, probed, ignores case (where it cannot be
    probed, ``core.ignorecase`` says).  ``local``: the probe costs no round trips, so it
    comes first, and a destination that matches names exactly needs no folding of the
    paths (10-15 ms at 40k entries)."""
    probed = folds(root) if local else None
    if probed is False:
        return None
    if not clashing(_paths(entries, wanted)):
        return None
    ignore_case = config_bool(ctx.config.get("core.ignorecase"), False)
    if not _folds(ctx, root, ignore_case, probed):
        return None
    found = plan(entries, wanted, ignore_case)
    return found._replace(warn=clone) if found is not None else None


def _paths(entries: Sequence[Entry], wanted: Sequence[int]) -> Sequence[bytes]:
    """The paths of ``entries`` at ``wanted``; of a whole listing not yet parsed, its
    records' paths as git printed them, the subtrees' among them (names :func:`clashing`
    folds anyway, as every file's leading directories): where git's writer writes, the
    listing is never parsed (25 ms at 4,800 entries)."""
    if isinstance(entries, RootedListing) and len(wanted) == len(entries):
        return entries.paths()
    return [entries[i].path for i in wanted]


def find_switch(
    ctx: Context,
    root: Path,
    kept: Sequence[bytes],
    entries: Sequence[Entry],
    *,
    local: bool = False,
) -> Collisions | None:
    """The collisions of a switch writing ``entries`` into ``root`` beside the ``kept``
    entries' files: as :func:`find` decides whether there are any (``local``: the probe
    first; folding the paths of a switch's whole tree took 0.18 s at 250,000 entries)."""
    probed = folds(root) if local else None
    if probed is False:
        return None
    if not clashing([*kept, *(e.path for e in entries)]):
        return None
    ignore_case = config_bool(ctx.config.get("core.ignorecase"), False)
    if not _folds(ctx, root, ignore_case, probed):
        return None
    return plan_switch(kept, entries, ignore_case)


def _folds(ctx: Context, root: Path, ignore_case: bool, probed: bool | None = None) -> bool:
    """Whether ``root`` ignores case: probed (``probed``, where it was already), else as
    ``core.ignorecase`` says."""
    probed = folds(root) if probed is None else probed
    ctx.ui.debug(f"paths fold together; {root} ignores case: {probed} (probed)")
    return ignore_case if probed is None else probed


def warning(collided: Sequence[bytes]) -> str:
    """git clone's warning naming ``collided``, as git prints it (after ``warning: ``)."""
    lines = "".join(f"  '{p.decode(errors='surrogateescape')}'\n" for p in collided)
    return WARNING + "\n" + lines.rstrip("\n")
