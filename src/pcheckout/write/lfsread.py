"""The local Git LFS objects a write copies, read ahead by threads of their own.

A file smudged in-process (``git/lfs.py``) costs its writer the object's read besides the
file's own create and write: where the repository is on a latency-bound mount that read
is itself three round trips (OPEN, READ, FLUSH on the 1 ms latency filesystem), in the
writer's thread, on its directory's critical path.  :class:`ReadAhead` reads the small
objects (up to ``SMALL_BLOB``) on its own threads instead, in the order the writers will
reach them (their regions interleaved, and each batch a writer takes moved to the front),
holding at most ``budget`` bytes not yet taken.  A writer that reaches an object nobody
has begun to read reads it itself, as before; one that fails to read here is read again
by the writer, whose error the user sees.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, zip_longest

from pcheckout.git.catfile import SMALL_BLOB
from pcheckout.git.lfs import Smudge

#: Bytes read and not yet written (each object is at most ``SMALL_BLOB``).
BUDGET = 64 * 1024 * 1024
#: Reading threads at most (each read waits on the server: threads are cheap here).
MAX_THREADS = 32


def interleaved(regions: Iterable[Sequence[int]]) -> list[int]:
    """The regions' indexes taken in turn, one of each (writers advance side by side)."""
    return [i for i in chain.from_iterable(zip_longest(*regions)) if i is not None]


class ReadAhead:
    """Objects of ``smudges`` (entry index -> object) read ahead, in ``order``."""

    def __init__(
        self,
        smudges: Mapping[int, Smudge],
        order: Sequence[int],
        threads: int,
        budget: int = BUDGET,
    ) -> None:
        self._smudges = smudges
        self._queue = deque(i for i in order if smudges[i].size <= SMALL_BLOB)
        self._front: deque[int] = deque()
        self._claimed: set[int] = set()  # begun, by a reader or a writer
        self._done: dict[int, bytes | None] = {}  # read (None: failed: the writer retries)
        self._held = 0  # bytes claimed by readers and not yet taken
        self._budget = budget
        self._stop = False
        self._cv = threading.Condition()
        self.read = 0  # objects read here (for tests and --debug)
        n = max(0, min(threads, MAX_THREADS, len(self._queue)))
        self._threads = [
            threading.Thread(target=self._run, name=f"pcheckout-lfs{k}", daemon=True)
            for k in range(n)
        ]

    def start(self) -> ReadAhead:
        for t in self._threads:
            t.start()
        return self

    def want(self, batch: Iterable[int]) -> None:
        """A writer took ``batch``: its objects are read next."""
        smudges = self._smudges
        mine = [i for i in batch if i in smudges and smudges[i].size <= SMALL_BLOB]
        if mine:
            with self._cv:
                self._front.extendleft(reversed(mine))
                self._cv.notify_all()

    def take(self, i: int) -> bytes | None:
        """Entry ``i``'s object bytes, once read here; None: the caller reads it."""
        with self._cv:
            if i not in self._claimed:
                self._claimed.add(i)  # nobody began it: the writer's own read is as fast
                return None
            while i not in self._done:
                self._cv.wait()
            data = self._done.pop(i)
            self._held -= self._smudges[i].size
            self._cv.notify_all()
            return data

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        for t in self._threads:
            if t.is_alive():
                t.join()

    def _next(self) -> int | None:
        """The next object to read (the lock held), None when there is none."""
        claimed = self._claimed
        for q in (self._front, self._queue):
            while q:
                i = q.popleft()
                if i not in claimed:
                    return i
        return None

    def _run(self) -> None:
        cv = self._cv
        while True:
            with cv:
                i = None
                while not self._stop:
                    i = self._next()
                    if i is None:
                        return
                    size = self._smudges[i].size
                    if self._held == 0 or self._held + size <= self._budget:
                        break
                    self._front.appendleft(i)  # over budget: wait for the writers
                    i = None
                    cv.wait()
                if i is None:
                    return
                self._claimed.add(i)
                self._held += size
            data = _read(self._smudges[i])
            with cv:
                self._done[i] = data
                self.read += 1
                cv.notify_all()


def _read(smudge: Smudge) -> bytes | None:
    try:
        with open(smudge.path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data if len(data) == smudge.size else None
