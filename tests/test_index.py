"""pcheckout.index against git itself: git reads what we write, we read what git writes."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import os
import re
import struct
import subprocess
from pathlib import Path

import pytest

from pcheckout.errors import PcheckoutError, WriteError
from pcheckout.fdio import write_all
from pcheckout.git import index as index_mod
from pcheckout.git.index import (
    EXT_FLAG_INTENT_TO_ADD,
    EXT_FLAG_SKIP_WORKTREE,
    FLAG_ASSUME_VALID,
    MODE_SPARSE_DIR,
    CorruptIndexError,
    Encoding,
    Index,
    IndexEntry,
    IndexFileError,
    IndexLockError,
    UnsupportedIndexError,
    decode_index,
    encode_index,
    encode_rows,
    encoded_index_pieces,
    encoded_pieces,
    read_index,
    sort_key,
    write_index,
)
from pcheckout.git.indexformat import decode_varint, encode_varint

GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "LC_ALL": "C",
}
RAWSZ = {"sha1": 20, "sha256": 32}
#: a relative path of exactly 0xFFF bytes: the longest Linux accepts (PATH_MAX 4096 with
#: its NUL), and long enough that the 12-bit name length field saturates
LONG_ON_DISK = b"/".join([b"x" * 200] * 20) + b"/" + b"f" * (0xFFF - 20 * 201)
#: longer than 0xFFF and longer than PATH_MAX: index-only (git update-index --cacheinfo)
LONG_INDEX_ONLY = b"/".join([b"y" * 250] * 20) + b"/name"
DEEP = b"/".join(b"d%d" % i for i in range(30)) + b"/leaf.txt"
ODD_NAMES = [
    b"plain.txt",
    b"with space.txt",
    b"new\nline",
    b"tab\tname",
    b"back\\slash",
    b"caf\xe9-latin1",  # not UTF-8
    b"\xff\xfe",
    b"empty",
    b"a-dir/x.c",
    b"a-dir.c",  # sorts between "a-dir" entries as git orders them (memcmp)
    b"a-dir/z/y.c",
    DEEP,
    LONG_ON_DISK,
]
assert len(LONG_ON_DISK) == 0xFFF and len(LONG_INDEX_ONLY) > 0xFFF


def git(repo: Path, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
    proc = subprocess.run(
        ["git", *args], cwd=repo, env=GIT_ENV, input=input, capture_output=True, check=False
    )
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def write_file(repo: Path, rel: bytes, data: bytes, mode: int = 0o644) -> None:
    """Create ``rel`` under ``repo`` through a directory fd (rel may be 0xFFF bytes long)."""
    dfd = os.open(repo, os.O_RDONLY | os.O_DIRECTORY)
    try:
        parent = os.path.dirname(rel)
        if parent:
            _makedirs_at(dfd, parent)
        fd = os.open(rel, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode, dir_fd=dfd)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.chmod(rel, mode, dir_fd=dfd)
    finally:
        os.close(dfd)


def _makedirs_at(dfd: int, parent: bytes) -> None:
    so_far = b""
    for part in parent.split(b"/"):
        so_far = so_far + b"/" + part if so_far else part
        with contextlib.suppress(FileExistsError):
            os.mkdir(so_far, dir_fd=dfd)


def init_repo(tmp_path: Path, object_format: str, name: str = "repo") -> Path:
    repo = tmp_path / name
    repo.mkdir()
    git(repo, "init", "-q", f"--object-format={object_format}")
    return repo


@pytest.fixture(params=["sha1", "sha256"])
def object_format(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def odd_repo(tmp_path: Path, object_format: str) -> Path:
    """Odd names, an exec file, symlinks, a gitlink; staged with ``git add`` (no commit)."""
    repo = init_repo(tmp_path, object_format)
    for i, name in enumerate(ODD_NAMES):
        write_file(repo, name, b"" if name == b"empty" else b"content %d\n" % i)
    write_file(repo, b"run.sh", b"#!/bin/sh\necho hi\n", 0o755)
    os.symlink(b"plain.txt", os.path.join(os.fsencode(repo), b"link"))
    os.symlink(b"/nonexistent/target\n", os.path.join(os.fsencode(repo), b"dangling"))
    os.mkdir(repo / "sub")  # a gitlink checks out as an empty directory
    git(repo, "add", "-A")
    gitlink_oid = git(repo, "hash-object", "--stdin", input=b"not a real commit").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{gitlink_oid.decode()},sub")
    return repo


@pytest.fixture
def small_repo(tmp_path: Path) -> Path:
    """A sha1 repository with a few staged files, for tests about the file, not the names."""
    repo = init_repo(tmp_path, "sha1")
    for name in (b"a.txt", b"dir/b.txt", b"dir/c.txt"):
        write_file(repo, name, name)
    git(repo, "add", "-A")
    return repo


def ls_files_stage(repo: Path) -> list[bytes]:
    return [r for r in git(repo, "ls-files", "-s", "-z").split(b"\0") if r]


def as_ls_files(entry: IndexEntry) -> bytes:
    return b"%06o %s %d\t%s" % (
        entry.mode,
        entry.oid.hex().encode(),
        sort_key(entry)[1],
        entry.path,
    )


STAT_FIELDS = ("ctime_s", "ctime_ns", "mtime_s", "mtime_ns", "dev", "ino", "uid", "gid", "size")


def ls_files_debug(repo: Path) -> dict[bytes, tuple[int, ...]]:
    """Stat data per path from ``git ls-files --debug -z`` (path NUL, then 5 lines)."""
    out = git(repo, "ls-files", "--debug", "-z")
    result: dict[bytes, tuple[int, ...]] = {}
    pos = 0
    while pos < len(out):
        nul = out.index(b"\0", pos)
        end = nul + 1
        for _ in range(5):
            end = out.index(b"\n", end) + 1
        block = out[nul + 1 : end].decode()
        m = re.fullmatch(
            r"  ctime: (\d+):(\d+)\n  mtime: (\d+):(\d+)\n  dev: (\d+)\tino: (\d+)\n"
            r"  uid: (\d+)\tgid: (\d+)\n  size: (\d+)\tflags: [0-9a-f]+\n",
            block,
        )
        assert m, block
        result[out[pos:nul]] = tuple(int(g) for g in m.groups())
        pos = end
    return result


def stat_tuple(entry: IndexEntry) -> tuple[int, ...]:
    return tuple(getattr(entry, f) for f in STAT_FIELDS)


def entries_from_disk(repo: Path) -> list[IndexEntry]:
    """Entries for what ``git ls-files -s`` lists, with the stat data of the files on disk."""
    dfd = os.open(repo, os.O_RDONLY | os.O_DIRECTORY)
    try:
        entries = []
        for rec in ls_files_stage(repo):
            meta, path = rec.split(b"\t", 1)
            mode, oid, _stage = meta.split(b" ")
            st = os.lstat(path, dir_fd=dfd)
            entries.append(
                IndexEntry.from_stat(path, int(mode, 8), bytes.fromhex(oid.decode()), st)
            )
        return entries
    finally:
        os.close(dfd)


def index_path(repo: Path) -> Path:
    return repo / ".git" / "index"


# --- (1) read what git wrote -----------------------------------------------------------------


def test_read_matches_ls_files_and_debug_stat(odd_repo: Path, object_format: str) -> None:
    blob = git(odd_repo, "hash-object", "-w", "--stdin", input=b"index only\n").strip().decode()
    git(
        odd_repo,
        "update-index",
        "--add",
        "--cacheinfo",
        f"100644,{blob},{LONG_INDEX_ONLY.decode()}",
    )

    idx = read_index(index_path(odd_repo))

    assert idx.hash_name == object_format
    assert idx.version == 2
    assert [as_ls_files(e) for e in idx.entries] == ls_files_stage(odd_repo)
    assert {e.path: stat_tuple(e) for e in idx.entries} == ls_files_debug(odd_repo)
    by_path = {e.path: e for e in idx.entries}
    assert by_path[b"run.sh"].mode == 0o100755
    assert by_path[b"link"].mode == 0o120000
    assert by_path[b"link"].size == len(b"plain.txt")
    assert by_path[b"sub"].mode == 0o160000
    assert LONG_ON_DISK in by_path and LONG_INDEX_ONLY in by_path and DEEP in by_path
    assert all(len(e.oid) == RAWSZ[object_format] and e.flags == 0 for e in idx.entries)


def test_read_accepts_str_bytes_and_pathlike(small_repo: Path) -> None:
    p = index_path(small_repo)
    assert read_index(p) == read_index(str(p)) == read_index(os.fsencode(p))


# --- (2) git reads what we wrote -------------------------------------------------------------


@pytest.mark.parametrize("version", [2, 3, 4])
def test_written_index_is_clean_for_git(odd_repo: Path, object_format: str, version: int) -> None:
    git(odd_repo, "commit", "-q", "-m", "c")  # so that `git status` compares with a HEAD
    entries = entries_from_disk(odd_repo)
    expected_stage = ls_files_stage(odd_repo)
    if version == 3:  # git writes v3 only for extended flags: give one entry skip-worktree
        entries = [
            dataclasses.replace(e, extended_flags=EXT_FLAG_SKIP_WORKTREE)
            if e.path == b"empty"
            else e
            for e in entries
        ]
    index_path(odd_repo).unlink()

    write_index(
        index_path(odd_repo), list(reversed(entries)), version=version, hash_name=object_format
    )

    data = index_path(odd_repo).read_bytes()
    assert struct.unpack(">4sI", data[:8]) == (b"DIRC", version)
    assert ls_files_stage(odd_repo) == expected_stage
    assert ls_files_debug(odd_repo) == {e.path: stat_tuple(e) for e in entries}
    git(odd_repo, "diff-files", "--quiet")
    assert git(odd_repo, "status", "--porcelain", "-z") == b""
    if version == 3:
        tags = dict(
            r.split(b" ", 1)[::-1] for r in git(odd_repo, "ls-files", "-t", "-z").split(b"\0") if r
        )
        assert tags[b"empty"] == b"S" and tags[b"plain.txt"] == b"H"
    assert read_index(index_path(odd_repo)) == Index(version, tuple(entries), object_format)


def test_version_3_is_demoted_and_extended_flags_promote_v2() -> None:
    plain = IndexEntry(b"a", 0o100644, bytes(20), 1, 2, 3, 4, 5, 6, 7, 8, 9)
    skip = dataclasses.replace(plain, path=b"b", extended_flags=EXT_FLAG_SKIP_WORKTREE)
    assert encode_index([plain], version=3)[4:8] == b"\0\0\0\x02"
    assert encode_index([plain, skip], version=2)[4:8] == b"\0\0\0\x03"
    assert encode_index([plain, skip], version=4)[4:8] == b"\0\0\0\x04"


# --- (3) byte-identical round trip -----------------------------------------------------------


def split_off_extensions(data: bytes, ours: bytes, rawsz: int) -> list[bytes]:
    """Signatures of the extensions git wrote after the entries (``ours`` has none)."""
    off, end, sigs = len(ours) - rawsz, len(data) - rawsz, []
    while off < end:
        sig, size = struct.unpack_from(">4sI", data, off)
        sigs.append(sig)
        off += 8 + size
    assert off == end
    return sigs


def make_git_index(repo: Path, version: int) -> None:
    if version == 3:
        git(repo, "update-index", "--skip-worktree", "plain.txt")
        write_file(repo, b"intent-to-add.txt", b"later\n")
        git(repo, "add", "-N", "intent-to-add.txt")
    if version == 4:
        git(repo, "update-index", "--index-version", "4")


@pytest.mark.parametrize("version", [2, 3, 4])
def test_round_trip_is_byte_identical(odd_repo: Path, object_format: str, version: int) -> None:
    make_git_index(odd_repo, version)
    data = index_path(odd_repo).read_bytes()
    idx = read_index(index_path(odd_repo))
    assert idx.version == version
    if version == 3:
        flags = {e.path: e.extended_flags for e in idx.entries}
        assert flags[b"plain.txt"] == EXT_FLAG_SKIP_WORKTREE
        assert flags[b"intent-to-add.txt"] == EXT_FLAG_INTENT_TO_ADD

    ours = encode_index(idx.entries, version=version, hash_name=object_format)

    assert split_off_extensions(data, ours, RAWSZ[object_format]) == []  # git wrote no TREE here
    assert ours == data
    out = index_path(odd_repo).with_name("index.ours")
    write_index(out, idx.entries, version=version, hash_name=object_format)
    assert out.read_bytes() == data


def _stored_runs(entries: list[IndexEntry], source: Index) -> list[int]:
    """How many entries each run :func:`encoded_index_pieces` copies as stored holds."""
    rows = index_mod._spliced(sorted(entries, key=sort_key), source)
    return [r.number for r in rows if isinstance(r, index_mod._Stored)]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_entries_kept_as_read_are_copied_as_stored(
    odd_repo: Path, object_format: str, version: int
) -> None:
    """A switch's index: the entries read and kept (the same objects) copied from the
    file as stored, a run at a time, the others encoded: the bytes are those of encoding
    every entry (long names, extended flags, non-UTF-8 names), whatever was dropped,
    replaced or added between them."""
    make_git_index(odd_repo, version)
    idx = read_index(index_path(odd_repo))
    assert bool(idx.data) == (version != 4)  # (v4's prefix compression ties each to the last)
    read = list(idx.entries)
    kept = [e for k, e in enumerate(read) if k % 4 != 1]  # a few dropped
    kept[2] = dataclasses.replace(kept[2], size=kept[2].size + 1)  # one changed
    added = [dataclasses.replace(read[0], path=p) for p in (b"!first", b"a-dir/new", b"\xff\xff")]
    for entries in (read, kept, kept + added, added):
        want = encode_index(entries, version=version, hash_name=object_format)
        pieces = encoded_index_pieces(entries, version=version, hash_name=object_format, source=idx)
        assert b"".join(pieces) == want
    if version != 4:
        assert _stored_runs(read, idx) == [len(read)]  # nothing changed: one run, the file's
        assert sum(_stored_runs(kept + added, idx)) == len(kept) - 1
        assert _stored_runs(added, idx) == []


def test_an_entry_stored_other_than_git_writes_it_is_encoded_again(tmp_path: Path) -> None:
    """An entry whose extended bit is set over a zero word (git derives the bit, so writes
    it without) makes the file's entries not to be copied as stored."""
    entry = IndexEntry(b"f", 0o100644, bytes(20), 1, 2, 3, 4, 5, 6, 7, 8, 9)
    plain = encode_index([entry])  # (version 2: no extended flags)
    odd = bytearray(b"DIRC" + (3).to_bytes(4, "big") + (1).to_bytes(4, "big"))
    odd += plain[12 : 12 + 60]  # the stat words and the object id, as encoded
    odd += (0x4000 | 1).to_bytes(2, "big") + b"\0\0"  # extended, name length 1; a zero word
    odd += b"f" + b"\0" * 7  # (62 + 2 + 1 bytes, padded to 72)
    odd += hashlib.sha1(odd).digest()
    idx = decode_index(bytes(odd))
    assert idx.entries == (entry,)
    assert idx.data == b""
    assert b"".join(encoded_index_pieces(idx.entries, source=idx)) == encode_index(idx.entries)


