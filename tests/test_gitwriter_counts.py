"""What git's writer reports: the bytes it wrote (from the index it left) and a switch's
writes and deletions (from the two trees' diff), the same as pcheckout's engine reports."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, git, make_repo

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.cli import render
from pcheckout.decide.merge import Before
from pcheckout.errors import GitError
from pcheckout.export import ExportOptions, export
from pcheckout.git import tree
from pcheckout.git.indexformat import (
    EXT_FLAG_SKIP_WORKTREE,
    SIZE,
    read_header,
    walk_entries,
    walk_sizes,
)
from pcheckout.git.indexsize import worktree_bytes, written_bytes
from pcheckout.git.runner import Git
from pcheckout.git.tree import TreeChanges, list_tree, old_side, read_trees, tree_changes

FILES: dict[bytes, bytes | tuple[str, bytes]] = {
    **{b"d%d/f%03d.txt" % (i % 5, i): b"line %d\n" % i * (i % 7 + 1) for i in range(150)},
    b"run.sh": ("x", b"#!/bin/sh\necho hi\n"),
    b"link": ("l", b"d0/f000.txt"),
    b"crlf/a.txt": b"one\ntwo\nthree\n",  # converted: written larger than stored
    b".gitattributes": b"crlf/*.txt text eol=crlf\n",
}


def _on_disk(root: Path) -> int:
    """Every file's size and every symlink's target length under ``root`` (not .git)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        total += sum(os.lstat(os.path.join(dirpath, f)).st_size for f in filenames)
    return total


def _two_versions(tmp_path: Path) -> Path:
    src = make_repo(tmp_path, FILES)
    git(src, "tag", "v1")
    for i in range(0, 150, 3):
        (src / f"d{i % 5}" / f"f{i:03d}.txt").write_bytes(b"changed %d\n" % i)
    for i in range(1, 150, 10):
        (src / f"d{i % 5}" / f"f{i:03d}.txt").unlink()
    (src / "new").mkdir()
    (src / "new" / "file").write_bytes(b"added\n" * 30)
    (src / "crlf" / "a.txt").write_bytes(b"four\nfive\n")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "two")
    git(src, "tag", "v2")
    return src


@pytest.mark.parametrize("writer", ["pcheckout", "git"])
def test_fresh_checkout_counts_the_bytes_on_disk(tmp_path: Path, writer: str) -> None:
    src = make_repo(tmp_path, FILES)
    ours = clone_no_checkout(src, tmp_path / "ours")
    result = checkout(CheckoutOptions(directory=ours, writer=writer))
    assert result.plan.writer == writer
    assert result.bytes == _on_disk(ours) > 0  # converted sizes, symlink targets
    assert result.written == result.files == len(FILES)
    assert "bytes not counted" not in render.summary(result)


def test_sparse_checkout_by_git_counts_what_it_wrote(tmp_path: Path) -> None:
    src = make_repo(tmp_path, FILES)
    got = {}
    for writer in ("pcheckout", "git"):
        w = clone_no_checkout(src, tmp_path / writer)
        git(w, "sparse-checkout", "set", "--cone", "d1", "crlf")
        result = checkout(CheckoutOptions(directory=w, writer=writer))
        assert result.bytes == _on_disk(w)
        got[writer] = result.bytes
    assert got["git"] == got["pcheckout"]


@pytest.mark.parametrize("force", [False, True])
def test_switch_by_git_reports_what_the_engine_reports(tmp_path: Path, force: bool) -> None:
    src = _two_versions(tmp_path)
    reports = {}
    for writer in ("pcheckout", "git"):
        w = clone_with_git(src, tmp_path / writer, rev="v1")
        result = checkout(CheckoutOptions(directory=w, rev="v2", writer=writer, force=force))
        assert result.mode == "switch" and result.plan.writer == writer
        reports[writer] = (result.files, result.written, result.deleted, result.bytes)
    engine = reports["pcheckout"]
    assert engine[2] == 15 and engine[3] > 0  # 15 files deleted; the bytes counted
    assert reports["git"] == engine


