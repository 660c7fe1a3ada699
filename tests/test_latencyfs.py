"""latencyfs (scripts/latencyfs.py): a real FUSE mount in tmp_path, checked end to end."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.fuse

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "latencyfs.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("latencyfs_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lfs = _load()


def _why_unavailable() -> str | None:
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    for tool in ("fusermount3", "make", "cc", "pkg-config", "git"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    probe = subprocess.run(["pkg-config", "--exists", "fuse3"], check=False)
    if probe.returncode != 0:
        return "libfuse3 headers are missing (pkg-config fuse3; Debian: libfuse3-dev)"
    return None


REASON = _why_unavailable()
if REASON is not None:
    pytest.skip(f"latencyfs needs FUSE: {REASON}", allow_module_level=True)


@pytest.fixture(scope="module")
def binary() -> Path:
    return lfs.build()


@contextlib.contextmanager
def _mount(tmp_path: Path, name: str, **kw: object) -> Iterator[tuple[Path, Path]]:
    backing, mnt = tmp_path / f"{name}-backing", tmp_path / f"{name}-mnt"
    lfs.mount(backing, mnt, **kw)
    try:
        yield backing, mnt
    finally:
        lfs.umount(mnt)


@pytest.fixture
def fs(binary: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(backing, mountpoint) of a 0 ms mount with NFS-like caching."""
    with _mount(tmp_path, "fs", latency_ms=0.0) as pair:
        yield pair


def test_mount_is_a_latencyfs(fs: tuple[Path, Path]) -> None:
    _, mnt = fs
    assert lfs.is_mounted(mnt)
    assert os.statvfs(mnt).f_bsize > 0


def test_files_dirs_symlinks_exec_bits_rename(fs: tuple[Path, Path]) -> None:
    backing, mnt = fs
    (mnt / "a" / "b").mkdir(parents=True)
    (mnt / "a" / "b" / "f.txt").write_bytes(b"hello\n")
    (mnt / "a" / "run.sh").write_text("#!/bin/sh\necho ok\n")
    os.chmod(mnt / "a" / "run.sh", 0o755)
    os.symlink("b/f.txt", mnt / "a" / "link")

    assert (mnt / "a" / "link").read_bytes() == b"hello\n"
    assert os.readlink(mnt / "a" / "link") == "b/f.txt"
    assert stat.S_ISLNK(os.lstat(mnt / "a" / "link").st_mode)
    assert stat.S_IMODE(os.stat(mnt / "a" / "run.sh").st_mode) == 0o755
    assert subprocess.run([mnt / "a" / "run.sh"], capture_output=True).stdout == b"ok\n"
    assert sorted(os.listdir(mnt / "a")) == ["b", "link", "run.sh"]

    os.rename(mnt / "a" / "b" / "f.txt", mnt / "a" / "moved.txt")
    (mnt / "a" / "other").write_bytes(b"old")
    os.replace(mnt / "a" / "moved.txt", mnt / "a" / "other")  # over an existing file
    assert (mnt / "a" / "other").read_bytes() == b"hello\n"
    os.rmdir(mnt / "a" / "b")
    os.unlink(mnt / "a" / "link")
    assert sorted(os.listdir(mnt / "a")) == ["other", "run.sh"]

    # everything really landed in the backing directory
    assert (backing / "a" / "other").read_bytes() == b"hello\n"
    assert os.stat(backing / "a" / "run.sh").st_mode & 0o111


