"""The real SFTP filesystem (scripts/sshfsmount.py: sshfs against OpenSSH's sftp-server,
through a delay line on loopback): mounted, detected, counted, and checked out onto by both
writers with the same assertions as everywhere else."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psutil
import pytest
from helpers import assert_same_as_git, clone_with_git, git, make_repo, run_cli
from killhelp import kill_after, leftovers, start_cli

from pcheckout.fs.detect import detect

pytestmark = pytest.mark.fuse

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "sshfsmount.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sshfsmount_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sm = _load()
REASON = sm.why_unavailable()
if REASON is not None:
    pytest.skip(f"sshfs tests need sshfs and sftp-server: {REASON}", allow_module_level=True)


@pytest.fixture
def mnt(tmp_path: Path) -> Iterator[Path]:
    """A mount with no added round trip; its requests counted in tmp_path/stats."""
    with sm.mounted(tmp_path / "backing", tmp_path / "mnt", rtt_ms=0.0, stats=tmp_path / "stats"):
        yield tmp_path / "mnt"


#: Every kind of entry a checkout writes, names with bytes that need care on the wire.
TREE: dict[bytes, bytes | tuple[str, bytes]] = {
    b"plain.txt": b"hello\n",
    b"empty": b"",
    b"new\nline": b"newline in name\n",
    b"tab\there": b"tab\n",
    b"back\\slash": b"backslash\n",
    b"\xff\xfe-not-utf8": b"latin\n",
    b"sp ace/in dir/f i l e": b"spaces\n",
    b"run.sh": ("x", b"#!/bin/sh\necho hi\n"),
    b"link-to-file": ("l", b"plain.txt"),
    b"link-up": ("l", b"../outside"),
    b"absolute": ("l", b"/etc/hostname"),
    **{b"d%d/s%d/f%02d.c" % (i % 4, i % 3, i): b"int f%d;\n" % i * (i + 1) for i in range(60)},
    b"big.bin": bytes(range(256)) * 8192,  # 2 MiB: streamed by the engine, several WRITEs
}


def test_a_mount_is_sshfs_and_a_network_filesystem(mnt: Path, tmp_path: Path) -> None:
    fs = detect(mnt)
    assert (fs.fstype, fs.kind, fs.latency_bound) == ("fuse.sshfs", "network", True)
    assert fs.source == f"127.0.0.1:{tmp_path / 'backing'}"
    (mnt / "f").write_bytes(b"through sftp")
    assert (tmp_path / "backing" / "f").read_bytes() == b"through sftp"


def test_requests_are_counted_by_type(mnt: Path, tmp_path: Path) -> None:
    before = sm.read_stats(tmp_path / "stats")
    fd = os.open(mnt / "new", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"x" * 100)
    os.close(fd)
    after = sm.read_stats(tmp_path / "stats")
    deadline = time.monotonic() + 5
    while after.get("close", 0) == before.get("close", 0) and time.monotonic() < deadline:
        time.sleep(0.01)  # the kernel sends RELEASE (sshfs: CLOSE) in the background
        after = sm.read_stats(tmp_path / "stats")
    delta = {k: after[k] - before.get(k, 0) for k in after}
    assert delta["open"] == 1 and delta["write"] == 1 and delta["close"] == 1
    assert delta["bytes_sent"] > 100 and after["connections"] == 1
    assert sm.requests(after) - sm.requests(before) >= 3


def test_the_round_trip_is_paid(tmp_path: Path) -> None:
    with sm.mounted(tmp_path / "b", tmp_path / "m", rtt_ms=20.0) as m:
        t0 = time.perf_counter()
        assert not (m / "not-there").exists()  # one LOOKUP, one LSTAT round trip
        assert time.perf_counter() - t0 >= 0.020


@pytest.mark.usefixtures("writer")
def test_checkout_and_switch_are_the_same_as_git(mnt: Path, tmp_path: Path) -> None:
    src = make_repo(tmp_path, TREE)
    (src / "d1").rename(src / "gone")
    (src / "added.txt").write_bytes(b"two\n")
    os.chmod(src / "run.sh", 0o644)
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "two")
    theirs = clone_with_git(src, tmp_path / "theirs", rev="HEAD~1")
    ours = mnt / "ours"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(src), str(ours))
    done = run_cli("checkout", "-C", str(ours), "HEAD~1", "--workers", "8")
    assert done.returncode == 0, done.stderr
    assert_same_as_git(ours, theirs)
    assert leftovers(ours) == [], "a cat-file or writer outlived the checkout"
    git(theirs, "checkout", "-q", "main")
    done = run_cli("checkout", "-C", str(ours), "main", "--workers", "8")
    assert done.returncode == 0, done.stderr
    assert_same_as_git(ours, theirs)
    assert leftovers(ours) == [], "a cat-file or writer outlived the switch"


@pytest.mark.parametrize("n", [200, 1400])
def test_sigkill_part_way_then_rerun_equals_git(mnt: Path, tmp_path: Path, n: int) -> None:
    """Killed after the n-th file is on the server: nothing of it outlives the kill, and
    the re-run ends as git's checkout (the recorded entries proved through sshfs)."""
    files = {b"d%02d/f%04d" % (i % 30, i): b"x%d\n" % i * (1 + i % 50) for i in range(1500)}
    src = make_repo(tmp_path, files)
    theirs = clone_with_git(src, tmp_path / "theirs")
    ours = mnt / "killed"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(src), str(ours))
    proc = start_cli(["checkout", "-C", str(ours), "-q", "--workers", "16"])
    kill_after(proc, ours, n)
    assert leftovers(ours) == [], "a cat-file or writer outlived its killed parent"
    again = run_cli("checkout", "-C", str(ours), "-q")
    assert again.returncode == 0, again.stderr
    assert not (ours / ".git" / "index.lock").exists()
    assert_same_as_git(ours, theirs)
    assert leftovers(ours) == []