@pytest.mark.parametrize("sparse_index", [False, True])
def test_sparse_switch_by_git_counts_only_the_cone(tmp_path: Path, sparse_index: bool) -> None:
    src = _two_versions(tmp_path)
    reports = {}
    for writer in ("pcheckout", "git"):
        w = clone_with_git(src, tmp_path / writer, rev="v1")
        git(w, "sparse-checkout", "set", "--cone", *(["--sparse-index"] if sparse_index else []),
            "d2", "crlf")  # fmt: skip
        result = checkout(CheckoutOptions(directory=w, rev="v2", writer=writer))
        assert result.mode == "switch" and result.plan.writer == writer
        reports[writer] = (result.files, result.written, result.deleted, result.bytes)
    assert reports["pcheckout"][2] == 0  # the 15 deletions are all in d1, outside the cone
    assert reports["git"] == reports["pcheckout"]


def test_counts_not_asked_are_not_read_back_and_change_nothing_written(tmp_path: Path) -> None:
    """``counts=False`` (the CLI's -q): git's writer's index is not read back; the Result
    says what git was asked (the files, a switch's deletions) and bytes -1, and the work
    tree, index and HEAD are those of a run that counts."""
    src = _two_versions(tmp_path)
    runs = {}
    for counts in (True, False):
        w = clone_no_checkout(src, tmp_path / f"counts-{counts}")
        fresh = checkout(CheckoutOptions(directory=w, rev="v1", writer="git", counts=counts))
        switch = checkout(CheckoutOptions(directory=w, rev="v2", writer="git", counts=counts))
        runs[counts] = (fresh, switch, w)
    (fresh, switch, w), (fresh_n, switch_n, w_n) = runs[True], runs[False]
    assert (fresh_n.files, fresh_n.written, fresh_n.bytes) == (fresh.files, fresh.written, -1)
    assert (switch_n.written, switch_n.deleted, switch_n.bytes) == (
        switch.written,
        switch.deleted,
        -1,
    )
    assert switch.bytes > 0 and switch.deleted == 15
    assert_same_as_git(w_n, w)
    assert "bytes not counted" in render.summary(switch_n)


def test_switch_by_git_in_summary_and_json(tmp_path: Path) -> None:
    src = _two_versions(tmp_path)
    w = clone_with_git(src, tmp_path / "w", rev="v1")
    result = checkout(CheckoutOptions(directory=w, rev="v2", writer="git"))
    report = result.to_json()
    assert report["deleted"] == 15 and isinstance(report["bytes"], int) and report["bytes"] > 0
    line = render.summary(result)
    assert "by git's checkout" in line and "deleted 15" in line and "-1" not in line


def test_export_by_git_counts_the_bytes(tmp_path: Path) -> None:
    src = make_repo(tmp_path, FILES)
    got = {}
    for writer in ("pcheckout", "git"):
        dest = tmp_path / f"export-{writer}"
        result = export(ExportOptions(repository=src, rev="HEAD", destination=dest, writer=writer))
        assert result.plan.writer == writer
        got[writer] = result.bytes
        assert result.bytes == _on_disk(dest)
    assert got["git"] == got["pcheckout"]


def test_tree_changes_lists_writes_and_deletions(tmp_path: Path) -> None:
    src = _two_versions(tmp_path)
    tree = {r: git(src, "rev-parse", f"{r}^{{tree}}").decode().strip() for r in ("v1", "v2")}
    changes = tree_changes(Git(src), tree["v1"], tree["v2"])
    assert len(changes.deleted) == 15
    assert b"new/file" in changes.written and b"crlf/a.txt" in changes.written
    assert len(changes.written) == 50 - 5 + 2  # changed (but not deleted), added, crlf
    # Each written path with the mode the new tree gives it.
    new = {e.path: e.mode for e in list_tree(Git(src), tree["v2"])}
    assert changes.modes == [new[p] for p in changes.written]
    assert tree_changes(Git(src), tree["v2"], tree["v2"]) == TreeChanges([], [], [])


