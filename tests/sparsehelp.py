"""Helpers for sparse-checkout tests: what git itself marks skip-worktree."""

from __future__ import annotations

from pathlib import Path

from helpers import git


def git_sparse_set(work: Path, patterns: list[str], *, cone: bool) -> None:
    """Write ``patterns`` as the worktree's sparse-checkout rules, the way git does
    (``git sparse-checkout set``), without touching the working tree's files."""
    git(work, "config", "extensions.worktreeConfig", "true")
    git(work, "config", "--worktree", "core.sparseCheckout", "true")
    git(work, "config", "--worktree", "core.sparseCheckoutCone", "true" if cone else "false")
    info = Path(git(work, "rev-parse", "--git-path", "info/sparse-checkout").decode().strip())
    if not info.is_absolute():
        info = work / info
    info.parent.mkdir(parents=True, exist_ok=True)
    info.write_text("".join(p + "\n" for p in patterns))


def skip_flags(work: Path) -> dict[bytes, bool]:
    """``{path: skip-worktree}`` from ``git ls-files -t`` (S = skip-worktree)."""
    out = git(work, "ls-files", "-t", "-z")
    return {rec[2:]: rec[:1] == b"S" for rec in out.split(b"\0") if rec}