def _ours(pattern: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if pattern in " ".join(p.info["cmdline"] or ()):
            found.append(p)
    return found


def test_the_cli_mounts_and_unmounts_and_leaves_no_process(tmp_path: Path) -> None:
    stats = tmp_path / "cli-stats"
    cmd = [sys.executable, str(SCRIPT)]
    done = subprocess.run(
        [*cmd, "mount", tmp_path / "cb", tmp_path / "cm", "--rtt-ms", "0.5", "--stats", stats],
        capture_output=True,
        text=True,
    )
    try:
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        assert sm.is_mounted(tmp_path / "cm")
        (tmp_path / "cm" / "f").write_text("via cli")
        assert (tmp_path / "cb" / "f").read_text() == "via cli"
        assert _ours(str(stats))  # the delay line runs
    finally:
        done = subprocess.run([*cmd, "umount", tmp_path / "cm"], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    assert not sm.is_mounted(tmp_path / "cm")
    deadline = time.monotonic() + 10
    while _ours(str(stats)) and time.monotonic() < deadline:
        time.sleep(0.05)  # the delay line exits once sshfs has closed its connection
    assert not _ours(str(stats))
    assert sm.main(["mount", str(tmp_path / "b2"), str(tmp_path / "m2"), "--rtt-ms", "-1"]) == 1


def test_the_policy_count_and_one_shared_tune_for_every_mount_of_the_export(
    tmp_path: Path,
) -> None:
    """Two mounts of one export, as two hosts of a farm have: ``tune --shared`` on one, and
    a checkout on the other (with a cache of its own) takes that result, and says so."""
    backing = tmp_path / "backing"
    src = make_repo(tmp_path, {b"d%d/f%03d" % (i % 7, i): b"x\n" for i in range(200)})
    with (
        sm.mounted(backing, tmp_path / "m1", rtt_ms=0.0) as m1,
        sm.mounted(backing, tmp_path / "m2", rtt_ms=0.0) as m2,
    ):
        git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(src), str(m1 / "w"))
        policy = json.loads(run_cli("checkout", "-C", str(m2 / "w"), "--dry-run", "--json").stdout)
        assert (policy["workers"], policy["source"], policy["tuned"]) == (16, "policy", None)
        assert "at most 10 requests at a time" in policy["reason"]
        shared = tmp_path / "etc" / "tuned.json"
        quick = ("--max-workers", "4", "--files", "40", "--rounds", "1", "--no-writers")
        done = run_cli("tune", str(m1), *quick, "--shared", str(shared), "--json")
        assert done.returncode == 0, done.stderr
        measured = json.loads(done.stdout)["workers"]
        other_host = {
            "XDG_CACHE_HOME": str(tmp_path / "host2"),
            "PCHECKOUT_SHARED_TUNE": str(shared),
        }
        done = run_cli("checkout", "-C", str(m2 / "w"), "--dry-run", "--json", env=other_host)
        report = json.loads(done.stdout)
        assert (report["workers"], report["source"]) == (measured, "tuned"), report["reason"]
        export = f"127.0.0.1:{backing}"
        assert report["tuned"]["where"] == f"for {export} in {shared}"
        assert report["filesystem"]["mount_point"] == str(m2)
        text = run_cli("detect", str(m2), env=other_host).stdout
        assert f"export: {export}" in text and f"for {export} in {shared}" in text
