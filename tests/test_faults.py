"""Faults: a clear error, nothing lost, no orphan processes, and a re-run finishes.

cat-file faults use a stand-in process (the ``spawn`` seam): a small Python
proxy in front of a real ``git cat-file --batch`` that misbehaves after N
answers (dies, kills git, cuts an answer short, answers garbage or "missing").
Filesystem faults use real kernels' answers: a small tmpfs (ENOSPC), a
read-only bind mount (EROFS), a 300-byte name (ENAMETOOLONG), a low
RLIMIT_NOFILE (EMFILE).  Interrupts send SIGINT / SIGTERM to a CLI subprocess.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from faultkit import (
    FILES,
    HANG_S,
    assert_finishes,
    assert_nothing_partial,
    no_children,
    our_processes,
    standin_spawn,
)
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, git, make_repo

from pcheckout.checkout import IN_PROGRESS, CheckoutOptions, checkout
from pcheckout.errors import CatFileError, MissingObjectError


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path, FILES)


# -- cat-file faults -------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "n"),
    [("die", 3), ("kill", 3), ("truncate", 0), ("truncate", 5), ("garbage", 2)],
)
def test_catfile_fault_once_is_restarted_and_retried(
    tmp_path: Path, repo: Path, mode: str, n: int
) -> None:
    ours = clone_no_checkout(repo, tmp_path / "ours")
    spawn = standin_spawn(tmp_path, mode, n, once=True)
    checkout(CheckoutOptions(directory=ours, workers=2, adapt=False, spawn=spawn))
    assert (tmp_path / f"flag-{mode}-{n}").exists()  # the fault did happen
    assert no_children() == []
    assert_same_as_git(ours, clone_with_git(repo, tmp_path / "theirs"))


@pytest.mark.parametrize(
    ("mode", "n", "stderr"),
    [
        ("die", 2, "simulated crash"),
        ("kill", 2, None),
        ("truncate", 0, "simulated truncation"),
        ("garbage", 1, None),
    ],
)
def test_catfile_fault_every_time_gives_a_clear_error(
    tmp_path: Path, repo: Path, mode: str, n: int, stderr: str | None
) -> None:
    ours = clone_no_checkout(repo, tmp_path / "ours")
    spawn = standin_spawn(tmp_path, mode, n, once=False)
    with pytest.raises(CatFileError) as info:
        checkout(CheckoutOptions(directory=ours, workers=2, adapt=False, spawn=spawn))
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("cat-file of worker ")
    assert "last request: " in msg and "gave up after 2 restarts" in msg
    if stderr:
        assert stderr in msg
    assert no_children() == []
    assert_nothing_partial(ours, FILES)
    assert_finishes(ours, repo, tmp_path)


def test_catfile_fault_with_filters_is_restarted(tmp_path: Path) -> None:
    files: dict[bytes, bytes | tuple[str, bytes]] = {
        b".gitattributes": b"*.txt text eol=crlf\n",
        **{b"d/f%02d.txt" % i: b"line %d\n" % i * 3 for i in range(30)},
        b"link": ("l", b"d/f00.txt"),
    }
    src = make_repo(tmp_path, files)
    ours = clone_no_checkout(src, tmp_path / "ours")
    spawn = standin_spawn(tmp_path, "die", 4, once=True)
    checkout(CheckoutOptions(directory=ours, workers=2, adapt=False, spawn=spawn))
    assert (tmp_path / "flag-die-4").exists()
    assert no_children() == []
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs"))


def test_catfile_says_missing_is_not_retried(tmp_path: Path, repo: Path) -> None:
    ours = clone_no_checkout(repo, tmp_path / "ours")
    spawn = standin_spawn(tmp_path, "missing", 0, once=True)
    with pytest.raises(MissingObjectError) as info:
        checkout(CheckoutOptions(directory=ours, workers=1, adapt=False, spawn=spawn))
    msg = str(info.value)
    oid = git(repo, "rev-parse", "HEAD:0big").decode().strip()
    assert msg == f"object {oid} for 0big is missing from the repository"
    assert no_children() == []
    assert_nothing_partial(ours, FILES)
    assert_finishes(ours, repo, tmp_path)


def test_really_missing_object(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"a": b"a\n", b"b": b"b\n"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    # A local clone hard-links src's loose objects: drop b's from ours.
    oid = git(src, "rev-parse", "HEAD:b").decode().strip()
    (ours / ".git" / "objects" / oid[:2] / oid[2:]).unlink()
    with pytest.raises(MissingObjectError, match=f"^object {oid} for b is missing"):
        checkout(CheckoutOptions(directory=ours, workers=2, adapt=False))
    assert no_children() == []
    assert not (ours / ".git" / "index").exists()


# -- filesystem faults -------------------------------------------------------------
def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("mount needs root")


@pytest.fixture
def mounts() -> Iterator[list[Path]]:
    """Mount points to unmount (lazily, newest first) when the test ends."""
    made: list[Path] = []
    yield made
    for m in reversed(made):
        subprocess.run(["umount", "-l", str(m)], capture_output=True)


def _mount(*args: str) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"mount {' '.join(args)} failed here: {proc.stderr.strip()}")


def test_enospc_stops_with_one_line_and_resumes(tmp_path: Path, mounts: list[Path]) -> None:
    _need_root()
    # 64 files of 16 KiB (1 MiB) that compress to almost nothing in .git.
    files = {b"dir%d/file%02d" % (i % 3, i): (b"%02d" % i) * 8192 for i in range(64)}
    src = make_repo(tmp_path, files)
    small = tmp_path / "small"
    small.mkdir()
    _mount("-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small))
    mounts.append(small)
    ours = small / "ours"  # one pack (not 4 KiB per loose object) leaves room for files
    git(tmp_path, "clone", "-q", "--no-local", "--no-checkout", str(src), str(ours))
    from helpers import run_cli

    t0 = time.monotonic()
    proc = run_cli("checkout", "-C", str(ours), "-j", "4", "--no-adapt", timeout=HANG_S * 6)
    assert time.monotonic() - t0 < HANG_S
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pcheckout: error: cannot write dir")
    assert lines[0].endswith(": No space left on device (ENOSPC)")
    assert not (ours / ".git" / "index").exists()
    assert_nothing_partial(ours, files)
    _mount("-o", "remount,size=64m", str(small))
    proc = run_cli("checkout", "-C", str(ours))
    assert proc.returncode == 0, proc.stderr
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs"))


def test_erofs_work_tree(tmp_path: Path, mounts: list[Path]) -> None:
    _need_root()
    src = make_repo(tmp_path, {b"a/b": b"b\n", b"c": b"c\n"})
    # The git dir stays writable (the marker goes there); the work tree is a
    # read-only bind mount.
    work = tmp_path / "work"
    git(
        tmp_path,
        "clone",
        "-q",
        "--no-checkout",
        "--separate-git-dir",
        str(tmp_path / "gitdir"),
        str(src),
        str(work),
    )
    os.unlink(work / ".git")
    backing = tmp_path / "backing"
    work.rename(backing)
    work.mkdir()
    _mount("--bind", str(backing), str(work))
    mounts.append(work)
    _mount("-o", "remount,bind,ro", str(work))
    from helpers import run_cli

    proc = run_cli(
        "checkout",
        "-C",
        str(work),
        env={"GIT_DIR": str(tmp_path / "gitdir"), "GIT_WORK_TREE": str(work)},
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("pcheckout: error: cannot write ")
    assert "Read-only file system (EROFS)" in proc.stderr
    assert os.listdir(backing) == []


def test_erofs_whole_repository(tmp_path: Path, mounts: list[Path]) -> None:
    _need_root()
    src = make_repo(tmp_path, {b"a": b"a\n"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    _mount("--bind", str(ours), str(ours))
    mounts.append(ours)
    _mount("-o", "remount,bind,ro", str(ours))
    from helpers import run_cli

    proc = run_cli("checkout", "-C", str(ours))
    assert proc.returncode == 1, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Read-only file system (EROFS)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_enametoolong(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"ok": b"ok\n"})
    blob = git(src, "hash-object", "-w", "--stdin", input=b"long\n").decode().strip()
    ok = git(src, "rev-parse", "HEAD:ok").decode().strip()
    long = "n" * 300
    tree = git(src, "mktree", input=f"100644 blob {blob}\t{long}\n100644 blob {ok}\tok\n".encode())
    commit = git(src, "commit-tree", "-m", "long", tree.decode().strip()).decode().strip()
    git(src, "update-ref", "refs/heads/main", commit)
    ours = clone_no_checkout(src, tmp_path / "ours")
    from helpers import run_cli

    proc = run_cli("checkout", "-C", str(ours))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == (
        f"pcheckout: error: cannot write {long}: File name too long (ENAMETOOLONG)\n"
    )
    assert not (ours / ".git" / "index").exists()
    assert no_children() == []


def _limit_files(n: int) -> Any:
    def pre() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return pre


@pytest.mark.parametrize("writer", ["auto", "pcheckout"])
def test_low_open_file_limit_means_fewer_workers(tmp_path: Path, writer: str) -> None:
    # 32 workers need ~130 descriptors; under a limit of 48 the engine starts
    # as many as fit (measured: without that cap this tree fails with EMFILE), and
    # starts no more cat-files ahead of them than fit either.
    files = {b"d%d/f%04d" % (i % 17, i): b"%d\n" % i for i in range(2000)}
    src = make_repo(tmp_path, files)
    ours = clone_no_checkout(src, tmp_path / "ours")
    args = ["checkout", "-C", str(ours), "-j", "32", "--no-adapt", "--writer", writer]
    proc = subprocess.run(
        [sys.executable, "-m", "pcheckout", *args],
        capture_output=True,
        text=True,
        preexec_fn=_limit_files(48),
        timeout=HANG_S * 6,
    )
    assert proc.returncode == 0, proc.stderr
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs"))


def test_open_file_limit_too_low_for_one_worker(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"a": b"a\n", b"b": b"b\n"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    failures = []
    for limit in range(6, 15):  # from "nothing fits" up to the first that works
        proc = subprocess.run(
            [sys.executable, "-m", "pcheckout", "checkout", "-C", str(ours), "-j", "4"],
            capture_output=True,
            text=True,
            preexec_fn=_limit_files(limit),
            timeout=HANG_S * 6,
        )
        if proc.returncode == 0:
            break
        failures.append(proc)
        assert proc.returncode == 1, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Too many open files" in proc.stderr
        assert not (ours / ".git" / "index").exists()
    assert failures, "no limit was low enough to fail"
    # Which step runs out first depends on how many pipes each git call needs;
    # test_catfile covers the cat-file start's advice.
    assert all(
        "cannot run git" in p.stderr or "cannot start git cat-file" in p.stderr for p in failures
    )


# -- interrupts ----------------------------------------------------------------------
def _writers(pid: int) -> list[psutil.Process]:
    """The CLI's running children: its cat-files, or git's checkout and its workers."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [k for k in kids if _alive(k)]