@pytest.mark.parametrize("version", [2, 4])
def test_round_trip_after_commit_strips_only_extensions(
    odd_repo: Path, object_format: str, version: int
) -> None:
    git(odd_repo, "commit", "-q", "-m", "c")
    make_git_index(odd_repo, version)
    data = index_path(odd_repo).read_bytes()
    idx = read_index(index_path(odd_repo))
    ours = encode_index(idx.entries, version=version, hash_name=object_format)
    rawsz = RAWSZ[object_format]

    assert b"TREE" in split_off_extensions(data, ours, rawsz)
    assert ours[:-rawsz] == data[: len(ours) - rawsz]
    assert ours[-rawsz:] == hashlib.new(object_format, ours[:-rawsz]).digest()


# --- order and merge stages ------------------------------------------------------------------


def test_unmerged_stages_are_ordered_and_git_agrees(tmp_path: Path) -> None:
    repo = init_repo(tmp_path, "sha1")
    oids = [git(repo, "hash-object", "-w", "--stdin", input=b"v%d\n" % i).strip() for i in range(3)]
    base = IndexEntry(b"conflict", 0o100644, b"", 0, 0, 0, 0, 0, 0, 0, 0, 0)
    stages = [
        dataclasses.replace(base, oid=bytes.fromhex(oid.decode()), flags=stage << 12)
        for stage, oid in zip((3, 1, 2), oids, strict=True)
    ]
    other = dataclasses.replace(stages[0], path=b"conflict.txt", flags=0)
    zz = dataclasses.replace(other, path=b"con", flags=FLAG_ASSUME_VALID)

    write_index(index_path(repo), [other, *stages, zz])

    idx = read_index(index_path(repo))
    assert [sort_key(e) for e in idx.entries] == [
        (b"con", 0),
        (b"conflict", 1),
        (b"conflict", 2),
        (b"conflict", 3),
        (b"conflict.txt", 0),
    ]
    assert [as_ls_files(e) for e in idx.entries] == ls_files_stage(repo)
    assert idx.entries[0].flags == FLAG_ASSUME_VALID
    assert git(repo, "ls-files", "-v", "con").startswith(b"h ")  # lowercase: assume-unchanged