def test_a_submodule_marked_ignore_all_still_moves(tmp_path: Path) -> None:
    # diff-tree leaves out a gitlink whose submodule is "ignore = all" (.gitmodules or the
    # config) unless told otherwise; git's checkout moves it all the same.
    src = make_repo(tmp_path, {b".gitmodules": b'[submodule "s"]\n\tpath = s\n\turl = ./s\n'})
    git(src, "config", "submodule.s.ignore", "all")
    (src / ".gitmodules").write_bytes((src / ".gitmodules").read_bytes() + b"\tignore = all\n")
    for k, rev in enumerate(("v1", "v2")):
        git(src, "update-index", "--add", "--cacheinfo", f"160000,{str(k + 1) * 40},s")
        git(src, "commit", "-qm", rev, "--allow-empty")  # (commit ignores it too)
        git(src, "tag", rev)
    assert git(src, "rev-parse", "v2:s").strip() == b"2" * 40
    assert tree_changes(Git(src), "v1", "v2").written == [b"s"]
    gitlink = tree.Entry(b"s", 0o160000, "1" * 40, -1)
    assert old_side(Git(src), "v1", "v2").entries == {b"s": gitlink}


def test_heads_tree_from_the_targets_listing_and_the_diff(tmp_path: Path) -> None:
    src = _two_versions(tmp_path)
    (src / "d1").rename(src / "d1-was-a-dir")
    (src / "d1").write_bytes(b"now a file\n")  # (a directory becomes a file)
    (src / "new" / "file").unlink()
    (src / "new" / "file").mkdir()  # (and a file a directory)
    (src / "new" / "file" / "inside").write_bytes(b"x\n")
    os.chmod(src / "d0" / "f000.txt", 0o755)
    git(src, "add", "-A")
    git(src, "commit", "-qm", "three")
    for old, new in (("v1", "v2"), ("v2", "HEAD"), ("HEAD", "v1"), ("v2", "v2")):
        listing = {e.path: e for e in list_tree(Git(src), new)}
        head = Before(listing, old_side(Git(src), old, new).entries)
        want = {e.path: e for e in list_tree(Git(src), old)}
        assert dict(head) == want and len(head) == len(want)
        assert all(head.get(p) == want.get(p) for p in listing.keys() | want.keys())


def _subtrees(repo: Path, rev: str) -> set[tuple[bytes, str]]:
    """(path, id) of every subtree of ``rev``'s tree."""
    out = git(repo, "ls-tree", "-r", "-t", "-z", rev)
    return {
        (path, meta.split(b" ")[2].decode())
        for meta, path in (rec.split(b"\t", 1) for rec in out.split(b"\0") if rec)
        if meta.split(b" ")[1] == b"tree"
    }


def test_tree_changes_names_the_subtrees_that_changed(tmp_path: Path) -> None:
    src = _two_versions(tmp_path)
    git(src, "rm", "-rq", "--cached", "d2")
    git(src, "commit", "-qm", "three: d2 removed")
    changes = tree_changes(Git(src), "v1", "HEAD")
    changed = _subtrees(src, "HEAD") - _subtrees(src, "v1")
    assert sorted(changes.trees) == sorted(oid for _, oid in changed)
    assert {p for p, _ in changed} >= {b"new", b"d1", b"crlf"}
    assert not any(p.startswith(b"d2/") for p in changes.written)  # (removed, not written)
    assert b"d2/f002.txt" in changes.deleted and b"d2" not in changes.deleted
    # read_trees: each object as git stores it
    root = git(src, "rev-parse", "HEAD^{tree}").decode().strip()
    ids = [root, *changes.trees]
    raw = list(read_trees(Git(src), ids))
    assert raw == [git(src, "cat-file", "tree", oid) for oid in ids]


def test_read_trees_streams_large_trees_and_stops_git_when_closed(tmp_path: Path) -> None:
    names = {b"dir/%05d-%s.txt" % (i, b"x" * 40): b"%d\n" % i for i in range(3000)}
    src = make_repo(tmp_path, {**names, b"top": b"top\n"})
    ids = [git(src, "rev-parse", f"HEAD^{{tree}}:{p}").decode().strip() for p in ("", "dir")]
    raw = list(read_trees(Git(src), ids * 3))
    assert len(raw[1]) > 3 * tree.READ_CHUNK  # (one tree over several reads)
    assert raw == [git(src, "cat-file", "tree", oid) for oid in ids * 3]
    trees = read_trees(Git(src), ids * 500)
    assert next(trees) == raw[0]
    trees.close()  # git, still answering, is stopped and reaped
    assert not [p for p in psutil.Process().children(recursive=True) if "cat-file" in p.name()]
    with pytest.raises(GitError, match="unexpected cat-file answer for tree"):
        list(read_trees(Git(src), [ids[0], "0" * 40]))
    blob = git(src, "rev-parse", "HEAD:top").decode().strip()
    with pytest.raises(GitError, match="unexpected cat-file answer for tree"):
        list(read_trees(Git(src), [blob]))


