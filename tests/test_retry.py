"""Bounded retries on network filesystem errors (fs/retry.py); the filesystem
side (a mount that answers ESTALE or EIO) is in test_netfaults.py."""

from __future__ import annotations

import errno

import pytest

from pcheckout.errors import WriteError
from pcheckout.fs.retry import MAX_ATTEMPTS, GaveUp, retrying


def _flaky(failures: list[int]) -> tuple[list[int], object]:
    calls: list[int] = []

    def call(attempt: int) -> str:
        calls.append(attempt)
        if failures:
            raise OSError(failures.pop(0), "boom")
        return "ok"

    return calls, call


@pytest.mark.parametrize(
    "code", [errno.ESTALE, errno.EIO, errno.EINTR, errno.EAGAIN, errno.ETIMEDOUT]
)
def test_transient_errors_are_retried(code: int) -> None:
    slept: list[float] = []
    calls, call = _flaky([code, code])
    assert retrying(call, sleep=slept.append) == "ok"  # type: ignore[arg-type]
    assert calls == [0, 1, 2] and len(slept) == 2 and slept[0] < slept[1]


def test_other_errors_pass_at_once() -> None:
    calls, call = _flaky([errno.ENOSPC])
    with pytest.raises(OSError) as info:
        retrying(call, sleep=lambda s: None)  # type: ignore[arg-type]
    assert info.value.errno == errno.ENOSPC and not isinstance(info.value, GaveUp)
    assert calls == [0]


def test_gives_up_after_the_bound_and_says_so() -> None:
    calls, call = _flaky([errno.ESTALE] * 10)
    with pytest.raises(GaveUp) as info:
        retrying(call, sleep=lambda s: None)  # type: ignore[arg-type]
    assert len(calls) == MAX_ATTEMPTS and info.value.errno == errno.ESTALE
    msg = str(WriteError(b"d/f", info.value))
    assert msg == (
        f"cannot write d/f: {info.value.strerror} (ESTALE); gave up after {MAX_ATTEMPTS} attempts"
    )