@pytest.mark.parametrize("second_stage", [0, 2])
def test_duplicate_or_mixed_stage_entries_are_refused(tmp_path: Path, second_stage: int) -> None:
    a = IndexEntry(b"f", 0o100644, bytes(20), 0, 0, 0, 0, 0, 0, 0, 0, 0, flags=0)
    b = dataclasses.replace(a, flags=second_stage << 12)
    with pytest.raises(CorruptIndexError, match="f"):
        write_index(tmp_path / "index", [a, b])
    assert not (tmp_path / "index").exists() and not (tmp_path / "index.lock").exists()


# --- (5) the lock ----------------------------------------------------------------------------


def test_existing_lock_is_an_error_and_leaves_everything_alone(small_repo: Path) -> None:
    before = index_path(small_repo).read_bytes()
    lock = index_path(small_repo).with_name("index.lock")
    lock.write_bytes(b"someone else's")

    with pytest.raises(IndexLockError) as info:
        idx = read_index(index_path(small_repo))
        write_index(index_path(small_repo), idx.entries, hash_name=idx.hash_name)

    assert isinstance(info.value, PcheckoutError)
    assert f"Unable to create '{lock}': File exists." in str(info.value)
    assert "\n" not in str(info.value)
    assert lock.read_bytes() == b"someone else's"  # not ours to remove
    assert index_path(small_repo).read_bytes() == before


