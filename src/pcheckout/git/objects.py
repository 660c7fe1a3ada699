"""Object names and ids: resolving revisions, hashing blobs, batch lookups."""

from __future__ import annotations

from collections.abc import Sequence

from pcheckout.errors import GitError, UnknownRevisionError, decode
from pcheckout.git.runner import Git


def resolve(git: Git, rev: str, peel: str) -> str:
    """``rev^{peel}`` as a hex oid, or UnknownRevisionError."""
    if not rev or rev.startswith("-"):
        raise UnknownRevisionError(f"invalid revision '{rev}'")
    proc = git.run("rev-parse", "--verify", "--quiet", f"{rev}^{{{peel}}}", ok_codes=(0, 1, 128))
    if proc.returncode != 0 or not proc.stdout.strip():
        kind = "commit" if peel == "commit" else "tree-ish"
        raise UnknownRevisionError(f"unknown revision '{rev}' (not a {kind} in this repository)")
    return decode(proc.stdout.strip())


#: Chunk size for hashing a file as a blob: bounded memory for any file size.
HASH_CHUNK = 1024 * 1024


def blob_oid(data: bytes, hash_name: str) -> str:
    """The object id git gives ``data`` as a blob (``git hash-object --no-filters``)."""
    import hashlib  # here: OpenSSL's load costs ~3 ms of a start-up that rarely hashes

    h = hashlib.new(hash_name, b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def file_blob_oid(path: bytes, size: int, hash_name: str) -> str:
    """``blob_oid`` of the ``size``-byte file at ``path``, read in bounded pieces."""
    import hashlib  # see blob_oid

    h = hashlib.new(hash_name, b"blob %d\0" % size)
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


_OBJECT_TYPES = frozenset({"blob", "tree", "commit", "tag"})


def batch_check(git: Git, names: Sequence[str]) -> list[tuple[str, str] | None]:
    """``(oid, type)`` for each object name (any rev syntax: ``v1^{tree}``,
    ``HEAD~2``), None where git finds none: all of them in one ``git cat-file
    --batch-check``.  On a network mount each git process costs tens of round
    trips to the repository before it does anything, so lookups share one."""
    return batch_check_said(git, names)[0]


def batch_check_said(git: Git, names: Sequence[str]) -> tuple[list[tuple[str, str] | None], bytes]:
    """``batch_check``, and what git said on stderr (its warnings on the names)."""
    if any("\n" in n for n in names):
        raise ValueError("an object name with a newline cannot be asked in a batch")
    data = "".join(n + "\n" for n in names).encode("utf-8", "surrogateescape")
    proc = git.run("cat-file", "--batch-check=%(objectname) %(objecttype)", input=data)
    out = proc.stdout
    lines = decode(out).split("\n")[: len(names)]
    if len(lines) != len(names):
        raise GitError(f"git cat-file --batch-check answered {len(lines)} of {len(names)} names")
    found: list[tuple[str, str] | None] = []
    for line in lines:
        oid, _, kind = line.rpartition(" ")
        # Unknown names come back as "<name> missing" (or "ambiguous"); echoed, not parsed.
        ok = (
            kind in _OBJECT_TYPES
            and len(oid) in (40, 64)
            and all(c in "0123456789abcdef" for c in oid)
        )
        found.append((oid, kind) if ok else None)
    return found, proc.stderr
