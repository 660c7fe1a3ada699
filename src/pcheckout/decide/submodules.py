"""Decide what a checkout does to its submodules with ``submodule.recurse`` set, as
``git checkout`` decides it (unpack-trees.c with ``should_update_submodules``; the
moves themselves are ``apply/submodules.py``).

Without ``submodule.recurse`` (and for git clone's checkout) nothing: a gitlink is an
empty directory where none is, and a submodule is left as it is.  With it, each gitlink
the checkout changes whose submodule is active (``git/submodules.py``) is:

* moved to the new commit where it is populated (its HEAD detached there);
* populated (its work tree written from ``$GIT_DIR/modules/NAME``, HEAD detached) where
  it is not; a submodule that is not active stays an empty directory, as in git;
* removed where the target tree has no gitlink there and it is populated: its tracked
  files, its ``.git`` file and its directory if empty (git keeps ``.git/modules/NAME``).

Before anything is written (without ``--force``) each populated submodule the switch
changes is asked what git asks it: a dirty index refuses, and ``git read-tree -n -m``
from its HEAD to the recorded commit, then to the new one, refuses where local changes
would be lost; git's messages, on one line.  The gitmodules read are the work tree's
for what leaves (and for the checks), the target's for what arrives.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pcheckout.context import Context
from pcheckout.errors import GitRefusedError
from pcheckout.git.runner import Git
from pcheckout.git.submodules import (
    Gitmodule,
    active_paths,
    by_path,
    module_git_dir,
    populated,
    read_gitmodules,
    recurses,
    submodule_git,
)
from pcheckout.git.tree import MODE_GITLINK, Entry

if TYPE_CHECKING:  # the index's entries are given (a fresh checkout by git's writer reads none)
    from pcheckout.git.index import IndexEntry

__all__ = ["SubmoduleMove", "Switching", "fresh_moves", "recursing", "switch_moves"]

GITMODULES = b".gitmodules"

#: git >= 2.40 takes ``--super-prefix`` no longer before the command (read-tree has its
#: own, undocumented): the prefix only names paths in git's messages, so it is left out.
_GLOBAL_SUPER_PREFIX_UNTIL = (2, 40)


class SubmoduleMove(NamedTuple):
    """One submodule the checkout moves, populates or removes."""

    path: bytes
    name: str
    recorded: str | None  # the commit the index records (None: no gitlink there before)
    new: str | None  # the commit checked out in it (None: it leaves the tree)
    populated: bool  # its work tree is there (a .git in it naming its git dir)
    existed: bool  # its directory was there before the checkout
    git_dir: str  # $GIT_DIR/modules/NAME, where its repository is
    replaced: bool = False  # a file or symlink takes its place: its directory removed

    @property
    def action(self) -> str:
        """What the report calls it: moved, populated, removed or replaced."""
        if self.replaced:
            return "replaced"
        if self.new is None:
            return "removed"
        return "moved" if self.populated else "populated"

    def to_json(self) -> dict[str, object]:
        return {
            "path": os.fsdecode(self.path),
            "name": self.name,
            "action": self.action,
            "from": self.recorded if self.populated else None,
            "to": self.new,
        }


def recursing(ctx: Context, clone: bool) -> bool:
    """Whether the checkout moves submodules: ``submodule.recurse`` (git clone's own
    checkout never does; clone's ``--recurse-submodules`` does it afterwards)."""
    return not clone and recurses(ctx.config)


def super_prefix(git: Git, path: bytes) -> list[str]:
    """git's ``--super-prefix=PATH/`` before a submodule's read-tree, where git takes it."""
    if git.has(_GLOBAL_SUPER_PREFIX_UNTIL):
        return []
    return [f"--super-prefix={os.fsdecode(path)}/"]


def empty_tree(ctx: Context) -> str:
    from pcheckout.git.catfile import EMPTY_TREE  # (the engine's module: not imported ahead)

    return EMPTY_TREE[ctx.repo.oid_hex_len]


class _Side(NamedTuple):
    """The gitlinks on one side of a checkout, and which of them are active."""

    modules: dict[bytes, Gitmodule]  # .gitmodules sections by path
    active: set[bytes]


def _side(ctx: Context, paths: Sequence[bytes], blob: str | None, tree: str | None) -> _Side:
    if not paths:
        return _Side({}, set())
    modules = read_gitmodules(ctx.git, blob)
    active = active_paths(ctx.git, ctx.config, modules, paths, tree)
    return _Side(by_path(modules), active)


def _target_gitmodules(target: Mapping[bytes, Entry], written: Collection[bytes]) -> str | None:
    """The blob ``git config --blob`` reads for the target's .gitmodules (None: the work
    tree's file, which the checkout leaves as it is)."""
    e = target.get(b".gitmodules")
    if e is not None and b".gitmodules" in written:
        return e.oid
    return None


def at_top(ctx: Context, root: Path) -> Context:
    """``ctx`` with its git run at the work tree's top (paths are relative to it)."""
    return ctx._replace(git=ctx.git.replace(cwd=root))


class Switching(NamedTuple):
    """What a switch does, as its submodules' decision needs it."""

    root: Path  # the work tree's top
    in_index: Mapping[bytes, IndexEntry]  # the index's entries by path
    target: Mapping[bytes, Entry]  # the target tree's entries by path
    write: Sequence[bytes]  # the paths the switch writes in the work tree
    remove: Sequence[bytes]  # and those it removes
    force: bool
    tree: str  # the target tree
    recurse: bool = True  # submodule.recurse
    #: the paths interrupted runs of this switch left (theirs, not the user's): their
    #: ``.gitmodules`` is not the one the switch began from
    left: Collection[bytes] = frozenset()


def switch_moves(ctx: Context, switching: Switching) -> tuple[SubmoduleMove, ...]:
    """The submodules a switch to ``switching.tree`` moves (``write`` and ``remove`` are
    what it changes in the work tree).  Refuses (:class:`GitRefusedError`) as git does,
    unless ``force``.  Without ``recurse`` (no submodule.recurse) only the submodules a file
    or symlink replaces: their directories go, as git's checkout removes them (entry.c
    ``checkout_entry``: ``remove_subtree``), with or without submodule.recurse."""
    root, index, target, write, remove, force, tree, recurse, left = switching
    ctx = at_top(ctx, root)
    replaced = [
        p
        for p in write
        if p in index and index[p].mode == MODE_GITLINK and target[p].mode != MODE_GITLINK
    ]
    replaced = [p for p in replaced if os.path.isdir(os.path.join(os.fsencode(root), p))]
    if not recurse:
        return tuple(_replaced(ctx, p, {}) for p in replaced)
    leaving = [
        p for p in dict.fromkeys([*remove, *write]) if p in index and index[p].mode == MODE_GITLINK
    ]
    arriving = [p for p in write if target[p].mode == MODE_GITLINK]
    if force:  # git checkout -f resets every gitlink of the target
        arriving = [p for p, e in target.items() if e.mode == MODE_GITLINK]
    if not leaving and not arriving:
        return ()
    old = _old_side(ctx, [*leaving, *arriving], index, left)
    new = _side(ctx, arriving, _target_gitmodules(target, write), tree)
    if not force:
        _refuse(ctx, _checks(os.fsencode(root), index, target, (leaving, arriving), old))
    moves = [_replaced(ctx, p, old.modules) for p in replaced]
    moves += [
        _move(ctx, p, old.modules[p].name, index[p].oid.hex(), None)
        for p in leaving
        if p not in arriving and p not in target and p in old.active and populated(ctx.git, p)
    ]
    for p in arriving:
        if p in new.active:
            i = index.get(p)
            recorded = i.oid.hex() if i is not None and i.mode == MODE_GITLINK else None
            moves.append(_move(ctx, p, new.modules[p].name, recorded, target[p].oid))
    return tuple(moves)


def _old_side(
    ctx: Context, paths: Sequence[bytes], index: Mapping[bytes, IndexEntry], left: Collection[bytes]
) -> _Side:
    """The gitlinks' side before the switch: the work tree's ``.gitmodules``, as git's
    checkout reads it; where an interrupted run of the switch wrote it, the one it began
    from (the index's; none where the index has none)."""
    if GITMODULES not in left:
        return _side(ctx, paths, None, None)
    staged = index.get(GITMODULES)
    if staged is None:
        return _Side({}, set())
    return _side(ctx, paths, staged.oid.hex(), None)


def fresh_moves(
    ctx: Context, root: Path, tree: str, entries: Sequence[Entry]
) -> tuple[SubmoduleMove, ...]:
    """The submodules a fresh checkout of ``tree`` populates: the active ones (git writes
    the target's .gitmodules first and reads it)."""
    ctx = at_top(ctx, root)
    links = [e for e in entries if e.mode == MODE_GITLINK]
    if not links:
        return ()
    gm = next((e.oid for e in entries if e.path == b".gitmodules"), None)
    if gm is None:
        return ()
    new = _side(ctx, [e.path for e in links], gm, tree)
    return tuple(
        _move(ctx, e.path, new.modules[e.path].name, None, e.oid)
        for e in links
        if e.path in new.active
    )


def _replaced(ctx: Context, path: bytes, modules: Mapping[bytes, Gitmodule]) -> SubmoduleMove:
    """A submodule's directory that a file or symlink of the target replaces."""
    module = modules.get(path)
    name = module.name if module is not None else ""
    return SubmoduleMove(path, name, None, None, populated(ctx.git, path), True, "", True)


def _move(
    ctx: Context, path: bytes, name: str, recorded: str | None, new: str | None
) -> SubmoduleMove:
    full = os.path.join(os.fsencode(ctx.git.cwd), path)
    is_populated = populated(ctx.git, path)
    git_dir = module_git_dir(ctx.git, name)
    if new is not None and not is_populated and not os.path.isdir(git_dir):
        # git checkout dies half-way here ("fatal: not a git repository"); nothing is
        # written instead.
        raise GitRefusedError(
            f"submodule '{os.fsdecode(path)}' is active but has no repository in "
            f"{git_dir} (git's checkout stops there: not a git repository); run "
            "'git submodule update --init' first, or check out with "
            "'git -c submodule.recurse=false'"
        )
    return SubmoduleMove(path, name, recorded, new, is_populated, os.path.isdir(full), git_dir)


class _Check(NamedTuple):
    """One dry run git makes in a submodule: from ``old`` to ``new`` (None: the empty
    tree)."""

    path: bytes
    old: str | None
    new: str | None


def _checks(
    root: bytes,
    index: Mapping[bytes, IndexEntry],
    target: Mapping[bytes, Entry],
    links: tuple[list[bytes], list[bytes]],
    old: _Side,
) -> list[_Check]:
    """git's dry runs, in its order (unpack-trees.c ``verify_uptodate_1`` on what the
    index records, then ``merged_entry``'s ``check_submodule_move_head``), for the
    submodules the work tree's .gitmodules makes active."""
    leaving, arriving = links
    checks: list[_Check] = []
    for p in sorted(set(leaving) | set(arriving)):
        if p not in old.active:
            continue
        i = index.get(p)
        if i is None:  # (git runs it in the directory: where there is none, it refuses)
            checks.append(_Check(p, None, target[p].oid))
        elif i.mode == MODE_GITLINK and os.path.lexists(os.path.join(root, p)):
            if p not in target:  # deleted_entry: to the empty tree
                checks.append(_Check(p, i.oid.hex(), None))
                continue
            if p not in arriving:  # replaced by a file: verify_uptodate alone
                checks.append(_Check(p, "HEAD", i.oid.hex()))
                continue
            checks.append(_Check(p, "HEAD", i.oid.hex()))
            checks.append(_Check(p, i.oid.hex(), target[p].oid))
    return checks


def _refuse(ctx: Context, checks: list[_Check]) -> None:
    """Run ``checks``; refuse with git's messages if any submodule would lose work."""
    said: list[str] = []
    rejected: list[str] = []
    for check in checks:
        shown = os.fsdecode(check.path)
        if shown in rejected:
            continue
        message = _dry_run(ctx, check)
        if message is not None:
            said.append(message)
            rejected.append(shown)
    if rejected:
        raise GitRefusedError(
            "git checkout refused: "
            + " ".join(said)
            + " Cannot update submodule: "
            + ", ".join(rejected)
            + "; Aborting"
        )


def _dry_run(ctx: Context, check: _Check) -> str | None:
    """submodule.c ``submodule_move_head`` with ``SUBMODULE_MOVE_HEAD_DRY_RUN``: what git
    says where it refuses (None: it would not)."""
    shown = os.fsdecode(check.path)
    if check.old is not None and not populated(ctx.git, check.path):
        return None
    full = os.path.join(os.fsencode(ctx.git.cwd), check.path)
    if not os.path.isdir(full):
        return f"Submodule '{shown}' could not be updated."
    sub = submodule_git(ctx.git, ctx.environ, check.path)
    if check.old is not None:
        dirty = sub.run("diff-index", "--quiet", "--cached", "HEAD", ok_codes=(0, 1, 128))
        if dirty.returncode:
            return f"submodule '{shown}' has dirty index"
    args = [*super_prefix(sub, check.path), "read-tree", "--recurse-submodules", "-n", "-m"]
    trees = (check.old or empty_tree(ctx), check.new or empty_tree(ctx))
    proc = sub.run(*args, *trees, ok_codes=(0, 1, 128))
    if proc.returncode == 0:
        return None
    lines = [_strip(line) for line in proc.stderr.decode("utf-8", "replace").splitlines()]
    return " ".join([*filter(None, lines), f"Submodule '{shown}' could not be updated."])


def _strip(line: str) -> str:
    line = line.strip()
    for prefix in ("error: ", "fatal: "):
        line = line.removeprefix(prefix)
    return line
