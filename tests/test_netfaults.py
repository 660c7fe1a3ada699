"""Network filesystem errors, injected by the latency filesystem (--fault-*): ESTALE
and EIO are retried for the one file (a streamed file is asked of git again), then
reported with its path."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from faultkit import assert_nothing_partial, our_processes
from helpers import assert_same_as_git, clone_with_git, git, make_repo, run_cli
from killhelp import fuse_unavailable, latencyfs_module

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.fs.retry import MAX_ATTEMPTS
from pcheckout.write import forked

pytestmark = pytest.mark.fuse

FILES: dict[bytes, bytes | tuple[str, bytes]] = {
    **{b"d%d/f%02d" % (i % 3, i): b"%d\n" % i * 20 for i in range(30)},
    b"d1/flaky.txt": b"flaky\n",
    b"flaky-dir/inside": b"in\n",
    b"flaky-link": ("l", b"d1/flaky.txt"),
}


@pytest.fixture(scope="module")
def lfs() -> object:
    module = latencyfs_module()
    if module is None:
        pytest.skip(f"latencyfs needs FUSE: {fuse_unavailable()}")
    return module


@contextmanager
def mounted(lfs: object, tmp_path: Path, name: str, **faults: object) -> Iterator[Path]:
    backing, mnt = tmp_path / f"{name}-backing", tmp_path / f"{name}-mnt"
    lfs.mount(backing, mnt, latency_ms=0.0, **faults)  # type: ignore[attr-defined]
    try:
        yield mnt
    finally:
        lfs.umount(mnt)  # type: ignore[attr-defined]


def _clone_onto(src: Path, work: Path) -> None:
    # --shared: the objects stay off the mount (only the work tree is on it).
    git(src.parent, "clone", "-q", "--shared", "--no-checkout", str(src), str(work))


@pytest.mark.parametrize(
    ("errno_name", "ops", "times"),
    [
        ("ESTALE", "create", 3),
        ("EIO", "create", 2),
        ("EIO", "flush", 2),
        ("EIO", "write", 2),
        ("ESTALE", "mkdir,symlink", 3),
    ],
)
def test_transient_errors_are_retried_for_the_one_file(
    lfs: object, tmp_path: Path, errno_name: str, ops: str, times: int
) -> None:
    src = make_repo(tmp_path, FILES)
    theirs = clone_with_git(src, tmp_path / "theirs")
    with mounted(lfs, tmp_path, "m", fault_errno=errno_name, fault_ops=ops,
                 fault_match="flaky", fault_times=times) as mnt:  # fmt: skip
        ours = mnt / "ours"
        _clone_onto(src, ours)
        proc = run_cli("checkout", "-C", str(ours), "-j", "2")
        assert proc.returncode == 0, proc.stderr
        assert_same_as_git(ours, theirs)


def test_a_persistent_error_is_reported_with_the_path_then_a_rerun_finishes(
    lfs: object, tmp_path: Path
) -> None:
    src = make_repo(tmp_path, FILES)
    theirs = clone_with_git(src, tmp_path / "theirs")
    backing = tmp_path / "p-backing"
    with mounted(lfs, tmp_path, "p", fault_errno="EIO", fault_ops="create",
                 fault_match="flaky.txt") as mnt:  # fmt: skip
        ours = mnt / "ours"
        _clone_onto(src, ours)
        proc = run_cli("checkout", "-C", str(ours), "-j", "2")
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr == (
            "pcheckout: error: cannot write d1/flaky.txt: Input/output error (EIO); "
            f"gave up after {MAX_ATTEMPTS} attempts\n"
        )
        assert not (ours / ".git" / "index").exists()
        assert not (ours / ".git" / "index.lock").exists()
    # The server is well again: the same command finishes the checkout.
    lfs.mount(backing, tmp_path / "p-mnt", latency_ms=0.0)  # type: ignore[attr-defined]
    try:
        ours = tmp_path / "p-mnt" / "ours"
        proc = run_cli("checkout", "-C", str(ours), "-j", "2")
        assert proc.returncode == 0, proc.stderr
        assert os.path.exists(ours / "d1" / "flaky.txt")
        assert_same_as_git(ours, theirs)
    finally:
        lfs.umount(tmp_path / "p-mnt")  # type: ignore[attr-defined]


# -- streamed files: larger than catfile.SMALL_BLOB, written from cat-file's stream --------
#: 2 MiB each: streamed in 64 KiB pieces.  "d1/flaky-big.bin" sorts among the small files of
#: d1, so a worker has later entries asked for in its pipeline while the big one is retried.
BIG = bytes(range(256)) * (8 * 1024)
STREAMED: dict[bytes, bytes | tuple[str, bytes]] = {
    **FILES,
    b"d1/flaky-big.bin": BIG,
    b"d1/g-after": b"after\n" * 50,
    b"other-big.bin": BIG[::-1],
}
#: A filter driver: git converts the entry, and a converted answer over 1 MiB is streamed too.
FILTER = {
    f"filter.up.{way}": f'{sys.executable} -c "import sys; '
    f'sys.stdout.buffer.write(sys.stdin.buffer.read().{case}())"'
    for way, case in (("smudge", "upper"), ("clean", "lower"))
}
LOWER = b"streamed through a filter\n" * 90_000  # 2.3 MiB, all lower case


@pytest.mark.parametrize(
    ("errno_name", "ops", "times"),
    [
        ("EIO", "write", 2),  # the first piece fails: the rest of the stream is dropped
        ("EIO", "flush", 3),  # the close fails, after the whole stream was written
        ("ESTALE", "create", 3),  # no stream consumed by a create that failed
        ("EAGAIN", "write,flush", 3),
        ("ETIMEDOUT", "write", 1),
    ],
)
def test_a_streamed_file_is_asked_for_again_and_written_again(
    lfs: object, tmp_path: Path, errno_name: str, ops: str, times: int
) -> None:
    src = make_repo(tmp_path, STREAMED)
    theirs = clone_with_git(src, tmp_path / "theirs")
    with mounted(lfs, tmp_path, "s", fault_errno=errno_name, fault_ops=ops,
                 fault_match="flaky-big", fault_times=times) as mnt:  # fmt: skip
        ours = mnt / "ours"
        _clone_onto(src, ours)
        proc = run_cli("checkout", "-C", str(ours), "-j", "2")
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        assert_same_as_git(ours, theirs)
        assert our_processes(ours) == []


def test_a_streamed_file_through_git_filters_is_asked_for_again(
    lfs: object, tmp_path: Path
) -> None:
    files = {**STREAMED, b".gitattributes": b"*.up filter=up\n", b"d1/flaky-big.up": LOWER}
    src = make_repo(tmp_path, files, config=FILTER)
    theirs = clone_with_git(src, tmp_path / "theirs", config=FILTER)
    with mounted(lfs, tmp_path, "f", fault_errno="EIO", fault_ops="write,flush",
                 fault_match="flaky-big.up", fault_times=3) as mnt:  # fmt: skip
        ours = mnt / "ours"
        _clone_onto(src, ours)
        for key, value in FILTER.items():
            git(ours, "config", key, value)
        proc = run_cli("checkout", "-C", str(ours), "-j", "2")
        assert proc.returncode == 0, proc.stderr
        assert (ours / "d1" / "flaky-big.up").read_bytes() == LOWER.upper()
        assert_same_as_git(ours, theirs)


def test_forked_writers_ask_for_a_streamed_file_again(
    lfs: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forked, "MIN_ENTRIES_PER_PROCESS", 5)
    monkeypatch.setattr(forked, "MIN_ENTRIES", 10)
    src = make_repo(tmp_path, STREAMED)
    theirs = clone_with_git(src, tmp_path / "theirs")
    with mounted(lfs, tmp_path, "k", fault_errno="ESTALE", fault_ops="write",
                 fault_match="flaky-big", fault_times=2) as mnt:  # fmt: skip
        ours = mnt / "ours"
        _clone_onto(src, ours)
        result = checkout(CheckoutOptions(directory=ours, workers=2, processes=True))
        assert result.processes
        assert_same_as_git(ours, theirs)


def test_a_streamed_file_that_keeps_failing_is_reported_and_never_left_cut_short(
    lfs: object, tmp_path: Path
) -> None:
    src = make_repo(tmp_path, STREAMED)
    theirs = clone_with_git(src, tmp_path / "theirs")
    backing = tmp_path / "q-backing"
    with mounted(lfs, tmp_path, "q", fault_errno="EIO", fault_ops="write",
                 fault_match="flaky-big") as mnt:  # fmt: skip
        ours = mnt / "ours"
        _clone_onto(src, ours)
        proc = run_cli("checkout", "-C", str(ours), "-j", "2")
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr == (
            "pcheckout: error: cannot write d1/flaky-big.bin: Input/output error (EIO); "
            f"gave up after {MAX_ATTEMPTS} attempts\n"
        )
        assert not (ours / "d1" / "flaky-big.bin").exists()
        assert_nothing_partial(ours, STREAMED)
        assert our_processes(ours) == []
    lfs.mount(backing, tmp_path / "q-mnt", latency_ms=0.0)  # type: ignore[attr-defined]
    try:
        ours = tmp_path / "q-mnt" / "ours"
        proc = run_cli("checkout", "-C", str(ours), "-j", "2")
        assert proc.returncode == 0, proc.stderr
        assert_same_as_git(ours, theirs)
    finally:
        lfs.umount(tmp_path / "q-mnt")  # type: ignore[attr-defined]
