"""Which untracked paths git ignores (its standard excludes: ``.gitignore`` files,
``$GIT_DIR/info/exclude``, ``core.excludesFile``), as ``git check-ignore`` decides: the
paths git's checkout may overwrite (unpack-trees.c check_ok_to_remove, is_excluded)."""

from __future__ import annotations

from collections.abc import Sequence

from pcheckout.git.runner import Git

__all__ = ["ignored"]


def ignored(git: Git, paths: Sequence[bytes]) -> set[bytes]:
    """The ``paths`` (relative to the work tree's root, where ``git`` runs) git ignores:
    a path below an ignored directory is ignored too."""
    if not paths:
        return set()
    # exit 1: none is ignored
    proc = git.run(
        "check-ignore", "-z", "--stdin", input=b"".join(p + b"\0" for p in paths), ok_codes=(0, 1)
    )
    return {p for p in proc.stdout.split(b"\0") if p}
