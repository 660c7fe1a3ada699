"""A long-running filter process (gitattributes(5), "Long Running Filter Process") for
tests: git-lfs stands in as ``filter.<name>.process``.  Smudge reverses each line's
bytes and prefixes ``[smudged]``; clean undoes it.  Run as ``python procfilter.py``."""

from __future__ import annotations

import sys
from typing import BinaryIO

MAX = 65516


def read_pkt(inp: BinaryIO) -> bytes | None:
    """One pkt-line's payload; None for a flush packet."""
    head = inp.read(4)
    if len(head) < 4:
        raise EOFError
    n = int(head, 16)
    if n == 0:
        return None
    return inp.read(n - 4)


def read_list(inp: BinaryIO) -> list[bytes]:
    out = []
    while (pkt := read_pkt(inp)) is not None:
        out.append(pkt.rstrip(b"\n"))
    return out


def read_content(inp: BinaryIO) -> bytes:
    parts = []
    while (pkt := read_pkt(inp)) is not None:
        parts.append(pkt)
    return b"".join(parts)


def write_pkt(out: BinaryIO, data: bytes | None) -> None:
    if data is None:
        out.write(b"0000")
    else:
        out.write(b"%04x" % (len(data) + 4) + data)


def write_content(out: BinaryIO, data: bytes) -> None:
    for k in range(0, len(data), MAX):
        write_pkt(out, data[k : k + MAX])
    write_pkt(out, None)


def smudge(data: bytes) -> bytes:
    return b"[smudged]" + b"\n".join(line[::-1] for line in data.split(b"\n"))


def clean(data: bytes) -> bytes:
    data = data.removeprefix(b"[smudged]")
    return b"\n".join(line[::-1] for line in data.split(b"\n"))


def main() -> int:
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    if read_list(inp)[:2] != [b"git-filter-client", b"version=2"]:
        return 1
    write_pkt(out, b"git-filter-server\n")
    write_pkt(out, b"version=2\n")
    write_pkt(out, None)
    read_list(inp)  # capabilities offered
    write_pkt(out, b"capability=clean\n")
    write_pkt(out, b"capability=smudge\n")
    write_pkt(out, None)
    out.flush()
    while True:
        try:
            meta = read_list(inp)
        except EOFError:
            return 0
        command = next(m.split(b"=", 1)[1] for m in meta if m.startswith(b"command="))
        data = read_content(inp)
        result = smudge(data) if command == b"smudge" else clean(data)
        write_pkt(out, b"status=success\n")
        write_pkt(out, None)
        write_content(out, result)
        write_pkt(out, None)  # status unchanged
        out.flush()


if __name__ == "__main__":
    sys.exit(main())