@pytest.mark.parametrize(
    "failure", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()]
)
def test_failure_mid_write_removes_the_lock(
    small_repo: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    before = index_path(small_repo).read_bytes()
    idx = read_index(index_path(small_repo))

    def half_then_fail(fd: int, data: bytes) -> None:
        write_all(fd, data[: len(data) // 2])
        assert index_path(small_repo).with_name("index.lock").stat().st_size == len(data) // 2
        raise failure

    monkeypatch.setattr(index_mod, "write_each", half_then_fail)
    expected = WriteError if isinstance(failure, OSError) else KeyboardInterrupt
    with pytest.raises(expected) as info:
        write_index(index_path(small_repo), idx.entries, version=4, hash_name=idx.hash_name)

    if expected is WriteError:
        assert "No space left on device" in str(info.value) and "index.lock" in str(info.value)
    assert not index_path(small_repo).with_name("index.lock").exists()
    assert index_path(small_repo).read_bytes() == before
    git(small_repo, "diff-files", "--quiet")


def test_missing_directory_is_a_write_error(tmp_path: Path) -> None:
    with pytest.raises(WriteError, match="index.lock"):
        write_index(tmp_path / "nope" / "index", [])


# --- refused and corrupt indexes -------------------------------------------------------------


def test_split_index_reads_as_the_whole_index(small_repo: Path) -> None:
    whole = read_index(index_path(small_repo))
    git(small_repo, "update-index", "--split-index")
    split = read_index(index_path(small_repo))
    assert split.split is not None and [e.path for e in split.entries] == [
        e.path for e in whole.entries
    ]


def test_split_index_without_its_shared_index_is_one_line(small_repo: Path) -> None:
    git(small_repo, "update-index", "--split-index")
    for p in (small_repo / ".git").glob("sharedindex.*"):
        p.unlink()
    with pytest.raises(IndexFileError, match="cannot read shared index"):
        read_index(index_path(small_repo))


def test_sparse_index_is_read_with_its_sparse_directories(tmp_path: Path) -> None:
    repo = init_repo(tmp_path, "sha1")
    write_file(repo, b"top.txt", b"t\n")
    write_file(repo, b"in/a.txt", b"a\n")
    write_file(repo, b"out/b.txt", b"b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c")
    git(repo, "sparse-checkout", "init", "--cone", "--sparse-index")
    git(repo, "sparse-checkout", "set", "in")
    index = read_index(index_path(repo))
    assert index.sparse
    by_path = {e.path: e for e in index.entries}
    out = by_path[b"out/"]
    assert out.mode == MODE_SPARSE_DIR
    assert out.extended_flags == EXT_FLAG_SKIP_WORKTREE
    assert out.oid.hex() == git(repo, "rev-parse", "HEAD:out").decode().strip()
    assert set(by_path) == {b"in/a.txt", b"out/", b"top.txt"}


def test_skip_worktree_entries_and_sdir_marker_are_written_as_git_reads_them(
    tmp_path: Path,
) -> None:
    """A collapsed index written here is one git accepts and expands (without a cache
    tree git does not keep it collapsed in memory): skip-worktree bits, version 3,
    zero stat data, ``sdir``."""
    repo = init_repo(tmp_path, "sha1")
    write_file(repo, b"in/a.txt", b"a\n")
    write_file(repo, b"out/b.txt", b"b\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c")
    theirs = read_index(index_path(repo))
    a = next(e for e in theirs.entries if e.path == b"in/a.txt")
    tree = bytes.fromhex(git(repo, "rev-parse", "HEAD:out").decode().strip())
    sdir = IndexEntry(b"out/", MODE_SPARSE_DIR, tree, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                      extended_flags=EXT_FLAG_SKIP_WORKTREE)  # fmt: skip
    rows = [
        (
            e.path,
            (
                e.ctime_s,
                e.ctime_ns,
                e.mtime_s,
                e.mtime_ns,
                e.dev,
                e.ino,
                e.mode,
                e.uid,
                e.gid,
                e.size,
                e.oid,
            ),
            0,
            e.extended_flags,
        )
        for e in (a, sdir)
    ]
    data = encode_rows(rows, 2, Encoding(extended=True, sparse_directories=True))
    (repo / "out" / "b.txt").unlink()  # git >= 2.36 clears the bit of a file that exists
    assert data[4:8] == b"\0\0\0\3"
    index_path(repo).write_bytes(bytes(data))
    git(repo, "config", "core.sparseCheckout", "true")
    git(repo, "config", "core.sparseCheckoutCone", "true")
    git(repo, "config", "index.sparse", "true")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "sparse-checkout").write_text("/*\n!/*/\n/in/\n")
    shown = git(repo, "ls-files", "--sparse", "-t", "-s").decode()
    assert "S 100644 61780798228d17af2d34fce4cfbdf35556832472 0\tout/b.txt" in shown
    assert git(repo, "ls-files", "-t").decode().splitlines() == ["H in/a.txt", "S out/b.txt"]
    assert git(repo, "status", "--porcelain") == b""
    assert decode_index(bytes(data)).sparse


def with_extension(data: bytes, sig: bytes, payload: bytes = b"") -> bytes:
    body = data[:-20] + struct.pack(">4sI", sig, len(payload)) + payload
    return body + hashlib.sha1(body).digest()


def test_optional_extensions_are_skipped_and_unknown_required_ones_refused() -> None:
    entry = IndexEntry(b"a", 0o100644, bytes(20), 1, 2, 3, 4, 5, 6, 7, 8, 9)
    data = encode_index([entry])
    for sig in (b"TREE", b"REUC", b"UNTR", b"FSMN", b"ZZZZ"):
        assert decode_index(with_extension(data, sig, b"\0" * 13)).entries == (entry,)
    assert decode_index(with_extension(data, b"sdir")).sparse
    with pytest.raises(UnsupportedIndexError, match="'wxyz'"):
        decode_index(with_extension(data, b"wxyz"))


def test_corrupt_indexes_are_clear_errors(small_repo: Path) -> None:
    data = index_path(small_repo).read_bytes()
    flipped = data[:40] + bytes([data[40] ^ 1]) + data[41:]
    cases = {
        b"": "bad signature",
        b"XXXX" + data[4:]: "bad signature",
        flipped: "checksum",
        data[:-1]: "checksum",
        data[:12] + bytes(20): "truncated",  # skipHash trailer, entries missing
        data[:4] + b"\0\0\0\x05" + data[8:]: "version 5",
    }
    for bad, message in cases.items():
        with pytest.raises(PcheckoutError, match=message):
            decode_index(bad)
    with pytest.raises(IndexFileError, match="cannot read index") as info:
        read_index(small_repo / "missing-index")
    assert info.value.errno == errno.ENOENT


def rehash(body: bytes) -> bytes:
    return body + hashlib.sha1(body).digest()


def test_unordered_entries_are_refused_like_git() -> None:
    a = IndexEntry(b"a", 0o100644, bytes(20), 1, 2, 3, 4, 5, 6, 7, 8, 9)
    data = encode_index([a, dataclasses.replace(a, path=b"b")])[:-20]
    swapped = data.replace(b"a\0", b"?\0").replace(b"b\0", b"a\0").replace(b"?\0", b"b\0")
    with pytest.raises(CorruptIndexError, match="unordered entries"):
        decode_index(rehash(swapped))
    stage2 = encode_index([dataclasses.replace(a, flags=2 << 12)])[:-20]
    twice = stage2[:8] + b"\0\0\0\x02" + stage2[12:] + stage2[12:]
    decode_index(rehash(stage2))
    with pytest.raises(CorruptIndexError, match="unordered stage entries"):
        decode_index(rehash(twice))


# --- (4) hashes and skipHash -----------------------------------------------------------------


@pytest.mark.parametrize("version", [2, 4])
def test_skip_hash_writes_zero_trailer_git_can_read(
    odd_repo: Path, object_format: str, version: int
) -> None:
    entries = entries_from_disk(odd_repo)
    write_index(
        index_path(odd_repo), entries, version=version, hash_name=object_format, skip_hash=True
    )
    data = index_path(odd_repo).read_bytes()
    assert data[-RAWSZ[object_format] :] == bytes(RAWSZ[object_format])
    idx = read_index(index_path(odd_repo))  # hash detected from the layout
    assert idx == Index(version, tuple(entries), object_format)
    assert [as_ls_files(e) for e in entries] == ls_files_stage(odd_repo)


def test_explicit_hash_name_and_wrong_oid_size(tmp_path: Path) -> None:
    entry = IndexEntry(b"a", 0o100644, bytes(32), 1, 2, 3, 4, 5, 6, 7, 8, 9)
    data = encode_index([entry], hash_name="sha256")
    assert decode_index(data, hash_name="sha256").hash_name == "sha256"
    with pytest.raises(CorruptIndexError):
        decode_index(data, hash_name="sha1")
    with pytest.raises(CorruptIndexError, match="20 bytes"):
        encode_index([entry], hash_name="sha1")
    with pytest.raises(UnsupportedIndexError):
        encode_index([entry], hash_name="md5")


# --- entries ---------------------------------------------------------------------------------


def test_from_stat_truncates_like_git() -> None:
    big = 2**32
    st = os.stat_result(
        (0o100644, big + 7, big + 3, 1, big + 11, big + 12, big + 13, 0, 0, 0)
        + (0.0, 0.0, 0.0)  # float times
        + ((big + 5) * 10**9 + 42, (big + 6) * 10**9 + 43, (big + 8) * 10**9 + 44)
    )
    e = IndexEntry.from_stat(b"p", 0o100755, bytes(20), st)
    assert (e.ctime_s, e.ctime_ns, e.mtime_s, e.mtime_ns) == (8, 44, 6, 43)
    assert (e.dev, e.ino, e.uid, e.gid, e.size) == (3, 7, 11, 12, 13)
    assert (e.mode, e.flags, e.extended_flags) == (0o100755, 0, 0)
    pre_epoch = os.stat_result((0,) * 10 + (0.0,) * 3 + (0, -1, -1))
    assert IndexEntry.from_stat(b"p", 0o100644, bytes(20), pre_epoch).mtime_s == 2**32 - 1
    assert IndexEntry.from_stat(b"p", 0o100644, bytes(20), pre_epoch).mtime_ns == 10**9 - 1


def test_read_entries_are_ordinary_frozen_entries(small_repo: Path) -> None:
    first = read_index(index_path(small_repo)).entries[0]
    assert type(first) is IndexEntry
    assert first == IndexEntry(*(getattr(first, f.name) for f in dataclasses.fields(IndexEntry)))
    assert hash(first) == hash(dataclasses.replace(first))
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.size = 1  # type: ignore[misc]


def test_field_out_of_range_and_bad_paths_are_refused() -> None:
    ok = IndexEntry(b"a", 0o100644, bytes(20), 1, 2, 3, 4, 5, 6, 7, 8, 9)
    for bad, message in [
        (dataclasses.replace(ok, size=2**32), "32"),
        (dataclasses.replace(ok, path=b"a\0b"), "path"),
        (dataclasses.replace(ok, path=b""), "path"),
    ]:
        with pytest.raises(CorruptIndexError, match=message):
            encode_index([bad])


def test_v4_varint_matches_git() -> None:
    # varint.c: 127 -> 7f, 128 -> 80 00, 16511 -> ff 7f, 16512 -> 80 80 00
    values = (0, 127, 128, 16511, 16512)
    assert [encode_varint(v).hex() for v in values] == [
        "00", "7f", "8000", "ff7f", "808000"
    ]  # fmt: skip
    assert [decode_varint(encode_varint(v) + b"x", 0) for v in values] == [
        (v, len(encode_varint(v))) for v in values
    ]
    long_a = b"z" * 300 + b"/a"
    entries = [
        IndexEntry(p, 0o100644, bytes(20), 1, 2, 3, 4, 5, 6, 7, 8, 9)
        for p in (b"a", long_a, b"zz{")
    ]
    data = encode_index(entries, version=4)
    assert decode_index(data).entries == tuple(entries)
    assert data[:-20].endswith(b"\x81\x2c{\0")  # "zz{": drop 300 of long_a's 302 bytes


@pytest.mark.parametrize("hash_name", ["sha1", "sha256"])
@pytest.mark.parametrize("version", [2, 3, 4])
def test_zero_stat_rows_encode_as_their_full_fields(hash_name: str, version: int) -> None:
    """A row given as (mode, oid) is the same bytes as its eleven fields with zero stat
    data, among ordinary rows, extended or not."""
    rawsz = RAWSZ[hash_name]
    paths = [b"a", b"a/b/c.txt", b"a/b/d", b"dir/" + b"n" * 0x1000, b"z"]

    def rows(short: bool) -> list[tuple[bytes, object, int, int]]:
        out: list[tuple[bytes, object, int, int]] = []
        for k, p in enumerate(paths):
            oid = bytes([k + 1]) * rawsz
            mode = 0o120000 if k == 2 else 0o100644
            ext = EXT_FLAG_SKIP_WORKTREE if k % 2 else 0
            if k == 0:  # real stat data
                out.append((p, (1, 2, 3, 4, 5, 6, mode, 7, 8, 9, oid), 0, ext))
            elif short:
                out.append((p, (mode, oid), 0, ext))
            else:
                out.append((p, (0, 0, 0, 0, 0, 0, mode, 0, 0, 0, oid), 0, ext))
        return out

    for extended in (False, True):
        picked = [r for r in rows(True) if extended or not r[3]]
        full = [r for r in rows(False) if extended or not r[3]]
        how = Encoding(version, hash_name, extended=extended)
        short_bytes = encode_rows(picked, len(picked), how)  # type: ignore[arg-type]
        assert short_bytes == encode_rows(full, len(full), how)  # type: ignore[arg-type]
        decoded = decode_index(bytes(short_bytes), hash_name=hash_name)
        assert [e.path for e in decoded.entries] == [r[0] for r in picked]


def test_fsmonitor_extension_read_as_git_reads_it() -> None:
    """Version 1's timestamp is read as its decimal token (fsmonitor.c
    read_fsmonitor_extension); positions past the entries, or another version, are no
    extension git would read."""
    from pcheckout.git import ewah, fsmonitor

    bitmap = ewah.encode([1])
    v1 = struct.pack(">IQI", 1, 1234567890123, len(bitmap)) + bitmap
    assert fsmonitor.read(v1, [b"a", b"b"]) == fsmonitor.Kept(b"1234567890123", frozenset({b"b"}))
    v2 = struct.pack(">I", 2) + b"tok\0" + struct.pack(">I", len(bitmap)) + bitmap
    assert fsmonitor.read(v2, [b"a", b"b"]) == fsmonitor.Kept(b"tok", frozenset({b"b"}))
    assert fsmonitor.read(v2, [b"a"]) is None
    assert fsmonitor.read(struct.pack(">I", 3) + v2[4:], [b"a", b"b"]) is None
    kept = fsmonitor.Kept(b"tok", frozenset({b"b"}), valid=frozenset({b"a", b"b", b"c"}))
    ext = fsmonitor.extension(kept, [(b"a", 0o100644), (b"b", 0o100644), (b"s", 0o160000)])
    assert ext[:4] == b"FSMN" and ext[8:] == v2[:8] + struct.pack(
        ">I", len(ewah.encode([1, 2]))
    ) + ewah.encode([1, 2])
    assert fsmonitor.enabled({"core.fsmonitor": "/hooks/query"})
    assert fsmonitor.enabled({"core.fsmonitor": "true"})
    assert not fsmonitor.enabled({"core.fsmonitor": "false"})
    assert not fsmonitor.enabled({})


def _many_entries(count: int) -> list[IndexEntry]:
    return [
        IndexEntry(b"d%03d/f%05d" % (i % 7, i), 0o100644, bytes([i % 256]) * 20, *(i,) * 9)
        for i in range(count)
    ]


@pytest.mark.parametrize("skip_hash", [False, True])
def test_an_index_in_pieces_is_the_index_encoded_whole(
    monkeypatch: pytest.MonkeyPatch, skip_hash: bool
) -> None:
    entries = sorted(_many_entries(3000), key=sort_key)
    how = Encoding(2, "sha1", skip_hash=skip_hash, extensions=b"TREE\0\0\0\0")
    whole = encode_rows(index_mod._rows(entries), len(entries), how)
    monkeypatch.setattr(index_mod, "INDEX_PIECE", 4096)
    monkeypatch.setattr(index_mod, "_ROWS_PER_LOOK", 1)
    pieces = list(encoded_pieces(index_mod._rows(entries), len(entries), how))
    assert len(pieces) > 10 and all(len(p) >= 4096 for p in pieces[:-1])
    assert b"".join(pieces) == whole
    assert list(decode_index(bytes(whole)).entries) == entries


def test_a_bad_row_after_pieces_were_written_leaves_the_index_as_it_was(
    small_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index committed as it is encoded (the fresh checkout's): a row refused half way
    leaves the index untouched and the lock gone, as a failure before any piece would."""
    from pcheckout.git.lock import IndexLock

    before = index_path(small_repo).read_bytes()
    monkeypatch.setattr(index_mod, "INDEX_PIECE", 256)
    monkeypatch.setattr(index_mod, "_ROWS_PER_LOOK", 1)
    entries = sorted(_many_entries(50), key=sort_key)
    rows = list(index_mod._rows(entries))
    rows[40] = (rows[40][0] + b"\0bad", *rows[40][1:])
    lock = IndexLock.acquire(index_path(small_repo))
    with pytest.raises(CorruptIndexError):
        lock.commit(encoded_pieces(iter(rows), len(rows), Encoding()))
    assert not lock.held
    assert index_path(small_repo).read_bytes() == before
    assert sorted(p.name for p in index_path(small_repo).parent.glob("index*")) == ["index"]
