"""Network filesystem errors, injected by the latency filesystem (--fault-*): ESTALE
and EIO are retried for the one file, then reported with its path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import assert_same_as_git, clone_with_git, git, make_repo, run_cli
from killhelp import fuse_unavailable, latencyfs_module

from pcheckout.fs.retry import MAX_ATTEMPTS

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