def _alive(kid: psutil.Process) -> bool:
    try:
        return kid.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _a_file_written(root: Path) -> bool:
    with os.scandir(root) as top:
        dirs = [e.path for e in top if e.name != ".git" and e.is_dir(follow_symlinks=False)]
    for d in dirs:
        with os.scandir(d) as entries:
            if any(e.is_file(follow_symlinks=False) for e in entries):
                return True
    return False


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_promptly_and_a_rerun_finishes(
    tmp_path: Path, big_repo: tuple[Path, dict[bytes, bytes]], signum: int
) -> None:
    src, files = big_repo
    for _attempt in range(3):  # the checkout may win the race to the signal: try again
        ours = src.parent / f"ours-{signum}-{_attempt}"
        git(src.parent, "clone", "-q", "--no-checkout", str(src), str(ours))
        cli = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pcheckout",
                "checkout",
                "-C",
                str(ours),
                "-j",
                "2",
                "--no-adapt",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + HANG_S
        kids: list[psutil.Process] = []
        while cli.poll() is None and not (kids and _a_file_written(ours)):
            # The engine makes the directories while its cat-files start: wait
            # for a file, and for a writer still running.
            assert time.monotonic() < deadline
            time.sleep(0.002)
            kids = _writers(cli.pid)
        cli.send_signal(signum)
        sent = time.monotonic()
        out, err = cli.communicate(timeout=HANG_S)
        stopped = time.monotonic() - sent
        if cli.returncode == 0 or (ours / ".git" / "index").exists():
            # finished before the signal arrived, or it arrived once the index was in
            # place (a loaded machine can hold this loop back): not what is tested here
            continue
        break
    else:
        pytest.skip("the checkout finished before the signal three times")
    assert cli.returncode == 128 + signum, err
    assert stopped < HANG_S
    name = signal.Signals(signum).name
    assert err == (
        f"pcheckout: error: interrupted by {name}; to finish, run: pcheckout checkout -C {ours}\n"
    )
    assert kids, "no writer was running when the signal was sent"
    assert not [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]
    assert our_processes(ours) == []
    assert not (ours / ".git" / "index").exists()
    assert (ours / ".git" / IN_PROGRESS).exists()
    assert_nothing_partial(ours, files)
    on_disk = [p for p in files if os.path.exists(os.fsencode(ours) + b"/" + p)]
    assert 0 < len(on_disk) < len(files)
    # What a SIGKILL could leave: a file cut short, and one of the right size
    # with the wrong bytes.  Resume must rewrite both and keep the rest.
    cut, wrong = on_disk[0], on_disk[-1]
    with open(os.fsencode(ours) + b"/" + cut, "r+b") as f:
        f.truncate(3)
    with open(os.fsencode(ours) + b"/" + wrong, "r+b") as f:
        f.write(b"Y")
    result = checkout(CheckoutOptions(directory=ours))
    assert result.mode == "resume"
    assert result.kept == len(on_disk) - 2
    assert result.written == len(files) - result.kept
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs"))