def test_excl_nofollow_fsync_utimens_link(fs: tuple[Path, Path]) -> None:
    _, mnt = fs
    path = mnt / "x"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, b"data")
        os.fsync(fd)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    with pytest.raises(FileExistsError):
        os.open(path, flags, 0o644)

    os.symlink("x", mnt / "sym")
    with pytest.raises(OSError) as info:
        os.open(mnt / "sym", os.O_RDONLY | os.O_NOFOLLOW)
    assert info.value.errno == 40  # ELOOP

    os.utime(path, ns=(1_000_000_123, 2_000_000_456))
    assert os.stat(path).st_mtime_ns == 2_000_000_456
    os.utime(mnt / "sym", ns=(5_000_000_000, 6_000_000_000), follow_symlinks=False)
    assert os.lstat(mnt / "sym").st_mtime_ns == 6_000_000_000

    os.truncate(path, 2)
    assert path.read_bytes() == b"da"
    os.link(path, mnt / "hard")
    assert os.stat(mnt / "hard").st_nlink == 2
    dfd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _git(*args: str | Path, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd),
    }  # fmt: skip
    done = subprocess.run(
        ["git", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_git_clone_and_checkout_are_clean(fs: tuple[Path, Path], tmp_path: Path) -> None:
    _, mnt = fs
    src = tmp_path / "src"
    src.mkdir()
    _git("init", "-q", "-b", "main", cwd=src)
    for i in range(30):
        p = src / f"d{i % 4}" / f"sub{i % 3}" / f"f{i}.c"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"int f{i};\n" * (i + 1))
    (src / "tool.sh").write_text("#!/bin/sh\n")
    os.chmod(src / "tool.sh", 0o755)
    os.symlink("d0/sub0/f0.c", src / "link.c")
    _git("add", "-A", cwd=src)
    _git("commit", "-q", "-m", "one", cwd=src)
    _git("checkout", "-q", "-b", "two", cwd=src)
    shutil.rmtree(src / "d1")
    (src / "new.txt").write_text("new\n")
    _git("add", "-A", cwd=src)
    _git("commit", "-q", "-m", "two", cwd=src)

    _git("clone", "-q", "--no-local", "-b", "main", src, mnt / "clone", cwd=tmp_path)
    dest = mnt / "clone"
    assert _git("status", "--porcelain", cwd=dest) == ""
    assert os.readlink(dest / "link.c") == "d0/sub0/f0.c"
    assert os.stat(dest / "tool.sh").st_mode & 0o111
    _git("checkout", "-q", "two", cwd=dest)
    assert _git("status", "--porcelain", cwd=dest) == ""
    assert not (dest / "d1").exists()
    assert (dest / "new.txt").read_text() == "new\n"
    _git("checkout", "-q", "main", cwd=dest)
    assert _git("status", "--porcelain", "--ignored", cwd=dest) == ""
    assert (dest / "d1" / "sub1" / "f1.c").read_text() == "int f1;\n" * 2


def test_casefold_finds_any_case_and_keeps_the_first(binary: Path, tmp_path: Path) -> None:
    """--casefold: one name in any case, as an SMB share, NTFS or APFS; the spelling is
    the creator's; git init finds it case-insensitive (core.ignorecase=true)."""
    with _mount(tmp_path, "cf", latency_ms=0.0, casefold=True) as (backing, mnt):
        (mnt / "README").write_bytes(b"one\n")
        assert (mnt / "readme").read_bytes() == b"one\n"
        (mnt / "ReadMe").write_bytes(b"two\n")  # the same file, truncated and rewritten
        assert os.listdir(mnt) == ["README"] and (backing / "README").read_bytes() == b"two\n"
        with pytest.raises(FileExistsError):
            os.open(mnt / "readme", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        (mnt / "Dir").mkdir()
        with pytest.raises(FileExistsError):
            (mnt / "dir").mkdir()
        with pytest.raises(FileExistsError):
            os.symlink("x", mnt / "DIR")
        (mnt / "dir" / "f").write_bytes(b"f")
        assert os.listdir(mnt / "Dir") == ["f"] and (mnt / "DIR" / "F").read_bytes() == b"f"
        os.rename(mnt / "DIR" / "F", mnt / "readme")  # over README, under the new spelling
        assert sorted(os.listdir(mnt)) == ["Dir", "readme"]
        os.unlink(mnt / "README")
        os.rmdir(mnt / "dIR")
        assert os.listdir(backing) == []
        _git("init", "-q", mnt / "repo", cwd=tmp_path)
        assert _git("config", "core.ignorecase", cwd=mnt / "repo").strip() == "true"
    _git("init", "-q", tmp_path / "plain", cwd=tmp_path)  # a case-sensitive disk: unset
    got = subprocess.run(["git", "-C", tmp_path / "plain", "config", "core.ignorecase"])
    assert got.returncode == 1


LATENCY_MS = 20.0


def test_metadata_latency_is_paid(binary: Path, tmp_path: Path) -> None:
    with _mount(tmp_path, "slow", latency_ms=LATENCY_MS, data_latency_ms=0.0) as (backing, mnt):
        (backing / "f").write_bytes(b"x")
        os.stat(mnt / "f")  # lookup now, so the open below is an OPEN only
        t0 = time.perf_counter()
        fd = os.open(mnt / "f", os.O_RDONLY)
        opened = time.perf_counter() - t0
        os.close(fd)
        assert opened >= LATENCY_MS / 1000


def test_data_latency_is_paid(binary: Path, tmp_path: Path) -> None:
    with _mount(tmp_path, "slowdata", latency_ms=0.0, data_latency_ms=LATENCY_MS) as (backing, mnt):
        (backing / "f").write_bytes(b"x")
        with open(mnt / "f", "rb", buffering=0) as f:
            t0 = time.perf_counter()
            assert f.read() == b"x"
            assert time.perf_counter() - t0 >= LATENCY_MS / 1000


def test_max_inflight_serialises_requests(binary: Path, tmp_path: Path) -> None:
    """With one server slot, two concurrent 20 ms opens take at least 40 ms."""
    with _mount(tmp_path, "slot", latency_ms=LATENCY_MS, max_inflight=1) as (backing, mnt):
        for name in ("a", "b"):
            (backing / name).write_bytes(b"x")
            os.stat(mnt / name)
        go = threading.Barrier(2)

        def open_close(name: str) -> None:
            go.wait()
            os.close(os.open(mnt / name, os.O_RDONLY))

        threads = [threading.Thread(target=open_close, args=(n,)) for n in ("a", "b")]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # each thread: OPEN + FLUSH + (async) RELEASE, all through one slot
        assert time.perf_counter() - t0 >= 4 * LATENCY_MS / 1000


def test_mounts_given_one_slots_name_share_one_server(binary: Path, tmp_path: Path) -> None:
    """Two mounts, one named slot: an open in each, at once, take two latencies."""
    name = f"/latencyfs-test-{os.getpid()}"
    kw = {"latency_ms": LATENCY_MS, "max_inflight": 1, "slots_name": name}
    try:
        with _mount(tmp_path, "s1", **kw) as (b1, m1), _mount(tmp_path, "s2", **kw) as (b2, m2):
            for backing, mnt in ((b1, m1), (b2, m2)):
                (backing / "f").write_bytes(b"x")
                os.stat(mnt / "f")
            go = threading.Barrier(2)

            def open_close(mnt: Path) -> None:
                go.wait()
                os.close(os.open(mnt / "f", os.O_RDONLY))

            threads = [threading.Thread(target=open_close, args=(m,)) for m in (m1, m2)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            # OPEN + FLUSH each, one slot for both mounts
            assert time.perf_counter() - t0 >= 4 * LATENCY_MS / 1000
    finally:
        lfs.unlink_slots(name)
    assert not os.path.exists(f"/dev/shm/sem.{name[1:]}")


def test_stats_count_requests_and_slot_waits(binary: Path, tmp_path: Path) -> None:
    """--stats: what a checkout's creates cost, per request, as docs/latencyfs.md tables it;
    with one slot, two concurrent opens make one of them wait."""
    stats = tmp_path / "stats"
    with _mount(tmp_path, "st", latency_ms=5.0, max_inflight=1, stats=stats) as (backing, mnt):
        before = lfs.read_stats(stats)
        for i in range(5):
            fd = os.open(mnt / f"f{i}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(fd, b"x")
            os.close(fd)
        (backing / "a").write_bytes(b"x")
        (backing / "b").write_bytes(b"x")
        go = threading.Barrier(2)

        def stat_one(name: str) -> None:
            go.wait()
            os.stat(mnt / name)

        threads = [threading.Thread(target=stat_one, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    after = lfs.read_stats(stats)  # RELEASE is asynchronous: read once unmounted
    delta = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    waits, waited = delta.pop("slot_waits"), delta.pop("slot_wait_ns")
    assert delta.pop("slot_busy_ns") >= 27 * 5_000_000  # every request held the slot 5 ms
    assert delta == {"lookup": 7, "create": 5, "write_buf": 5, "flush": 5, "release": 5}
    assert waits >= 1 and waited >= 1_000_000 * waits  # a slot held 5 ms
    assert lfs.requests(after) - lfs.requests(before) == 27  # the slot counters aside
    with pytest.raises(lfs.LatencyFsError, match="not a latencyfs stats file"):
        lfs.read_stats(backing / "a")


def test_mount_errors_and_idempotent_umount(
    fs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backing, mnt = fs
    with pytest.raises(lfs.LatencyFsError, match="already a mount point"):
        lfs.mount(backing, mnt)
    assert lfs.main(["mount", str(backing), str(tmp_path / "m2"), "--latency-ms", "-1"]) == 1
    assert "non-negative" in capsys.readouterr().err
    lfs.umount(tmp_path / "never-mounted")  # nothing to do


def test_cli_mount_and_umount(binary: Path, tmp_path: Path) -> None:
    backing, mnt = tmp_path / "cb", tmp_path / "cm"
    cmd = ["python3", str(SCRIPT)]
    done = subprocess.run(
        [*cmd, "mount", backing, mnt, "--latency-ms", "0", "--cache-seconds", "0"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    try:
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        assert lfs.is_mounted(mnt)
        (mnt / "f").write_text("via cli")
        assert (backing / "f").read_text() == "via cli"
    finally:
        done = subprocess.run([*cmd, "umount", mnt], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert not lfs.is_mounted(mnt)
