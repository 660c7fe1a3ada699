#!/usr/bin/env python3
"""Mount the real SFTP filesystem (sshfs) with a chosen round-trip time, on loopback.

    python3 scripts/sshfsmount.py mount BACKING_DIR MOUNTPOINT [--rtt-ms 1.0]
        [--max-conns N] [--stats DIR] [-o SSHFS_OPTIONS]
    python3 scripts/sshfsmount.py umount MOUNTPOINT
    python3 scripts/sshfsmount.py stats DIR
    python3 scripts/sshfsmount.py check

Three real parts and one small one: the kernel's FUSE, Debian's ``sshfs`` (a FUSE SFTP
client), OpenSSH's ``sftp-server`` serving BACKING_DIR, and between them a delay line on
loopback (this module) that holds every chunk of bytes ``rtt/2`` in each direction before
passing it on.  No ssh runs: sshfs connects to the delay line with ``-o directport=PORT``
(what ``socat TCP-LISTEN:PORT,fork,nodelay EXEC:sftp-server`` would serve), and the delay
line starts one ``sftp-server`` per connection on its stdin and stdout.

``mount`` returns once the mount answers; it prints nothing on success, errors go to stderr
with exit status 1.  The delay line runs detached and exits by itself once sshfs has
closed every connection (on unmount).  ``--stats DIR`` counts the SFTP requests sshfs
sends, by type, per connection; ``stats DIR`` prints their sum.  Importable:
:func:`why_unavailable`, :func:`mount`, :func:`umount`, :func:`mounted`,
:func:`read_stats`.  docs/benchmarks.md says what it was used to measure.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import math
import mmap
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    from pcheckout.errors import PcheckoutError
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from pcheckout.errors import PcheckoutError
from pcheckout.fs import mountinfo

FSTYPE = "fuse.sshfs"
#: OpenSSH's SFTP server as Debian's openssh-sftp-server installs it.
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
#: How long to wait for a mount to appear or disappear, and for the delay line to exit
#: after it: a few milliseconds here; generous, it only matters when something is broken.
MOUNT_TIMEOUT_S = 10.0
POLL_S = 0.005
#: The delay line gives up if sshfs has not connected within this many seconds.
FIRST_CONNECT_S = 30.0
#: Bytes read at once, and held per direction before reading stops (back-pressure).
CHUNK = 64 * 1024
HELD_MAX = 4 << 20

#: SFTP packet types 1-20 and 200, protocol version 3 (what OpenSSH speaks):
#: draft-ietf-secsh-filexfer-02, section 3 (2, VERSION, is the server's answer to INIT).
_V3_TYPES = (
    "init version open close read write lstat fstat setstat fsetstat opendir readdir remove "
    "mkdir rmdir realpath stat rename readlink symlink"
)
SFTP_TYPES = dict(enumerate(_V3_TYPES.split(), start=1)) | {200: "extended"}
#: A connection's stats file: one native uint64 per packet type (0-255), then the bytes
#: sshfs sent and the bytes it received.
_STATS_SLOTS = 258
_SENT, _RECEIVED = 256, 257


class SshfsError(PcheckoutError):
    """The SFTP filesystem could not be mounted or unmounted."""


def why_unavailable() -> str | None:
    """Why a mount cannot be made here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist"
    for tool in ("sshfs", "fusermount3"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (Debian: apt-get install sshfs)"
    if not os.access(SFTP_SERVER, os.X_OK):
        return f"{SFTP_SERVER} is missing (Debian: apt-get install openssh-sftp-server)"
    return None


def _sshfs_knows(option: str) -> bool:
    """Whether this sshfs lists ``option`` in its help (Debian added some in 3.7.3-1.2)."""
    done = subprocess.run(["sshfs", "-h"], capture_output=True, text=True, check=False)
    return option in done.stdout + done.stderr


# --------------------------------------------------------------------------- the delay line


class _Direction:
    """Bytes from ``src`` to ``dst``, each chunk held ``delay`` seconds after it was read."""

    def __init__(self, src: int, dst: int, delay: float, close: Callable[[], None]) -> None:
        self.src, self.dst, self.delay = src, dst, delay
        self.close = close  # ends the output: the other side sees end of file
        self.held: deque[tuple[float, bytes]] = deque()  # (when due, bytes)
        self.held_bytes = 0
        self.out = bytearray()  # due, not yet written
        self.eof = False  # src said end of file
        self.done = False  # dst closed

    def wants_read(self) -> bool:
        return not self.eof and self.held_bytes + len(self.out) < HELD_MAX

    def read(self) -> bytes:
        try:
            data = os.read(self.src, CHUNK)
        except BlockingIOError:
            return b""
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return b""
        self.held.append((time.monotonic() + self.delay, data))
        self.held_bytes += len(data)
        return data

    def release(self, now: float) -> None:
        while self.held and self.held[0][0] <= now:
            data = self.held.popleft()[1]
            self.held_bytes -= len(data)
            self.out += data

    def write(self) -> None:
        try:
            n = os.write(self.dst, self.out)
        except BlockingIOError:
            return
        except OSError:  # the other side is gone: drop what is left, read no more
            self.out.clear()
            self.held.clear()
            self.held_bytes = 0
            self.eof = True
            return
        del self.out[:n]

    def next_due(self) -> float | None:
        return self.held[0][0] if self.held else None

    def idle(self) -> bool:
        return self.eof and not self.held and not self.out


class _Counter:
    """SFTP requests by type, parsed from the bytes sshfs sends (uint32 length, byte type,
    ...), in a file shared with readers (one per connection)."""

    def __init__(self, path: Path) -> None:
        with open(path, "w+b") as f:
            f.truncate(_STATS_SLOTS * 8)
            self._map = mmap.mmap(f.fileno(), _STATS_SLOTS * 8)
        self._head = b""  # the start of a packet header not yet complete
        self._skip = 0  # bytes of the current packet's body still to pass

    def _add(self, slot: int, n: int) -> None:
        (value,) = struct.unpack_from("=Q", self._map, slot * 8)
        struct.pack_into("=Q", self._map, slot * 8, value + n)

    def sent(self, data: bytes) -> None:
        self._add(_SENT, len(data))
        view = memoryview(data)
        while view:
            if self._skip:
                step = min(self._skip, len(view))
                self._skip -= step
                view = view[step:]
                continue
            need = 5 - len(self._head)
            self._head += bytes(view[:need])
            view = view[need:]
            if len(self._head) == 5:
                length, kind = struct.unpack(">IB", self._head)
                self._add(kind, 1)
                self._skip = max(length - 1, 0)
                self._head = b""

    def received(self, data: bytes) -> None:
        self._add(_RECEIVED, len(data))


def _low_timer_slack() -> None:
    """1 ns instead of 50 us: sleeps of a quarter millisecond end on time."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK


def _relay(conn: socket.socket, delay: float, counter: _Counter | None) -> None:
    """One connection: an sftp-server on pipes, both directions through a delay line."""
    server = subprocess.Popen(
        [SFTP_SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
    )
    assert server.stdin is not None and server.stdout is not None
    sock = conn.fileno()
    up = _Direction(sock, server.stdin.fileno(), delay, server.stdin.close)
    down = _Direction(server.stdout.fileno(), sock, delay, lambda: _shut(conn))
    for fd in (sock, up.dst, down.src):
        os.set_blocking(fd, False)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        _pump(up, down, counter)
    finally:
        server.stdin.close()
        conn.close()
        server.wait()


def _shut(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)


def _pump(up: _Direction, down: _Direction, counter: _Counter | None) -> None:
    pairs = (up, down)
    while True:
        now = time.monotonic()
        for d in pairs:
            d.release(now)
            if d.out:
                d.write()
        for d in pairs:
            if d.idle() and not d.done:
                d.done = True
                d.close()
        if up.done and down.done:
            return
        readers = [d.src for d in pairs if d.wants_read()]
        writers = [d.dst for d in pairs if d.out and not d.done]
        dues = [t for t in (up.next_due(), down.next_due()) if t is not None]
        timeout = max(0.0, min(dues) - time.monotonic()) if dues else None
        ready, _, _ = select.select(readers, writers, [], timeout)
        for d in pairs:
            if d.src in ready:
                data = d.read()
                if counter is not None and data:
                    (counter.sent if d is up else counter.received)(data)


def serve(listener: socket.socket, rtt_ms: float, stats: Path | None) -> int:
    """Accept sshfs's connections, one forked relay each; return once the last has closed."""
    _low_timer_slack()
    delay = rtt_ms / 2000.0
    children: set[int] = set()
    served = False
    started = time.monotonic()
    listener.settimeout(0.2)
    while True:
        for pid in list(children):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue
            children.discard(pid)
        if served and not children:
            return 0
        if not served and time.monotonic() - started > FIRST_CONNECT_S:
            return 1
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        served = True
        pid = os.fork()
        if pid == 0:  # the relay: nothing of the parent's loop runs here
            status = 1
            try:
                listener.close()
                conn.settimeout(None)
                counter = _Counter(stats / f"conn-{os.getpid()}") if stats else None
                _relay(conn, delay, counter)
                status = 0
            finally:
                os._exit(status)
        children.add(pid)
        conn.close()


# --------------------------------------------------------------------------- mount, umount


def _abs(path: str | os.PathLike[str]) -> str:
    # Resolve the parent only: stat() on a dead FUSE mountpoint fails.
    p = os.path.abspath(os.fspath(path))
    return os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))


