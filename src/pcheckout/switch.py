"""Incremental switch of a populated working tree (not written yet)."""

from __future__ import annotations

from .errors import WorktreeNotEmptyError


def switch(git, repo, config, opts, commit, branch, entries, ui):  # type: ignore[no-untyped-def]
    raise WorktreeNotEmptyError(f"working tree {repo.work_tree} is not empty")
