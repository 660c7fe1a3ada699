"""Loose objects read in-process (git/odb.py) and written by the engine: the bytes git
gives, wherever git would find them (the repository, alternates, the environment), and
git's answer where the loose object is gone or damaged."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, git, make_repo

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.errors import CorruptObjectError
from pcheckout.git import odb

FILES: dict[bytes, bytes | tuple[str, bytes]] = {
    b"empty": b"",
    b"small.txt": b"hello\n",
    b"bin/blob": bytes(range(256)) * 64,
    b"run.sh": ("x", b"#!/bin/sh\necho hi\n"),
    b"link": ("l", b"small.txt"),
    # over catfile.SMALL_BLOB (1 MiB): streamed in pieces; compressible and not
    b"big/zeros": b"\0" * (3 << 20),
    b"big/noise": os.urandom(1 << 20) + b"tail",
    **{b"d%d/f%d.c" % (d, f): b"/* %d %d */\n" % (d, f) * f for d in range(6) for f in range(9)},
}


def _checkout(work: Path, **kw: object) -> object:
    return checkout(CheckoutOptions(directory=work, rev="HEAD", writer="pcheckout", **kw))  # type: ignore[arg-type]


def _loose_count(objects: Path) -> int:
    return sum(1 for p in objects.glob("[0-9a-f][0-9a-f]/*") if p.is_file())


def _blobs(repo: Path) -> list[str]:
    out = git(repo, "ls-tree", "-r", "HEAD").decode()
    return [line.split()[2] for line in out.splitlines() if line.split()[1] == "blob"]


def test_reads_the_bytes_git_gives(tmp_path: Path) -> None:
    src = make_repo(tmp_path, FILES)
    loose = odb.scan(odb.object_dirs(src / ".git", src), 40)
    blobs = _blobs(src)
    assert len(loose) >= len(blobs)
    for oid in blobs:
        obj = loose.open(oid)
        assert obj is not None and obj.kind == b"blob"
        assert obj.read_small(obj.size) == git(src, "cat-file", "blob", oid)
    obj = loose.open(git(src, "rev-parse", "HEAD^{tree}").decode().strip())
    assert obj is not None and obj.kind == b"tree"
    obj.close()
    assert loose.open("0" * 40) is None


@pytest.mark.parametrize("workers", [1, 8])
def test_loose_only_repository(tmp_path: Path, workers: int) -> None:
    src = make_repo(tmp_path, FILES)
    ours = clone_no_checkout(src, tmp_path / "ours")
    assert _loose_count(ours / ".git" / "objects") > len(FILES)
    assert not list((ours / ".git" / "objects" / "pack").glob("*.pack"))
    theirs = clone_with_git(src, tmp_path / "theirs")
    _checkout(ours, workers=workers)
    assert_same_as_git(ours, theirs)


def test_borrowed_through_alternates(tmp_path: Path) -> None:
    """A clone --shared of a clone --shared: the objects two alternates away, loose."""
    src = make_repo(tmp_path, FILES)
    mid = tmp_path / "mid"
    git(tmp_path, "clone", "-q", "--bare", "--shared", str(src), str(mid))
    ours = tmp_path / "ours"
    git(tmp_path, "clone", "-q", "--no-checkout", "--shared", str(mid), str(ours))
    dirs = odb.object_dirs(ours / ".git", ours)
    want = [ours / ".git" / "objects", mid / "objects", src / ".git" / "objects"]
    assert dirs == [d.resolve() for d in want]
    assert _loose_count(ours / ".git" / "objects") == 0
    theirs = clone_with_git(src, tmp_path / "theirs")
    _checkout(ours, workers=4)
    assert_same_as_git(ours, theirs)


def test_alternates_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = make_repo(tmp_path, FILES)
    ours = tmp_path / "ours"
    git(tmp_path, "clone", "-q", "--no-checkout", "--shared", str(src), str(ours))
    (ours / ".git/objects/info/alternates").unlink()  # now only the environment names them
    monkeypatch.setenv("GIT_ALTERNATE_OBJECT_DIRECTORIES", str(src / ".git" / "objects"))
    dirs = odb.object_dirs(ours / ".git", ours)
    assert (src / ".git/objects").resolve() in dirs
    theirs = clone_with_git(src, tmp_path / "theirs")
    _checkout(ours, workers=4)
    assert_same_as_git(ours, theirs)


def test_alternates_file_rules(tmp_path: Path) -> None:
    """Comments, blank lines, relative paths, a C-quoted name, a loop."""
    objects = tmp_path / "a" / "objects"
    other = tmp_path / "b\tc" / "objects"
    for d in (objects, other):
        (d / "info").mkdir(parents=True)
    (objects / "info" / "alternates").write_text('# comment\n\n"../../b\\tc/objects"\n../objects\n')
    (other / "info" / "alternates").write_text(str(objects) + "\n")
    assert odb.object_dirs(tmp_path / "a", tmp_path) == [objects, other]


def test_packed_and_loose_mixed(tmp_path: Path) -> None:
    src = make_repo(tmp_path, FILES)
    git(src, "repack", "-adq")
    (src / "more").mkdir()
    for i in range(20):
        (src / "more" / f"n{i}").write_bytes(b"new %d\n" % i)
    (src / "small.txt").write_bytes(b"changed\n")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "two")
    ours = clone_no_checkout(src, tmp_path / "ours")
    objects = ours / ".git" / "objects"
    assert _loose_count(objects) >= 21 and list((objects / "pack").glob("*.pack"))
    theirs = clone_with_git(src, tmp_path / "theirs")
    _checkout(ours, workers=4)
    assert_same_as_git(ours, theirs)


def test_gone_since_the_listing_is_read_from_the_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed loose, then packed and pruned (a gc meanwhile): git's answer is written."""
    src = make_repo(tmp_path, FILES)
    ours = clone_no_checkout(src, tmp_path / "ours")
    scan = odb.scan

    def scan_then_gc(dirs: list[Path], oid_len: int, threads: int = 1) -> odb.LooseObjects:
        listed = scan(dirs, oid_len, threads)
        git(ours, "repack", "-adq")
        git(ours, "prune-packed")
        return listed

    monkeypatch.setattr(odb, "scan", scan_then_gc)
    _checkout(ours, workers=3)
    assert _loose_count(ours / ".git" / "objects") == 0
    assert_same_as_git(ours, clone_with_git(src, tmp_path / "theirs"))