# --- the index walk -------------------------------------------------------------------------------


def _index(w: Path) -> bytes:
    return (w / ".git" / "index").read_bytes()


#: A path of 0xFFF bytes or more: its length is not in the flags (the walk finds the NUL).
#: Longer than PATH_MAX, so it is only in the index (size 0), sorted before run.sh.
LONG = b"/".join([b"n" * 200] * 21) + b"/file"


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_index_walk_sums_every_version(tmp_path: Path, version: str) -> None:
    src = make_repo(tmp_path, FILES)
    w = clone_with_git(src, tmp_path / "w")
    blob = git(w, "hash-object", "-w", "--stdin", input=b"long\n").decode().strip()
    git(w, "update-index", "--add", "--cacheinfo", f"100644,{blob},{LONG.decode()}")
    git(w, "update-index", "--index-version", version)
    if version == "3":  # an extended flags word on one entry
        git(w, "update-index", "--skip-worktree", "run.sh")
    data = _index(w)
    assert data[4:8] == int(version).to_bytes(4, "big") and len(LONG) > 0xFFF
    assert worktree_bytes(data, "sha1") == _on_disk(w)
    only = {b"run.sh", b"link", LONG}
    run_sh = 0 if version == "3" else len(b"#!/bin/sh\necho hi\n")  # skip-worktree: not counted
    assert worktree_bytes(data, "sha1", only) == run_sh + len(b"d0/f000.txt")


def test_index_walk_sha256(tmp_path: Path) -> None:
    w = tmp_path / "w"
    git(tmp_path, "init", "-q", "--object-format=sha256", "w")
    (w / "a").write_bytes(b"12345")
    (w / "b").write_bytes(b"x" * 10)
    git(w, "add", "-A")
    data = _index(w)
    assert worktree_bytes(data, "sha256") == 15
    assert worktree_bytes(data, "sha256", {b"b"}) == 10


def test_unreadable_index_is_unknown_bytes(tmp_path: Path) -> None:
    src = make_repo(tmp_path, FILES)
    w = clone_with_git(src, tmp_path / "w")
    data = _index(w)
    cut = tmp_path / "cut"
    cut.write_bytes(data[:200])
    assert written_bytes(cut, "sha1") == -1
    assert written_bytes(tmp_path / "missing", "sha1") == -1
    assert written_bytes(w / ".git" / "index", "sha1") == _on_disk(w)


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_the_quick_size_walk_is_the_walk_or_says_it_cannot(tmp_path: Path, version: str) -> None:
    src = make_repo(tmp_path, FILES)
    w = clone_with_git(src, tmp_path / "w")
    git(w, "update-index", "--index-version", version)
    if version == "3":
        git(w, "update-index", "--skip-worktree", "run.sh")
    data = _index(w)
    ver, count = read_header(data, b"index")
    walked = walk_entries(data, ver, count, "sha1", b"index")
    for only in (None, {b"run.sh", b"link", b"d1/f001.txt"}):
        quick = walk_sizes(data, ver, count, "sha1", only)
        if version == "4":
            assert quick is None
            continue
        chosen = [
            f[SIZE]
            for n, f, ext in zip(walked.names, walked.fixed, walked.extended, strict=True)
            if only is None or (n in only and not ext & EXT_FLAG_SKIP_WORKTREE)
        ]
        assert quick == (len(chosen), sum(chosen), walked.end)
    # a name of 0xFFF bytes or more, or entries cut short: walked as before
    blob = git(w, "hash-object", "-w", "--stdin", input=b"long\n").decode().strip()
    git(w, "update-index", "--add", "--cacheinfo", f"100644,{blob},{LONG.decode()}")
    data = _index(w)
    assert walk_sizes(data, *read_header(data, b"index"), "sha1", None) is None
    assert walk_sizes(data[:300], ver, count, "sha1", None) is None
