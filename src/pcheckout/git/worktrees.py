"""The repository's other work trees (``git worktree``): where a branch is checked out
already, which ``git checkout BRANCH`` refuses (branch.c ``die_if_checked_out``,
worktree.c ``get_worktrees`` and ``find_shared_symref`` in git 2.39).

Read from the common git dir as git reads it under the files ref backend: the main work
tree's ``HEAD``, each linked one's ``worktrees/<id>/HEAD`` and ``gitdir``; a work tree
being rebased or bisected on the branch counts as having it checked out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from pcheckout.errors import decode
from pcheckout.git.config import config_bool
from pcheckout.git.runner import Repo


class _Worktree(NamedTuple):
    path: str  # as git names it in its message
    git_dir: Path


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _worktrees(repo: Repo, config: Mapping[str, str]) -> Iterator[_Worktree]:
    """The main work tree (unless the repository is bare), then the linked ones, in
    git's order (the ``worktrees`` directory as read)."""
    common = repo.common_dir
    if not config_bool(config.get("core.bare"), False):
        yield _Worktree(str(common).removesuffix("/.git"), common)
    try:
        ids = [p.name for p in (common / "worktrees").iterdir()]
    except OSError:
        return
    for wt_id in ids:
        git_dir = common / "worktrees" / wt_id
        gitdir = _read(git_dir / "gitdir")
        if gitdir:  # worktree.c get_linked_worktree(): an invalid gitdir file is skipped
            yield _Worktree(decode(gitdir.rstrip()).removesuffix("/.git"), git_dir)


def _head(git_dir: Path) -> str | None:
    """The ref a work tree's HEAD names (None: detached, or unreadable)."""
    data = _read(git_dir / "HEAD") or b""
    return decode(data[5:].strip()) if data.startswith(b"ref: ") else None


def _busy_detached(git_dir: Path, branch: str) -> bool:
    """A detached work tree being rebased or bisected on ``branch`` (wt-status.c
    wt_status_check_rebase, wt_status_check_bisect)."""
    short = branch.removeprefix("refs/heads/")
    for name in ("rebase-merge/head-name", "rebase-apply/head-name"):
        if name.startswith("rebase-apply") and (git_dir / "rebase-apply" / "applying").exists():
            continue
        head = _read(git_dir / name)
        if head is not None and decode(head.strip()).removeprefix("refs/heads/") == short:
            return True
    bisect = _read(git_dir / "BISECT_START")
    return bisect is not None and decode(bisect.strip()) == short


def checked_out_elsewhere(repo: Repo, config: Mapping[str, str], branch: str) -> str | None:
    """The path of the first other work tree that has ``branch`` (``refs/heads/x``)
    checked out; None where none has (or the repository has no other work tree)."""
    if not (repo.common_dir / "worktrees").is_dir():
        return None  # one stat: no linked work tree was ever added
    for wt in _worktrees(repo, config):
        if wt.git_dir.resolve() == repo.git_dir:
            continue
        head = _head(wt.git_dir)
        if head == branch or (head is None and _busy_detached(wt.git_dir, branch)):
            return wt.path
    return None
