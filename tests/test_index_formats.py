"""Index formats against git's own: a split index (core.splitIndex, sharedindex.<hex>, the
link extension's EWAH bitmaps), GIT_INDEX_FILE; both writers, git's result on the same repo."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from helpers import assert_same_as_git, clone_no_checkout, git, make_repo, write_tree_files

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.git import ewah, untracked
from pcheckout.git.index import EXT_HEADER, HEADER, decode_index, read_index
from pcheckout.options import Result

pytestmark = pytest.mark.usefixtures("writer")

FILES = {b"f%02d" % i: b"%d\n" % i for i in range(30)} | {b"d/x": b"x\n", b"d/e/y": b"y\n"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    src = make_repo(tmp_path, dict(FILES))
    git(src, "tag", "v1")
    write_tree_files(src, {b"f01": b"changed\n", b"new": b"new\n"})
    (src / "f02").unlink()
    git(src, "add", "-A")
    git(src, "commit", "-qm", "small")
    git(src, "tag", "small")
    write_tree_files(src, {p: b"big " + p + b"\n" for p in FILES if p.startswith(b"f1")})
    git(src, "add", "-A")
    git(src, "commit", "-qm", "big")
    git(src, "tag", "big")
    return src


def _extensions(data: bytes) -> dict[bytes, bytes]:
    """Every extension of the index ``data`` (sha1), by signature, walking its entries."""
    _, version, count = HEADER.unpack_from(data)
    assert version in (2, 3)
    off = HEADER.size
    for _ in range(count):
        (flags,) = struct.unpack_from(">H", data, off + 60)
        start = off + 62 + (2 if flags & 0x4000 else 0)
        n = data.index(b"\0", start) - start
        off += (start - off + n + 8) & ~7
    out = {}
    while off < len(data) - 20:
        sig, size = EXT_HEADER.unpack_from(data, off)
        out[sig] = data[off + 8 : off + 8 + size]
        off += 8 + size
    return out


def _shape(work: Path) -> tuple[object, ...]:
    """What git's split index says besides stat data: the paths stored in the index
    itself (empty: replacements), the bitmaps, whether the shared index git names
    exists and holds what git reads back."""
    data = (work / ".git" / "index").read_bytes()
    raw = decode_index(data, git_dir=b"/nonexistent") if b"link" not in data else None
    if raw is not None:
        return ("whole", len(raw.entries))
    link = _extensions(data)[b"link"]
    delete, used = ewah.decode(link, 20)
    replace, _ = ewah.decode(link, 20 + used)
    own = _own_paths(data)
    shared = work / ".git" / ("sharedindex." + link[:20].hex())
    assert shared.is_file(), shared
    assert b"link" not in _extensions(shared.read_bytes())
    return ("split", own, delete, replace)


def _own_paths(data: bytes) -> list[bytes]:
    _, _, count = HEADER.unpack_from(data)
    off, out = HEADER.size, []
    for _ in range(count):
        (flags,) = struct.unpack_from(">H", data, off + 60)
        start = off + 62 + (2 if flags & 0x4000 else 0)
        n = data.index(b"\0", start) - start
        out.append(data[start : start + n])
        off += (start - off + n + 8) & ~7
    return out


def _pair(tmp_path: Path, repo: Path, config: dict[str, str]) -> tuple[Path, Path]:
    return (
        clone_no_checkout(repo, tmp_path / "ours", config),
        clone_no_checkout(repo, tmp_path / "theirs", config),
    )


def _both(ours: Path, theirs: Path, rev: str) -> Result:
    git(theirs, "checkout", "-q", rev)
    return checkout(CheckoutOptions(directory=ours, rev=rev))


def _usable(work: Path) -> None:
    """git reads the index back: status is clean, a commit works, fsck is content."""
    assert git(work, "status", "--porcelain") == b""
    (work / "f05").write_bytes(b"edited\n")
    git(work, "commit", "-qam", "after")
    assert git(work, "status", "--porcelain") == b""
    git(work, "fsck", "--no-progress")


def _shared_files(work: Path) -> int:
    return sum(1 for p in (work / ".git").iterdir() if p.name.startswith("sharedindex."))


@pytest.mark.parametrize("expire", [None, "now"])
@pytest.mark.parametrize("second", ["small", "big"])
def test_split_index_checkout_and_switch_as_git(
    tmp_path: Path, repo: Path, second: str, expire: str | None
) -> None:
    config = {"core.splitIndex": "true"}
    if expire:
        config["splitIndex.sharedIndexExpire"] = expire
    ours, theirs = _pair(tmp_path, repo, config)
    _both(ours, theirs, "v1")
    assert_same_as_git(ours, theirs)
    assert _shape(ours) == _shape(theirs) == ("split", [], [], [])
    before = git(ours, "rev-parse", "HEAD").decode().strip()
    result = _both(ours, theirs, second)
    assert_same_as_git(ours, theirs)
    # the counts, with either writer (git's: from the split index it wrote)
    changed = git(ours, "diff", "--name-only", "-z", "--diff-filter=AMT", before, second)
    assert result.written == changed.count(b"\0")
    assert result.bytes == sum(
        (ours / p.decode()).stat().st_size for p in changed.split(b"\0") if p
    )
    assert git(ours, "ls-files", "-s", "-t") == git(theirs, "ls-files", "-s", "-t")
    shape = _shape(theirs)
    assert _shape(ours) == shape
    # small: a delta on the first shared index (f01 and new written, f01 f02 deleted);
    # big: more than 20% of the entries are new, so a new shared index
    assert (shape[1] == [b"f01", b"new"]) == (second == "small")
    # the first shared index is kept for two weeks, by default
    assert (
        _shared_files(ours) == _shared_files(theirs) == (2 if not expire and second == "big" else 1)
    )
    _usable(ours)


@pytest.mark.parametrize("setting", ["unset", "false"])
def test_an_index_split_by_update_index_follows_core_splitindex(
    tmp_path: Path, repo: Path, setting: str
) -> None:
    ours, theirs = _pair(tmp_path, repo, {})
    for w in (ours, theirs):
        git(w, "checkout", "-q", "v1")
        git(w, "update-index", "--split-index")
        if setting == "false":
            git(w, "config", "core.splitIndex", "false")
    _both(ours, theirs, "small")
    assert_same_as_git(ours, theirs)
    assert _shape(ours)[0] == _shape(theirs)[0] == ("split" if setting == "unset" else "whole")
    _usable(ours)


def test_a_split_index_with_replaced_entries_reads_as_git_reads_it(
    tmp_path: Path, repo: Path
) -> None:
    work = clone_no_checkout(repo, tmp_path / "w", {"splitIndex.maxPercentChange": "100"})
    git(work, "checkout", "-q", "v1")
    git(work, "update-index", "--split-index")  # (replaces the racily clean entries)
    git(work, "rm", "-q", "--cached", "f07")
    (work / "added").write_bytes(b"a\n")
    git(work, "add", "added")
    data = (work / ".git" / "index").read_bytes()
    link = _extensions(data)[b"link"]
    delete, used = ewah.decode(link, 20)
    replace, _ = ewah.decode(link, 20 + used)
    assert len(delete) == 1 and replace
    merged = read_index(work / ".git" / "index")
    whole = tmp_path / "whole"
    shutil.copytree(work, whole, symlinks=True)
    git(whole, "update-index", "--no-split-index")
    assert merged.entries == read_index(whole / ".git" / "index").entries
    assert merged.split is not None and len(merged.split.base) == len(FILES)


def _git_with_index(work: Path, *args: str) -> bytes:
    env = dict(os.environ, GIT_INDEX_FILE=str(work / ".git" / "other-index"))
    return subprocess.run(
        ["git", "-C", str(work), *args], env=env, check=True, capture_output=True
    ).stdout


def test_git_index_file_elsewhere(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = _pair(tmp_path, repo, {})
    for w in (ours, theirs):
        _git_with_index(w, "checkout", "-q", "v1")
    _git_with_index(theirs, "checkout", "-q", "small")
    monkeypatch.setenv("GIT_INDEX_FILE", str(ours / ".git" / "other-index"))
    checkout(CheckoutOptions(directory=ours, rev="small"))
    monkeypatch.delenv("GIT_INDEX_FILE")
    assert _git_with_index(ours, "status", "--porcelain") == b""
    assert _git_with_index(ours, "ls-files", "-s") == _git_with_index(theirs, "ls-files", "-s")
    assert _git_with_index(ours, "rev-parse", "HEAD") == _git_with_index(
        theirs, "rev-parse", "HEAD"
    )
    assert not (ours / ".git" / "index").exists()


def test_ewah_bytes_as_git_writes_them() -> None:
    # the delete bitmap git 2.39 wrote for positions 1 and 12 (and its empty bitmap)
    assert ewah.encode([1, 12]).hex() == (
        "0000000d000000020000000200000000000000000000100200000000"
    )
    assert ewah.encode([]).hex() == "0000000000000001000000000000000000000000"
    for positions in ([0], list(range(64)), list(range(200)), [5, 64 * 40, 64 * 40 + 3]):
        data = ewah.encode(positions)
        assert ewah.decode(data) == (positions, len(data))


def _tree(work: Path) -> bytes | None:
    return _extensions((work / ".git" / "index").read_bytes()).get(b"TREE")


@pytest.mark.parametrize("split", ["false", "true"])
def test_cache_tree_bytes_as_git_writes_them(tmp_path: Path, repo: Path, split: str) -> None:
    ours, theirs = _pair(tmp_path, repo, {"core.splitIndex": split})
    _both(ours, theirs, "v1")  # a fresh checkout
    assert _tree(ours) == _tree(theirs) is not None
    _both(ours, theirs, "small")  # a switch
    assert _tree(ours) == _tree(theirs)
    for w in (ours, theirs):  # kept through the switch: a staged change, an intent-to-add
        (w / "d" / "x").write_bytes(b"staged\n")
        git(w, "add", "d/x")
        (w / "d" / "e" / "ita").write_bytes(b"i\n")
        git(w, "add", "-N", "d/e/ita")
    _both(ours, theirs, "big")
    assert _tree(ours) == _tree(theirs)
    assert git(ours, "status", "--porcelain") == git(theirs, "status", "--porcelain")
    git(ours, "rm", "-q", "--cached", "d/e/ita")
    git(ours, "commit", "-qm", "staged")
    assert git(ours, "show", "--stat", "--format=", "HEAD").strip().startswith(b"d/x")


def test_cache_tree_kept_through_switches_as_git_keeps_it(tmp_path: Path) -> None:
    """A switch keeps the index's cache tree where nothing changed and computes the rest
    (the engine's from the one it read): nested changes, a directory that goes, a file
    that becomes a directory and back, a kept staged change and an intent-to-add below
    an unchanged directory, a directory left with an intent-to-add entry only."""
    files = {b"a/b/c/f%d" % i: b"%d\n" % i for i in range(4)}
    files |= {b"a/b/g": b"g\n", b"a/h/i": b"i\n", b"k/l/m": b"m\n", b"k/n": b"n\n", b"z": b"z\n"}
    files |= {b"x/y/only": b"only its content changes\n"}
    src = make_repo(tmp_path, files)
    git(src, "tag", "one")
    write_tree_files(src, {b"a/b/c/f1": b"changed\n", b"a/b/c/new/deep": b"d\n", b"q/r": b"r\n"})
    write_tree_files(src, {b"x/y/only": b"changed\n"})
    shutil.rmtree(src / "a" / "h")
    (src / "z").unlink()
    write_tree_files(src, {b"z/inside": b"now a directory\n"})
    git(src, "add", "-A")
    git(src, "commit", "-qm", "two")
    git(src, "tag", "two")
    ours, theirs = _pair(tmp_path, src, {})
    for rev in ("one", "two", "one"):
        _both(ours, theirs, rev)
        assert _tree(ours) == _tree(theirs) is not None
    for w in (ours, theirs):  # kept through the switch below directories that stay
        (w / "k" / "l" / "m").write_bytes(b"staged\n")
        git(w, "add", "k/l/m")
        (w / "a" / "h" / "ita").write_bytes(b"i\n")
        git(w, "add", "-N", "a/h/ita")
        git(w, "status", "--porcelain")  # (git's refresh writes the cache tree it can)
    for rev in ("two", "one"):
        _both(ours, theirs, rev)
        assert _tree(ours) == _tree(theirs)
        assert git(ours, "status", "--porcelain") == git(theirs, "status", "--porcelain")
        assert git(ours, "ls-files", "-s") == git(theirs, "ls-files", "-s")


def _untr(work: Path) -> tuple[object, ...] | None:
    """The index's untracked cache as stored, but for what differs between two work trees
    (its location in the ident, stat data): its flags and exclude-per-dir name, then each
    directory as written (git/untracked.py)."""
    data = (work / ".git" / "index").read_bytes()
    payload = _extensions(data).get(b"UNTR")
    if payload is None:
        return None
    cache = untracked.decode(payload, 20)
    assert cache is not None, payload
    assert cache.ident == untracked.ident(work)
    assert untracked.encode(cache)[8:] == payload
    dirs: list[tuple[object, ...]] = []

    def walk(d: untracked.Dir, where: bytes) -> None:
        dirs.append((where + d.name, d.valid, d.check_only, d.untracked, d.exclude_oid))
        for sub in d.dirs:
            walk(sub, where + d.name + b"/" if d.name else where)

    if cache.root is not None:
        walk(cache.root, b"")
    return cache.dir_flags, cache.header[-len(b".gitignore\0") :], dirs


def _populated(w: Path) -> None:
    """Untracked files at several depths, and the cache git status fills."""
    (w / "d" / "untracked").write_bytes(b"u\n")
    (w / "d" / "e" / "deep").write_bytes(b"u\n")
    (w / "loose").write_bytes(b"u\n")
    (w / "o" / "p").mkdir(parents=True)
    (w / "o" / "p" / "q").write_bytes(b"u\n")
    git(w, "status", "--porcelain")


@pytest.mark.parametrize(
    "config",
    [
        {"core.untrackedCache": "true"},
        {"feature.manyFiles": "true", "index.version": "2"},
        {"core.untrackedCache": "true", "status.showUntrackedFiles": "all"},
        {"core.untrackedCache": "true", "core.splitIndex": "true"},
    ],
    ids=["true", "manyfiles", "showall", "split"],
)
def test_untracked_cache_kept_and_invalidated_as_git_does(
    tmp_path: Path, repo: Path, config: dict[str, str]
) -> None:
    git(repo, "checkout", "-q", "small")
    write_tree_files(repo, {b"d/e/y": b"deeper\n", b"d/e/z/n": b"n\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "deep")
    git(repo, "tag", "deep")
    ours, theirs = _pair(tmp_path, repo, config)
    _both(ours, theirs, "v1")  # a fresh checkout: git starts an empty cache
    assert _untr(ours) == _untr(theirs) is not None
    for w in (ours, theirs):
        _populated(w)
        (w / "d" / "x").write_bytes(b"local\n")  # a local change the switches keep
    assert _untr(ours) == _untr(theirs)
    for rev in ("small", "deep", "v1"):
        _both(ours, theirs, rev)
        assert _untr(ours) == _untr(theirs)
        assert git(ours, "status", "--porcelain", "-uall") == git(
            theirs, "status", "--porcelain", "-uall"
        )
        assert git(ours, "status", "--porcelain") == git(theirs, "status", "--porcelain")
        assert _untr(ours) == _untr(theirs)  # (and as git status refreshed it)


@pytest.mark.parametrize("setting", ["false", "keep"])
def test_untracked_cache_dropped_or_kept_as_the_config_says(
    tmp_path: Path, repo: Path, setting: str
) -> None:
    ours, theirs = _pair(tmp_path, repo, {})
    for w in (ours, theirs):
        git(w, "checkout", "-q", "v1")
        git(w, "update-index", "--untracked-cache")
        _populated(w)
        git(w, "config", "core.untrackedCache", setting)
    _both(ours, theirs, "small")
    got = _untr(ours)
    assert got == _untr(theirs)
    assert (got is None) == (setting == "false")


#: An fsmonitor hook (query-fsmonitor, protocol 2) that always answers the same token and
#: no change: git's token and bitmap are then known, and pcheckout's must equal them.
FSMONITOR_HOOK = "#!/bin/sh\nprintf 'the-token\\0'\n"


def _fsmn(work: Path) -> bytes | None:
    return _extensions((work / ".git" / "index").read_bytes()).get(b"FSMN")


@pytest.mark.parametrize("config", [{}, {"core.splitIndex": "true"}], ids=["whole", "split"])
def test_fsmonitor_extension_kept_as_git_keeps_it(
    tmp_path: Path, repo: Path, config: dict[str, str]
) -> None:
    """git's checkout keeps FSMN: kept entries as they were, written ones dirty; without
    core.fsmonitor it drops it."""
    hook = tmp_path / "fsmonitor"
    hook.write_text(FSMONITOR_HOOK)
    hook.chmod(0o755)
    ours, theirs = _pair(tmp_path, repo, {**config, "core.fsmonitor": str(hook)})
    for w in (ours, theirs):
        git(w, "checkout", "-q", "v1")
        git(w, "status", "--porcelain")  # (git adds the extension, the hook's token)
        (w / "d" / "x").write_bytes(b"a local change the switches keep\n")
    assert _fsmn(ours) == _fsmn(theirs) is not None
    for rev in ("small", "big", "v1"):
        _both(ours, theirs, rev)
        assert _fsmn(ours) == _fsmn(theirs), rev
        assert git(ours, "status", "--porcelain") == git(theirs, "status", "--porcelain")
    for w in (ours, theirs):
        git(w, "config", "--unset", "core.fsmonitor")
    _both(ours, theirs, "small")
    assert _fsmn(ours) is None and _fsmn(theirs) is None


def test_resolve_undo_dropped_as_git_drops_it(tmp_path: Path, repo: Path) -> None:
    """git 2.39's checkout does not keep REUC (unpack-trees.c builds a new index and moves
    only the cache tree and the untracked cache into it: move_index_extensions)."""
    ours, theirs = _pair(tmp_path, repo, {})
    for w in (ours, theirs):
        git(w, "checkout", "-q", "-b", "one", "v1")
        (w / "f03").write_bytes(b"one\n")
        git(w, "commit", "-qam", "one")
        git(w, "checkout", "-q", "-b", "two", "v1")
        (w / "f03").write_bytes(b"two\n")
        git(w, "commit", "-qam", "two")
        git(w, "merge", "-q", "one", check=False)  # a conflict in f03
        (w / "f03").write_bytes(b"resolved\n")
        git(w, "add", "f03")
        git(w, "commit", "-q", "--no-edit")
        assert b"REUC" in _extensions((w / ".git" / "index").read_bytes())
    _both(ours, theirs, "small")
    assert (
        _extensions((ours / ".git" / "index").read_bytes()).keys()
        == _extensions((theirs / ".git" / "index").read_bytes()).keys()
    )
    assert b"REUC" not in _extensions((ours / ".git" / "index").read_bytes())
    assert_same_as_git(ours, theirs)
