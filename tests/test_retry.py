"""Bounded retries on network filesystem errors (fs/retry.py); the filesystem
side (a mount that answers ESTALE or EIO) is in test_netfaults.py."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pcheckout.errors import WriteError
from pcheckout.fs import files, parallel, retry
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


# -- streamed files (fs/files.py): a fresh stream per attempt, the failed one read to its end
def _stream(pieces: list[bytes], read: list[int]) -> Callable[[Callable[[bytes], None]], None]:
    def fill(sink: Callable[[bytes], None]) -> None:
        for piece in pieces:
            read[0] += 1
            sink(piece)

    return fill


def test_a_streamed_file_is_written_again_from_a_fresh_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retry, "BACKOFF_S", (0.0,))
    real_write = files.write_all
    failures = [errno.EIO]

    def write_all(fd: int, data: bytes) -> None:
        if failures:
            raise OSError(failures.pop(), "injected")
        real_write(fd, data)

    monkeypatch.setattr(files, "write_all", write_all)
    pieces = [b"%d" % i * 1000 for i in range(10)]
    first, fresh = [0], [0]
    asked: list[int] = []

    def again() -> Callable[[Callable[[bytes], None]], None]:
        asked.append(1)
        return _stream(pieces, fresh)

    dest = files.Destination(os.fsencode(tmp_path))
    packed = dest.write_file(b"d/big", 0o100644, None, _stream(pieces, first), again)
    # The failed stream was read to its end (its source stays in step), one fresh one asked.
    assert first == [10] and fresh == [10] and asked == [1]
    assert (tmp_path / "d" / "big").read_bytes() == b"".join(pieces)
    assert files.unpack_stat(packed).size == len(b"".join(pieces))


def test_a_failed_create_leaves_the_first_stream_for_the_next_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retry, "BACKOFF_S", (0.0,))
    real_open = os.open
    failures = [errno.ESTALE]

    def fake_open(path: bytes, flags: int, mode: int = 0o777) -> int:
        if failures and path.endswith(b"big"):
            raise OSError(failures.pop(), "injected")
        return real_open(path, flags, mode)

    monkeypatch.setattr(files.os, "open", fake_open)
    first = [0]

    def again() -> Callable[[Callable[[bytes], None]], None]:
        raise AssertionError("the first stream was never read")

    dest = files.Destination(os.fsencode(tmp_path))
    dest.write_file(b"big", 0o100644, None, _stream([b"a", b"b"], first), again)
    assert first == [2] and (tmp_path / "big").read_bytes() == b"ab"


def test_a_streamed_file_that_keeps_failing_is_removed_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retry, "BACKOFF_S", (0.0,))
    real_write = files.write_all

    def write_all(fd: int, data: bytes) -> None:
        real_write(fd, data[:1])  # something reaches the file, then the error
        raise OSError(errno.ESTALE, "injected")

    monkeypatch.setattr(files, "write_all", write_all)
    streams: list[list[int]] = []

    def fill() -> Callable[[Callable[[bytes], None]], None]:
        streams.append([0])
        return _stream([b"xy", b"z"], streams[-1])

    dest = files.Destination(os.fsencode(tmp_path))
    with pytest.raises(WriteError) as info:
        dest.write_file(b"big", 0o100644, None, fill(), fill)
    assert str(info.value) == (
        f"cannot write big: injected (ESTALE); gave up after {MAX_ATTEMPTS} attempts"
    )
    assert streams == [[2]] * MAX_ATTEMPTS
    assert not (tmp_path / "big").exists()


def test_other_errors_stop_a_stream_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def write_all(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "injected")

    monkeypatch.setattr(files, "write_all", write_all)
    first = [0]
    dest = files.Destination(os.fsencode(tmp_path))
    with pytest.raises(WriteError, match=r"^cannot write big: injected \(ENOSPC\)$"):
        dest.write_file(b"big", 0o100644, None, _stream([b"a", b"b"], first), lambda: 1 / 0)  # type: ignore[arg-type,return-value]
    assert first == [1] and not (tmp_path / "big").exists()


# -- a resume's lstats (fs/parallel.py): in the calling thread while they come from caches
def test_lstats_answered_fast_are_all_taken_in_this_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "fast" as a loaded machine answers too (CI once took longer than 50 us an lstat on
    # tmpfs, while two test runs shared its two CPUs): what is tested is the rest
    monkeypatch.setattr(parallel, "CACHED_LSTAT_S", 1.0)
    names = [b"f%03d" % i for i in range(300)]
    for name in names[:-1]:
        (tmp_path / name.decode()).write_bytes(b"x")
    root = os.fsencode(tmp_path)
    found = parallel.lstat_while_cached(root, names)
    assert len(found) == 300 and found[-1] is None
    assert [st is not None and st.st_size == 1 for st in found[:-1]] == [True] * 299


def test_slow_lstats_stop_the_sequential_part_after_one_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parallel, "CACHED_LSTAT_S", 0.0)  # every chunk counts as slow
    names = [b"f%03d" % i for i in range(300)]
    for name in names:
        (tmp_path / name.decode()).write_bytes(b"%d" % len(name))
    root = os.fsencode(tmp_path)
    assert len(parallel.lstat_while_cached(root, names)) == parallel.CACHED_CHUNK
    both = parallel.lstat_many_or_none(root, names, 8)  # the rest in threads, in order
    assert [st.st_ino if st else None for st in both] == [
        os.lstat(tmp_path / n.decode()).st_ino for n in names
    ]
