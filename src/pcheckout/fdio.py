"""Descriptor-level output shared by every layer: :func:`write_all` (and
:func:`write_each`, for output made a piece at a time).

It sits at the bottom, beside ``errors.py``, because three layers write through it and
imports only go down: ``git/index.py`` (the index's lock file), ``fs/files.py`` (the work
tree's files) and ``write/forked.py`` (a writer process's result pipe).  ``git/`` may not
import ``fs/``, so the helper cannot live in ``fs/files.py``; it is not an index concept, so
it does not belong in ``git/index.py`` either.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["Data", "write_all", "write_each"]

#: Bytes to write.
Data = bytes | bytearray | memoryview


def write_all(fd: int, data: Data) -> None:
    """``os.write`` until all of ``data`` is written (writes may be partial)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_each(fd: int, data: Data | Iterator[Data]) -> None:
    """:func:`write_all` of ``data``, or of each piece an iterator of them yields in turn
    (output written as it is made, never held whole)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        write_all(fd, data)
        return
    for piece in data:
        write_all(fd, piece)