def _damage(objects: Path, oid: str, data: bytes) -> None:
    path = objects / oid[:2] / oid[2:]
    path.chmod(0o644)
    path.write_bytes(data)


def _oid(repo: Path, path: str) -> str:
    return git(repo, "rev-parse", f"HEAD:{path}").decode().strip()


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[: len(raw) // 2],  # cut short
        lambda raw: raw[:10] + bytes(20) + raw[30:],  # not zlib any more
        lambda raw: zlib.compress(b"blob 99\0short"),  # a size that does not match
        lambda raw: zlib.compress(b"nonsense"),  # no header
    ],
    ids=["cut", "garbled", "size", "header"],
)
def test_damaged_loose_object_is_a_clear_error(tmp_path: Path, damage: object) -> None:
    src = make_repo(tmp_path, FILES)
    ours = clone_no_checkout(src, tmp_path / "ours")
    oid = _oid(ours, "bin/blob")
    objects = ours / ".git" / "objects"
    raw = (objects / oid[:2] / oid[2:]).read_bytes()
    _damage(objects, oid, damage(raw))  # type: ignore[operator]
    with pytest.raises(CorruptObjectError) as info:
        _checkout(ours, workers=2)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"object {oid} for bin/blob is damaged in the repository (")


def test_sha256_repository(tmp_path: Path) -> None:
    src = tmp_path / "src"
    git(tmp_path, "init", "-q", "--object-format=sha256", "-b", "main", str(src))
    for name, data in ((b"a.txt", b"one\n"), (b"d/b.bin", bytes(range(200)) * 9)):
        path = src / os.fsdecode(name)
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
    git(src, "add", "-A")
    git(src, "commit", "-qm", "one")
    loose = odb.scan(odb.object_dirs(src / ".git", src), 64)
    assert _oid(src, "a.txt") in loose
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_with_git(src, tmp_path / "theirs")
    _checkout(ours, workers=2)
    assert_same_as_git(ours, theirs)


def test_converted_entries_from_loose_objects(tmp_path: Path) -> None:
    """In-process conversions (ident, CRLF) apply to blobs read loose; a filter driver's
    entries stay git's (cat-file --filters)."""
    files: dict[bytes, bytes | tuple[str, bytes]] = {
        b".gitattributes": b"*.crlf eol=crlf\n*.id ident\n*.up filter=upper\n",
        b"a.crlf": b"one\ntwo\n",
        b"b.id": b"$Id$\nbody\n",
        b"c.up": b"shout\n",
        b"plain": b"as stored\r\n",
    }
    config = {"filter.upper.smudge": "tr a-z A-Z", "filter.upper.clean": "tr A-Z a-z"}
    src = make_repo(tmp_path, files, config=config)
    theirs = clone_with_git(src, tmp_path / "theirs", config=config)
    ours = clone_no_checkout(src, tmp_path / "ours", config=config)
    _checkout(ours, workers=3)
    assert (ours / "c.up").read_bytes() == b"SHOUT\n"
    assert (ours / "a.crlf").read_bytes() == b"one\r\ntwo\r\n"
    assert_same_as_git(ours, theirs)
