"""Fault-injection helpers shared by the fault and forked-writer tests: a
stand-in cat-file at the spawn seam, checks that nothing partial is left and
that no child process outlives a run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from helpers import assert_same_as_git, clone_with_git

from pcheckout.checkout import IN_PROGRESS, CheckoutOptions, checkout

#: A generous bound that only catches hangs (behaviour is asserted, never speed).
HANG_S = 10.0

#: The stand-in: ``python standin.py MODE N FLAG git-argv...``.  It runs the real
#: git and relays requests; answer number N (0-based) is replaced by the fault.
#: FLAG is a file created with O_EXCL when the fault is due: only the process
#: that creates it misbehaves (``-``: every process does); after that point
#: bytes are relayed as they come.  Answers are counted by the plain protocol
#: (with --filters that count is approximate, fine for "die").  git dies with
#: the stand-in (PR_SET_PDEATHSIG), so a killed stand-in leaves no git behind.
STANDIN = r"""
import ctypes, os, signal, subprocess, sys, threading
mode, n, flag, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def fault_is_mine():
    if flag == "-":
        return True
    try:
        os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False
def die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
git = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       preexec_fn=die_with_parent)
def pump():
    while True:
        data = os.read(0, 65536)
        if not data:
            break
        try:
            git.stdin.write(data)
            git.stdin.flush()
        except OSError:
            break
    try:
        git.stdin.close()
    except OSError:
        pass
threading.Thread(target=pump, daemon=True).start()
out = sys.stdout.buffer
answers = 0
while True:
    header = git.stdout.readline()
    if not header:
        break
    parts = header.split()
    body = git.stdout.read(int(parts[2]) + 1) if len(parts) == 3 else b""
    if answers == n:
        if not fault_is_mine():
            out.write(header + body)
            out.flush()
            while True:
                chunk = git.stdout.read1(65536)
                if not chunk:
                    break
                out.write(chunk)
                out.flush()
            break
        if mode == "die":
            sys.stderr.write("fatal: simulated crash\n")
            sys.stderr.flush()
            os._exit(1)
        if mode == "kill":
            git.kill()
            git.wait()
            continue
        if mode == "truncate":
            out.write(header + body[: len(body) // 2])
            out.flush()
            sys.stderr.write("fatal: simulated truncation\n")
            sys.stderr.flush()
            os._exit(1)
        if mode == "garbage":
            header, body = b"this is not a header\n", b""
        if mode == "missing":
            header, body = parts[0] + b" missing\n", b""
    out.write(header + body)
    out.flush()
    answers += 1
git.wait()
"""

#: Files for the cat-file tests: "0big" sorts first and is larger than
#: catfile.SMALL_BLOB, so it is streamed (a cut answer leaves a partial file).
BIG = bytes(range(256)) * (6 * 1024)  # 1.5 MiB
FILES: dict[bytes, bytes | tuple[str, bytes]] = {
    b"0big": BIG,
    **{b"d%d/f%02d.txt" % (i % 4, i): b"file %d\n" % i * (i + 1) for i in range(40)},
    b"link": ("l", b"d0/f00.txt"),
    b"run.sh": ("x", b"#!/bin/sh\n"),
}


# -- helpers -------------------------------------------------------------------
def no_children() -> list[psutil.Process]:
    deadline = time.monotonic() + HANG_S
    while True:
        kids = [
            p
            for p in psutil.Process().children(recursive=True)
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        ]
        if not kids or time.monotonic() > deadline:
            return kids
        time.sleep(0.02)


def standin_spawn(tmp_path: Path, mode: str, n: int, *, once: bool) -> Any:
    script = tmp_path / "standin.py"
    script.write_text(STANDIN)
    flag = str(tmp_path / f"flag-{mode}-{n}") if once else "-"

    def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, str(script), mode, str(n), flag, *argv], **kw)

    return spawn


def assert_nothing_partial(work: Path, files: dict[bytes, Any]) -> None:
    """Every regular file on disk is complete; no index claims anything."""
    root = os.fsencode(work)
    for path, content in files.items():
        full = root + b"/" + path
        if isinstance(content, tuple) or not os.path.lexists(full):
            continue
        with open(full, "rb") as f:
            assert f.read() == content, path
    assert not (work / ".git" / "index").exists()


def assert_finishes(ours: Path, src: Path, tmp_path: Path, **kw: Any) -> None:
    """A plain re-run resumes and ends identical to git's checkout."""
    assert (ours / ".git" / IN_PROGRESS).exists()
    result = checkout(CheckoutOptions(directory=ours, **kw))
    assert result.mode in ("resume", "checkout")
    assert not (ours / ".git" / IN_PROGRESS).exists()
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs"))


def our_processes(work: Path) -> list[psutil.Process]:
    """Live processes whose command line names the work tree (git -C <work> ...)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if str(work) in " ".join(p.info["cmdline"] or []) and (
                p.info["status"] != psutil.STATUS_ZOMBIE
            ):
                found.append(p)
        except psutil.Error:
            pass
    return found
