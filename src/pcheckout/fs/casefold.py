"""Whether a directory matches names ignoring case: probed as git probes a new repository.

``git init`` and ``git clone`` write ``config`` into the new git dir, then look for
``CoNfIg`` (builtin/init-db.c, create_default_files()): found, the filesystem ignores case
and git sets ``core.ignorecase=true``.  Here the destination itself is probed the same way
(a file created, then looked for in the other case, then removed), since a work tree can
lie on another filesystem than its git dir.  A run killed between the create and the
unlink leaves the probe; the next run that writes removes it (:func:`without_probes`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["PROBE_PREFIX", "folds", "without_probes"]

#: The probe's name, before the prober's process id.
PROBE_PREFIX = ".pcheckout-CaseProbe-"


def folds(directory: Path) -> bool | None:
    """Whether ``directory`` finds a name spelled in another case; None where it cannot
    be probed (it does not exist, is read-only, ...)."""
    name = f"{PROBE_PREFIX}{os.getpid()}"
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


def without_probes(directory: Path, names: list[bytes]) -> list[bytes]:
    """``names`` (what ``directory`` holds) without the probes a killed run left there,
    which are removed: empty files named as :func:`folds` names them.  Called under the
    index lock, so no other run is probing there."""
    prefix = os.fsencode(PROBE_PREFIX)
    kept = []
    for name in names:
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            path = os.path.join(os.fsencode(directory), name)
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode) and st.st_size == 0:
                    os.unlink(path)
                    continue
        kept.append(name)
    return kept
