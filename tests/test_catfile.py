"""The cat-file client: byte-exact protocol, every way an answer can go wrong, reaping.

Real ``git cat-file`` for the happy paths; a stand-in process (``spawn`` seam)
that plays a script of answers for the broken ones.
"""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers import git, make_repo

from pcheckout.errors import CatFileError, MissingObjectError
from pcheckout.git.catfile import EMPTY_TREE, READ_BUFFER, CatFile, State
from pcheckout.git.runner import Git

OID = "0123456789abcdef0123456789abcdef01234567"


def player(script: str) -> Any:
    """A spawn that runs ``script`` (Python; ``out``/``err`` are binary stdout/stderr)."""
    prelude = "import os, sys, time\nout, err = sys.stdout.buffer, sys.stderr.buffer\n"
    code = prelude + textwrap.dedent(script)

    def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", code], **kw)

    return spawn


def canned(answer: bytes, stderr: bytes = b"", code: int = 0) -> Any:
    """A stand-in that writes ``answer`` (and ``stderr``) and exits with ``code``.

    It does not wait for requests (they are not sent: a send could race its exit).
    """
    return player(
        f"out.write({answer!r}); out.flush(); err.write({stderr!r}); err.flush()\n"
        f"sys.exit({code})\n"
    )


@pytest.fixture
def g(tmp_path: Path) -> Git:
    return Git(tmp_path)


# -- real git ----------------------------------------------------------------------
def test_real_git_pipelined_small_and_streamed(tmp_path: Path) -> None:
    big = bytes(range(256)) * (3 * READ_BUFFER // 256 + 7)  # several read buffers
    repo = make_repo(tmp_path, {b"a": b"alpha\n", b"empty": b"", b"big": big})
    oids = {n: git(repo, "rev-parse", f"HEAD:{n}").decode().strip() for n in ("a", "empty", "big")}
    cf = CatFile(Git(repo))
    cf.send(b"".join(cf.request_line(oids[n]) for n in ("a", "empty", "big", "a")))
    assert cf.read_header(oids["a"]) == (b"blob", 6)
    assert cf.read_small(6) == b"alpha\n"
    assert cf.read_header(oids["empty"]) == (b"blob", 0)
    assert cf.read_small(0) == b""
    kind, size = cf.read_header(oids["big"])
    assert (kind, size) == (b"blob", len(big))
    pieces: list[bytes] = []
    cf.stream_to(size, pieces.append)
    assert b"".join(pieces) == big and max(map(len, pieces)) <= READ_BUFFER
    assert cf.read_header(oids["a"]) == (b"blob", 6)
    cf.skip(6)
    cf.close()
    assert cf.state is State.CLOSED and cf.proc.returncode == 0


def test_real_git_filtered_answers_are_delimited_by_the_sentinel(tmp_path: Path) -> None:
    # eol=crlf makes the converted size differ from the header's (stored) size;
    # a line that looks like a "missing" answer must not end the contents.
    tricky = b"one\n" + OID.encode() + b" missing\ntwo\n"
    repo = make_repo(
        tmp_path,
        {
            b".gitattributes": b"*.txt text eol=crlf\n",
            b"t.txt": tricky,
            b"u.txt": b"u\n",
            b"raw.bin": b"a\nb\n",
        },
    )
    oid = {
        n: git(repo, "rev-parse", f"HEAD:{n}").decode().strip()
        for n in ("t.txt", "u.txt", "raw.bin")
    }
    cf = CatFile(Git(repo), filters=True)
    cf.send(b"".join(cf.request_line(oid[n], n.encode()) for n in ("t.txt", "raw.bin", "u.txt")))
    got = []
    for n in ("t.txt", "raw.bin", "u.txt"):
        kind, _stored_size = cf.read_header(oid[n])
        parts: list[bytes] = []
        cf.read_filtered(parts.append)
        got.append(b"".join(parts))
    assert got == [tricky.replace(b"\n", b"\r\n"), b"a\nb\n", b"u\r\n"]
    cf.close()


def test_filtered_sentinel_is_the_empty_tree_with_a_nonce_path(tmp_path: Path) -> None:
    # A missing object id costs git a pack-directory rescan (and a fetch in a
    # partial clone); the empty tree is in memory and ":<nonce>" fails there.
    repo = make_repo(tmp_path, {b".gitattributes": b"* text eol=crlf\n", b"a": b"a\n"})
    cf = CatFile(Git(repo), filters=True)
    line = cf.request_line("1" * 40, b"p").split(b"\n")[1]
    name, path = line.split(b" ")
    assert name.startswith(EMPTY_TREE[40].encode() + b":") and path == b"-"
    assert len(name) == 40 + 1 + 32
    assert cf.request_line("1" * 64, b"p").split(b"\n")[1].startswith(EMPTY_TREE[64].encode())
    cf.kill()


def test_real_git_filtered_sha256(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "--object-format=sha256", "r")
    repo = tmp_path / "r"
    (repo / ".gitattributes").write_bytes(b"* text eol=crlf\n")
    (repo / "a").write_bytes(b"one\ntwo\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "x")
    oid = git(repo, "rev-parse", "HEAD:a").decode().strip()
    assert len(oid) == 64
    cf = CatFile(Git(repo), filters=True)
    cf.send(cf.request_line(oid, b"a") * 2)
    for _ in range(2):
        assert cf.read_header(oid) == (b"blob", 8)
        parts: list[bytes] = []
        cf.read_filtered(parts.append)
        assert b"".join(parts) == b"one\r\ntwo\r\n"
    cf.close()


def test_real_git_missing_object(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, {b"a": b"a\n"})
    cf = CatFile(Git(repo))
    cf.send(cf.request_line(OID))
    with pytest.raises(MissingObjectError, match=f"^object {OID} is missing"):
        cf.read_header(OID)
    with pytest.raises(MissingObjectError):  # later use says the same, clearly
        cf.read_header(OID)
    cf.kill()
    assert cf.proc.returncode is not None


# -- broken answers ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"", "exited before answering"),
        (f"{OID} blob 5".encode(), "sent a truncated header"),
        (f"{OID[::-1]} blob 5\n".encode(), "answered"),
        (f"{OID} blob five\n".encode(), "answered"),
        (b"error: something\n", "answered 'error: something'"),
    ],
)
def test_bad_headers(g: Git, answer: bytes, message: str) -> None:
    cf = CatFile(g, spawn=canned(answer, b"fatal: the reason\n", 128), name="cat-file of w1")
    cf.last_request = cf.request_line(OID)
    with pytest.raises(CatFileError) as info:
        cf.read_header(OID)
    msg = str(info.value)
    assert msg.startswith(f"cat-file of w1 {message}")
    assert f"(request: {OID})" in msg
    assert msg.endswith("(the reason)") or not answer  # git's stderr, when it said something
    assert "\n" not in msg
    assert cf.state is State.BROKEN
    cf.kill()
    assert cf.proc.returncode is not None


