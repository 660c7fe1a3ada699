"""Whether a directory matches names ignoring case: probed as git probes a new repository.

``git init`` and ``git clone`` write ``config`` into the new git dir, then look for
``CoNfIg`` (builtin/init-db.c, create_default_files()): found, the filesystem ignores case
and git sets ``core.ignorecase=true``.  Here the destination itself is probed the same way
(a file created, then looked for in the other case, then removed), since a work tree can
lie on another filesystem than its git dir; it is asked only of a tree holding paths that
fold together (``decide/collisions.py``), so other checkouts pay nothing.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["folds"]


def folds(directory: Path) -> bool | None:
    """Whether ``directory`` finds a name spelled in another case; None where it cannot
    be probed (it does not exist, is read-only, ...)."""
    name = f".pcheckout-CaseProbe-{os.getpid()}"
    path = os.path.join(directory, name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    os.close(fd)
    try:
        return os.path.lexists(os.path.join(directory, name.swapcase()))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
