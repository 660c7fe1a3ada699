"""Bounded retries of one file's operation on network filesystem errors.

On NFS and other network filesystems some errors are the network's, not the
file's, and a second attempt usually succeeds:

* ``ESTALE``: a file handle the client cached is no longer valid on the
  server (the directory was replaced, the server restarted without stable
  handles).  Linux retries a path walk once itself (``LOOKUP_REVAL``); a
  handle that goes stale between the lookup and the call still surfaces.
* ``EIO``, ``ETIMEDOUT``: a ``soft`` mount gave up on the server after
  ``retrans`` tries (``ETIMEDOUT`` with ``softerr``), nfs(5).
* ``EINTR``, ``EAGAIN``: an ``intr`` mount or a FUSE server interrupted the
  call.  (Python already retries ``EINTR`` where a signal handler returns.)

:func:`retrying` runs the whole operation for one file again -- create, write,
close, stat; a partly written file is removed by the operation first -- a
bounded number of times, then raises the last error with the attempts
counted, so the user sees the path and the errno once, not a hang.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: errno values worth another attempt (see the module docstring).
RETRY_ERRNOS = frozenset({errno.ESTALE, errno.EIO, errno.ETIMEDOUT, errno.EINTR, errno.EAGAIN})
#: Attempts per file, the first included.  Each attempt of a soft NFS mount
#: has already waited out ``timeo`` x ``retrans`` (nfs(5): 60 s x 2 for TCP)
#: before it fails, so a few attempts are patience enough; a stale handle
#: clears on the first retry (the client looks the name up again).
MAX_ATTEMPTS = 4
#: Pause before attempt 2, 3, 4: growing, and short next to a soft mount's own
#: timeout; long enough for a FUSE or NFS server restart to finish.
BACKOFF_S = (0.01, 0.1, 0.5)


class GaveUp(OSError):
    """The last error after ``attempts`` tries (errno and strerror of it)."""

    def __init__(self, last: OSError, attempts: int) -> None:
        super().__init__(last.errno, last.strerror, last.filename)
        self.last = last
        self.attempts = attempts


def retryable(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and not isinstance(exc, GaveUp) and exc.errno in RETRY_ERRNOS


def retrying(
    call: Callable[[int], T],
    *,
    attempts: int = MAX_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
    retry_on: Callable[[BaseException], bool] = retryable,
) -> T:
    """``call(attempt)`` (attempt 0, 1, ...) until it returns; a retryable
    error makes it run again after a pause, at most ``attempts`` times in all,
    then :class:`GaveUp` is raised.  Other exceptions pass through at once."""
    for attempt in range(attempts):
        try:
            return call(attempt)
        except OSError as exc:
            if not retry_on(exc):
                raise
            if attempt + 1 >= attempts:
                raise GaveUp(exc, attempts) from exc
            sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
    raise AssertionError("unreachable")  # pragma: no cover - attempts >= 1


__all__ = ["BACKOFF_S", "MAX_ATTEMPTS", "RETRY_ERRNOS", "GaveUp", "retryable", "retrying"]
