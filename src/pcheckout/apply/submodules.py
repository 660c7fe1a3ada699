"""Carry out a plan's submodule moves (``decide/submodules.py``) by the commands git's
checkout runs in each (submodule.c ``submodule_move_head``), for pcheckout's engine
(git's writer moves them itself: ``git checkout`` and ``read-tree`` read
``submodule.recurse`` too).

The read-trees (git's writer) are run by ``write/gitwriter.py``'s ``submodule_tree``.

* removed (before the switch's deletes): ``read-tree --recurse-submodules -u --reset``
  of the empty tree, then its ``.git`` file and ``core.worktree`` in its git dir (kept,
  as git keeps it); its directory is then the switch's to delete;
* moved: ``read-tree --recurse-submodules -u --reset NEW`` (git's checkout resets a
  submodule it moves: the dry run refused where that would lose work), then
  ``update-ref --no-deref HEAD NEW``: detached, as git leaves it;
* populated: the ``.git`` file and ``core.worktree`` (``connect_work_tree_and_git_dir``),
  its index emptied, then the tree read as above (``-m`` from the empty tree where its
  directory was there before, as ``checkout_entry`` does) and HEAD detached.

A move that fails is said as git says it; the run goes on (git's checkout finishes the
switch and exits 1) and the failures are returned.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from pcheckout.context import Context
from pcheckout.decide.submodules import SubmoduleMove, at_top, empty_tree, super_prefix
from pcheckout.git.runner import Git
from pcheckout.git.submodules import submodule_git, uses_gitfile

__all__ = ["move", "remove"]


def remove(ctx: Context, root: Path, moves: Sequence[SubmoduleMove]) -> list[str]:
    """The submodules leaving the tree below ``root``: their work trees removed (before
    the deletes)."""
    ctx = at_top(ctx, root)
    return [f for m in moves if m.new is None for f in _one(ctx, m)]


def move(ctx: Context, root: Path, moves: Sequence[SubmoduleMove]) -> list[str]:
    """The submodules moved or populated (once the gitlinks' directories are written)."""
    ctx = at_top(ctx, root)
    return [f for m in moves if m.new is not None for f in _one(ctx, m)]


def _one(ctx: Context, m: SubmoduleMove) -> list[str]:
    """One submodule's move; git's messages where it failed (else none)."""
    root = os.fsencode(ctx.git.cwd)
    if m.replaced:  # entry.c checkout_entry: remove_subtree, whatever it holds
        try:
            shutil.rmtree(os.path.join(root, m.path))
        except OSError as exc:
            return [f"cannot remove submodule directory '{os.fsdecode(m.path)}': {exc.strerror}"]
        return []
    from pcheckout.write import gitwriter  # git's writer: only a submodule's move runs it

    sub = submodule_git(ctx.git, ctx.environ, m.path)
    shown = os.fsdecode(m.path)
    if m.populated:
        if not uses_gitfile(root, m.path):  # its own .git moved into $GIT_DIR/modules
            proc = ctx.git.run("submodule", "absorbgitdirs", "--", shown, ok_codes=(0, 1, 128))
            for line in _said(proc.stderr):  # git's "Migrating git directory of ..."
                ctx.ui.git_message(line)
            if proc.returncode:
                return [f"Submodule '{shown}' could not be updated."]
        _connect(ctx.git, root, m)
    else:
        _connect(ctx.git, root, m)
        prefix = super_prefix(sub, m.path)
        proc = gitwriter.submodule_tree(sub, prefix, [empty_tree(ctx)], recurse=False)
        if proc.returncode:
            return [*_said(proc.stderr), "could not reset submodule index"]
    if m.populated or not m.existed or m.new is None:
        trees = [m.new or empty_tree(ctx)]
    else:
        trees = [empty_tree(ctx), m.new]
    proc = gitwriter.submodule_tree(sub, super_prefix(sub, m.path), trees, recurse=True)
    if proc.returncode:
        return [*_said(proc.stderr), f"Submodule '{shown}' could not be updated."]
    if m.new is not None:
        proc = sub.hooked().run(  # (its reference-transaction hook runs)
            "update-ref", "HEAD", "--no-deref", m.new, ok_codes=(0, 1, 128)
        )
        return _said(proc.stderr) if proc.returncode else []
    _unpopulate(ctx, root, m)
    return []


def _connect(git: Git, root: bytes, m: SubmoduleMove) -> None:
    """``PATH/.git`` naming the git dir and its ``core.worktree`` naming ``PATH``, both
    relative, as git writes them (dir.c ``connect_work_tree_and_git_dir``)."""
    work = os.path.realpath(os.path.join(root, m.path))
    os.makedirs(work, exist_ok=True)
    git_dir = os.path.realpath(os.fsencode(m.git_dir))
    with open(os.path.join(work, b".git"), "wb") as f:
        f.write(b"gitdir: " + os.path.relpath(git_dir, work) + b"\n")
    config = os.fsdecode(os.path.join(git_dir, b"config"))
    git.run(
        "config", "--file", config, "core.worktree", os.fsdecode(os.path.relpath(work, git_dir))
    )


def _unpopulate(ctx: Context, root: bytes, m: SubmoduleMove) -> None:
    """What a removed submodule leaves: no ``.git`` file, no ``core.worktree`` in its git
    dir (the git dir itself kept); its directory is the switch's delete (git's warning
    where untracked files keep it: ``write/remove.py``)."""
    full = os.path.join(root, m.path)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(full, b".git"))
    config = os.path.join(m.git_dir, "config")
    ctx.git.run("config", "--file", config, "--unset", "core.worktree", ok_codes=(0, 5))


def _said(stderr: bytes) -> list[str]:
    return [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