def _fstype_at(mountpoint: str) -> str | None:
    table = mountinfo.read()
    here = table.at(mountpoint)
    return table.topmost(here).fstype if here else None


def is_mounted(mountpoint: str | os.PathLike[str]) -> bool:
    """Whether an sshfs is mounted at ``mountpoint``."""
    return _fstype_at(_abs(mountpoint)) == FSTYPE


#: Delay lines started by :func:`mount` in this process, by mount point: :func:`umount`
#: waits for them to exit.
_SERVERS: dict[str, subprocess.Popen[bytes]] = {}


def _start_server(rtt_ms: float, stats: str | None) -> tuple[int, subprocess.Popen[bytes]]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        port = listener.getsockname()[1]
        cmd = [sys.executable, str(Path(__file__).resolve()), "serve"]
        cmd += ["--fd", str(listener.fileno()), "--rtt-ms", repr(rtt_ms)]
        if stats is not None:
            cmd += ["--stats", stats]
        server = subprocess.Popen(
            cmd,
            pass_fds=[listener.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # detached: it must not hold a caller's pipe open
            start_new_session=True,  # outlives a CLI mount; exits once sshfs is gone
        )
    return port, server


def mount(
    backing: str | os.PathLike[str],
    mountpoint: str | os.PathLike[str],
    *,
    rtt_ms: float = 1.0,
    max_conns: int | None = None,
    options: str | None = None,
    stats: str | os.PathLike[str] | None = None,
) -> None:
    """Serve ``backing`` over SFTP with ``rtt_ms`` of round trip, mounted at ``mountpoint``.

    ``max_conns``: sshfs's parallel connections (its default is 1); ``options``: more
    ``-o`` options for sshfs (``"dir_cache=no,max_conns=4"``); ``stats``: a directory to
    count the SFTP requests in (:func:`read_stats`).
    """
    why = why_unavailable()
    if why is not None:
        raise SshfsError(f"sshfs cannot be mounted here: {why}")
    if not math.isfinite(rtt_ms) or rtt_ms < 0:
        raise SshfsError(f"rtt_ms must be a non-negative number, not {rtt_ms!r}")
    opts = [] if max_conns is None else [f"max_conns={max_conns}"]
    # Debian's sshfs refuses to read symlinks that leave the mount by default (3.7.3-1.2);
    # git's trees hold such links, and upstream sshfs reads them.
    if _sshfs_knows("no_contain_symlinks"):
        opts.append("no_contain_symlinks")
    opts += [options] if options else []
    backing_abs, target = _abs(backing), _abs(mountpoint)
    if _fstype_at(target) is not None:
        raise SshfsError(f"{target} is already a mount point")
    stats_dir = None if stats is None else _abs(stats)
    for directory in (backing_abs, target, stats_dir):
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
    if stats_dir is not None:
        for old in Path(stats_dir).glob("conn-*"):
            old.unlink()
    port, server = _start_server(rtt_ms, stats_dir)
    cmd = ["sshfs", f"127.0.0.1:{backing_abs}", target, "-o", f"directport={port}"]
    cmd += ["-o", ",".join(opts)] if opts else []
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode != 0 or not _wait(lambda: is_mounted(target)):
        server.kill()
        server.wait()
        detail = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        raise SshfsError(f"mounting sshfs at {target} failed: {detail}")
    _SERVERS[target] = server


def _wait(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def umount(mountpoint: str | os.PathLike[str]) -> None:
    """Unmount the sshfs at ``mountpoint`` (lazily if busy); wait until it and the delay
    line this process started for it are gone.  Nothing to do where none is mounted."""
    target = _abs(mountpoint)
    server = _SERVERS.pop(target, None)
    if is_mounted(target):
        done = subprocess.run(["fusermount3", "-u", target], capture_output=True, text=True)
        if done.returncode != 0 and is_mounted(target):
            lazy = subprocess.run(
                ["fusermount3", "-u", "-z", target], capture_output=True, text=True
            )
            if lazy.returncode != 0 and is_mounted(target):
                raise SshfsError(f"unmounting {target} failed: {lazy.stderr.strip()}")
        if not _wait(lambda: not is_mounted(target)):
            raise SshfsError(f"sshfs at {target} is still mounted")
    if server is not None:
        try:
            server.wait(MOUNT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextlib.contextmanager
def mounted(
    backing: str | os.PathLike[str],
    mountpoint: str | os.PathLike[str],
    **kw: float | int | str | os.PathLike[str] | None,
) -> Iterator[Path]:
    """Mount for the duration of a ``with`` block; yields the mount point."""
    mount(backing, mountpoint, **kw)  # type: ignore[arg-type]
    try:
        yield Path(_abs(mountpoint))
    finally:
        umount(mountpoint)


def read_stats(directory: str | os.PathLike[str], per_connection: bool = False) -> dict[str, int]:
    """The SFTP requests counted in ``directory`` by type (``open``, ``write``, ``lstat``,
    ...; ``type-N`` for others), ``bytes_sent`` and ``bytes_received``, summed over the
    connections, and ``connections``; ``per_connection`` adds ``requests_conn_K`` (K from
    0, the most loaded first)."""
    total = [0] * _STATS_SLOTS
    per: list[int] = []
    files = sorted(Path(directory).glob("conn-*"))
    for f in files:
        values = struct.unpack(f"={_STATS_SLOTS}Q", f.read_bytes()[: _STATS_SLOTS * 8])
        total = [a + b for a, b in zip(total, values, strict=True)]
        per.append(sum(values[:256]))
    out = {SFTP_TYPES.get(k, f"type-{k}"): n for k, n in enumerate(total[:256]) if n}
    out.update(bytes_sent=total[_SENT], bytes_received=total[_RECEIVED], connections=len(files))
    if per_connection:
        out.update({f"requests_conn_{i}": n for i, n in enumerate(sorted(per, reverse=True))})
    return out


def requests(stats: dict[str, int]) -> int:
    """The SFTP requests (round trips) among :func:`read_stats`'s counters."""
    return sum(v for k, v in stats.items() if k in SFTP_TYPES.values() or k.startswith("type-"))


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sshfsmount.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_mount = sub.add_parser("mount", help="serve BACKING over SFTP, mount it with sshfs")
    p_mount.add_argument("backing")
    p_mount.add_argument("mountpoint")
    p_mount.add_argument("--rtt-ms", type=float, default=1.0, help="round trip (1.0)")
    p_mount.add_argument("--max-conns", type=int, default=None, help="sshfs connections (1)")
    p_mount.add_argument("--stats", default=None, help="count SFTP requests in this directory")
    p_mount.add_argument("-o", dest="options", default=None, help="more sshfs -o options")
    p_umount = sub.add_parser("umount", help="unmount and wait until gone")
    p_umount.add_argument("mountpoint")
    p_stats = sub.add_parser("stats", help="print a --stats directory's counters as JSON")
    p_stats.add_argument("directory")
    sub.add_parser("check", help="say whether a mount can be made here")
    p_serve = sub.add_parser("serve")  # the delay line itself, started by mount
    p_serve.add_argument("--fd", type=int, required=True)
    p_serve.add_argument("--rtt-ms", type=float, required=True)
    p_serve.add_argument("--stats", type=Path, default=None)
    ns = parser.parse_args(argv)
    try:
        if ns.cmd == "serve":
            return serve(socket.socket(fileno=ns.fd), ns.rtt_ms, ns.stats)
        if ns.cmd == "check":
            why = why_unavailable()
            print(why or "sshfs, fusermount3, sftp-server and /dev/fuse are there")
            return 1 if why else 0
        if ns.cmd == "stats":
            print(json.dumps(read_stats(ns.directory, per_connection=True), indent=1))
        elif ns.cmd == "umount":
            umount(ns.mountpoint)
        else:
            mount(
                ns.backing,
                ns.mountpoint,
                rtt_ms=ns.rtt_ms,
                max_conns=ns.max_conns,
                options=ns.options,
                stats=ns.stats,
            )
    except (SshfsError, OSError) as exc:
        print(f"sshfsmount: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
