"""Descriptor-level output shared by every layer: :func:`write_all`.

It sits at the bottom, beside ``errors.py``, because three layers write through it and
imports only go down: ``git/index.py`` (the index's lock file), ``fs/files.py`` (the work
tree's files) and ``write/forked.py`` (a writer process's result pipe).  ``git/`` may not
import ``fs/``, so the helper cannot live in ``fs/files.py``; it is not an index concept, so
it does not belong in ``git/index.py`` either.
"""

from __future__ import annotations

import os

__all__ = ["write_all"]


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until all of ``data`` is written (writes may be partial)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