def test_stderr_tail_is_in_the_message(g: Git) -> None:
    cf = CatFile(g, spawn=canned(b"", b"fatal: bad object store\n", 128))
    with pytest.raises(CatFileError, match=r"exited before answering .*\(bad object store\)$"):
        cf.read_header(OID)
    cf.kill()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"hel", "cut an answer short (3 of 10 bytes)"),
        (b"helloworld", "sent an answer without its trailing newline"),
        (b"helloworldX", "sent an answer without its trailing newline"),
    ],
)
def test_short_small_answers(g: Git, body: bytes, message: str) -> None:
    cf = CatFile(g, spawn=canned(f"{OID} blob 10\n".encode() + body))
    assert cf.read_header(OID) == (b"blob", 10)
    with pytest.raises(CatFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cf.read_small(10)
    cf.kill()


def test_short_streamed_answer_and_missing_newline(g: Git) -> None:
    cf = CatFile(g, spawn=canned(f"{OID} blob 10\n".encode() + b"hel"))
    cf.read_header(OID)
    got: list[bytes] = []
    with pytest.raises(CatFileError, match=r"cut an answer short \(3 of 10 bytes\)"):
        cf.stream_to(10, got.append)
    assert b"".join(got) == b"hel"  # the caller saw only part: it must not keep the file
    cf.kill()
    cf = CatFile(g, spawn=canned(f"{OID} blob 3\n".encode() + b"abcX"))
    cf.read_header(OID)
    with pytest.raises(CatFileError, match="without its trailing newline"):
        cf.stream_to(3, got.append)
    cf.kill()


def test_filtered_answer_cut_short(g: Git) -> None:
    cf = CatFile(g, filters=True, spawn=canned(f"{OID} blob 3\nabc".encode()))
    cf.read_header(OID)
    with pytest.raises(CatFileError, match="cut a converted answer short"):
        cf.read_filtered(lambda _c: None)
    cf.kill()


def test_filtered_sentinel_with_a_stand_in(g: Git) -> None:
    # The stand-in answers the sentinel request as git does; a fake "missing"
    # line with another name inside the contents is data, not the end.
    spawn = player("""
        req = sys.stdin.buffer.readline()
        sentinel = sys.stdin.buffer.readline().split()[0]
        body = b"x\\n" + b"f" * 40 + b" missing\\ny"
        out.write(req.split()[0] + b" blob 1\\n" + body + b"\\n" + sentinel + b" missing\\n")
        out.flush()
        sys.stdin.buffer.read()
    """)
    cf = CatFile(g, filters=True, spawn=spawn)
    cf.send(cf.request_line(OID, b"some/path"))
    assert cf.read_header(OID) == (b"blob", 1)
    parts: list[bytes] = []
    cf.read_filtered(parts.append)
    assert b"".join(parts) == b"x\n" + b"f" * 40 + b" missing\ny"
    cf.close()


# -- lifecycle -----------------------------------------------------------------------
def test_use_after_close_is_a_clear_error(g: Git) -> None:
    cf = CatFile(g, spawn=canned(b""))
    cf.close()
    for use in (lambda: cf.send(b"x\n"), lambda: cf.read_header(OID)):
        with pytest.raises(CatFileError, match="^cat-file: used after it was closed$"):
            use()


def test_close_reports_a_failing_exit(g: Git) -> None:
    cf = CatFile(g, spawn=canned(b"", b"fatal: it went wrong\n", 3))
    with pytest.raises(CatFileError, match=r"exited with status 3 \(it went wrong\)"):
        cf.close()
    assert cf.proc.returncode == 3


def test_close_kills_a_child_that_does_not_exit(g: Git) -> None:
    cf = CatFile(
        g,
        spawn=player(
            "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "sys.stdin.buffer.read(); time.sleep(60)\n"
        ),
    )
    cf.close(timeout=0.2)
    assert cf.proc.returncode is not None
    assert not [p for p in psutil.Process().children() if p.pid == cf.proc.pid]


def test_kill_reaps_in_any_state(g: Git) -> None:
    cf = CatFile(g, spawn=player("time.sleep(60)\n"))
    cf.kill()
    assert cf.proc.returncode is not None
    cf.kill()  # twice is fine
    cf.close()  # and close after kill does nothing harmful
    assert psutil.Process().children() == []


def test_send_to_a_dead_process(g: Git) -> None:
    cf = CatFile(g, spawn=player("sys.exit(0)\n"))
    cf.proc.wait()
    with pytest.raises(CatFileError, match="stopped reading requests"):
        cf.send(b"x\n" * 100000)
    cf.kill()


def test_spawn_failure(g: Git) -> None:
    def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        raise FileNotFoundError(2, "No such file or directory")

    with pytest.raises(CatFileError, match="^cannot start git cat-file: No such file or dir"):
        CatFile(g, spawn=spawn)


def test_spawn_failure_for_lack_of_descriptors_says_what_to_do(g: Git) -> None:
    def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        raise OSError(errno.EMFILE, "Too many open files")

    with pytest.raises(CatFileError, match="Too many open files; use fewer workers"):
        CatFile(g, spawn=spawn)


def test_spawn_gets_the_environment_and_pipes(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        seen.update(kw, argv=argv)
        return subprocess.Popen(argv, **kw)

    repo = make_repo(tmp_path, {b"a": b"a\n"})
    cf = CatFile(Git(repo, env={"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"}), spawn=spawn)
    assert seen["argv"][-2:] == ["cat-file", "--batch"]
    assert seen["env"]["GIT_CONFIG_NOSYSTEM"] == "1"
    assert seen["stdin"] == subprocess.PIPE and seen["stdout"] == subprocess.PIPE
    cf.close()
