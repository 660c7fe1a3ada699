"""The target's listing and the sparse pattern file, read beside round 1 (checkout.py
``_early``): the listing used only when it is provably of the tree that REV resolved to,
for fresh checkouts and resumes; nothing guessed at for a switch.  And what a thread does
meanwhile (``_Ahead``): the filesystem detected, the engine's modules imported where it
will write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, git, make_repo, run_cli

from pcheckout import checkout as checkout_mod
from pcheckout import session
from pcheckout.fs import detect as detect_mod
from pcheckout.git import tree as tree_mod
from pcheckout.git.runner import MIN_GIT, Git
from pcheckout.git.tree import list_rooted, list_tree
from pcheckout.options import CheckoutOptions
from pcheckout.plan import planner

NAMES = [b"a", b"a.b", b"a0", b"b\nnl", b"tab\there", b"back\\slash", b"caf\xe9", b"z"]


def _odd_repo(base: Path, object_format: str) -> Path:
    """Names that sort around directories, bytes that are not UTF-8, every mode."""
    repo = base / f"src-{object_format}"
    git(base, "init", "-q", "-b", "main", f"--object-format={object_format}", repo.name)
    rb = os.fsencode(repo)
    for top in NAMES:
        if top == b"a":
            os.makedirs(rb + b"/a/b/c")
            for n in (b"a/x", b"a/b/c/y", b"a/b.c"):
                with open(rb + b"/" + n, "wb") as f:
                    f.write(n + b"\n")
        else:
            with open(rb + b"/" + top, "wb") as f:
                f.write(top)
    os.chmod(rb + b"/z", 0o755)
    os.symlink(b"a/x", rb + b"/link")
    git(repo, "add", "-A")
    oid = "1" * (64 if object_format == "sha256" else 40)
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{oid},sub")
    git(repo, "commit", "-q", "-m", "one")
    return repo


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_the_rooted_listing_rebuilds_the_tree_id_git_has(
    tmp_path: Path, object_format: str
) -> None:
    repo = _odd_repo(tmp_path, object_format)
    g = Git(repo, version=(*MIN_GIT, 0))
    listing = list_rooted(g, "HEAD")
    tree = git(repo, "rev-parse", "HEAD^{tree}").decode().strip()
    assert listing.tree_id(object_format) == tree
    assert listing.entries == list_tree(g, tree)
    assert {e.mode for e in listing.entries} == {0o100644, 0o100755, 0o120000, 0o160000}
    # another tree's listing does not pass for this one
    git(repo, "rm", "-q", "--cached", "a.b")
    git(repo, "commit", "-q", "-m", "two")
    assert list_rooted(g, "HEAD").tree_id(object_format) != tree


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("checked_first", [True, False])
@pytest.mark.parametrize("gitlink", [True, False])
def test_the_rooted_listing_split_in_pieces_is_git_s_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, checked_first: bool, gitlink: bool
) -> None:
    # The records are split a piece at a time (tree.RECORD_CHUNK bytes): whatever the
    # piece size, and whether the paths were split before the entries or not, every view
    # is git's: ls-tree's entries, its paths, modes and tree id, also after the parse.
    repo = _odd_repo(tmp_path, "sha1")
    if not gitlink:  # every record then has one width ("MODE blob|tree ID\t")
        git(repo, "rm", "-q", "--cached", "sub")
        git(repo, "commit", "-q", "-m", "no gitlink")
    monkeypatch.setattr(tree_mod, "RECORD_CHUNK", chunk)
    g = Git(repo, version=(*MIN_GIT, 0))
    tree = git(repo, "rev-parse", "HEAD^{tree}").decode().strip()
    out = git(repo, "ls-tree", "-r", "-t", "-z", "--full-tree", tree).split(b"\0")[:-1]
    paths = [r.partition(b"\t")[2] for r in out]
    modes = [int(r[:6], 8) for r in out]
    listing = list_rooted(g, "HEAD")
    assert len(listing) == len(list_tree(g, tree))
    if checked_first:
        assert listing.tree_id("sha1") == tree
        assert listing.paths() == paths
        assert [listing.mode_at(i) for i in range(len(out))] == modes
    assert listing.entries == list_tree(g, tree)
    assert listing.paths() == paths
    assert [listing.mode_at(i) for i in range(len(out))] == modes
    assert listing.tree_id("sha1") == tree
    assert len(listing) == len(listing.entries)
    assert listing.has_file(b"z") and not listing.has_file(b"c")


def _two_commits(tmp_path: Path) -> Path:
    repo = tmp_path / "src"
    git(tmp_path, "init", "-q", "-b", "main", "src")
    (repo / "d").mkdir()
    (repo / "d" / "old").write_bytes(b"old\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    (repo / "d" / "new").write_bytes(b"new\n")
    (repo / "top").write_bytes(b"top\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two")
    return repo


def test_a_listing_of_another_tree_is_listed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if the branch moved between the listing and REV's resolution: the early listing
    # is of HEAD~1, and the checkout must still write (and index) HEAD's tree.
    src = _two_commits(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_with_git(src, tmp_path / "theirs")
    seen: list[str] = []

    def stale(g: Git, rev: str) -> object:
        seen.append(rev)
        return list_rooted(g, "HEAD~1")

    monkeypatch.setattr(session, "list_rooted", stale)
    checkout_mod.checkout(CheckoutOptions(ours, writer="pcheckout"))
    assert seen == ["HEAD"]
    assert_same_as_git(ours, theirs)


def _ls_tree_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "running:" in line and " ls-tree " in line]


@pytest.mark.parametrize("writer", ["pcheckout", "git"])
def test_a_fresh_checkout_lists_its_tree_once_beside_round_one(tmp_path: Path, writer: str) -> None:
    src = _two_commits(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_with_git(src, tmp_path / "theirs")
    proc = run_cli("checkout", "-C", str(ours), "--debug", "--writer", writer)
    assert proc.returncode == 0, proc.stderr
    lines = _ls_tree_lines(proc.stderr)
    assert len(lines) == 1 and " -t " in lines[0], lines
    assert_same_as_git(ours, theirs)


def test_a_switch_and_a_dry_run_list_nothing_early(tmp_path: Path) -> None:
    src = _two_commits(tmp_path)
    ours = clone_with_git(src, tmp_path / "ours", rev="HEAD~1")
    fresh = clone_no_checkout(src, tmp_path / "fresh")
    for args in (["-C", str(ours), "--writer", "pcheckout", "main"], ["-C", str(fresh), "-n"]):
        proc = run_cli("checkout", *args, "--debug")
        assert proc.returncode == 0, proc.stderr
        assert not any(" -t " in line for line in _ls_tree_lines(proc.stderr)), proc.stderr


def test_a_switch_by_git_asks_what_its_checks_need_in_round_one(tmp_path: Path) -> None:
    # The diff-tree (-t: the changed subtrees too) beside round 1, as soon as REV is
    # resolved; the target is not listed whole: one cat-file of the trees that changed.
    src = _two_commits(tmp_path)
    ours = clone_with_git(src, tmp_path / "ours", rev="HEAD~1")
    theirs = clone_with_git(src, tmp_path / "theirs")
    proc = run_cli("checkout", "-C", str(ours), "--writer", "git", "main", "--debug")
    assert proc.returncode == 0, proc.stderr
    assert _ls_tree_lines(proc.stderr) == [], proc.stderr
    diffs = [line for line in proc.stderr.splitlines() if " diff-tree " in line]
    assert len(diffs) == 1 and " -t " in diffs[0], proc.stderr
    trees = [
        line for line in proc.stderr.splitlines() if line.endswith(" cat-file --batch --buffer")
    ]
    assert len(trees) == 1, proc.stderr
    assert_same_as_git(ours, theirs)


def test_an_unknown_revision_gives_the_ordinary_error(tmp_path: Path) -> None:
    src = _two_commits(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    proc = run_cli("checkout", "-C", str(ours), "no-such-rev")
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and "no-such-rev" in proc.stderr, proc.stderr
    assert sorted(os.listdir(ours)) == [".git"]


def test_a_linked_worktree_uses_its_own_sparse_patterns(tmp_path: Path) -> None:
    # Its .git is a file: the pattern file guessed beside it is not the worktree's (that
    # one is in .git/worktrees/NAME/info), and the main worktree's must not be taken.
    src = tmp_path / "src"
    git(tmp_path, "init", "-q", "-b", "main", "src")
    for d in ("a", "b", "c"):
        (src / d).mkdir()
        (src / d / "f").write_bytes(d.encode() + b"\n")
    (src / "top").write_bytes(b"top\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "one")
    main = tmp_path / "main"
    git(tmp_path, "clone", "-q", "--no-checkout", str(src), str(main))
    git(main, "sparse-checkout", "set", "--cone", "a")
    results = {}
    for tool in ("git", "pcheckout"):
        wt = tmp_path / f"wt-{tool}"
        git(main, "worktree", "add", "-q", "--no-checkout", "--detach", str(wt), "HEAD")
        git(wt, "sparse-checkout", "set", "--cone", "b")
        if tool == "git":
            git(wt, "checkout", "-q", "HEAD")
        else:
            proc = run_cli("checkout", "-C", str(wt), "HEAD")
            assert proc.returncode == 0, proc.stderr
        results[tool] = (
            sorted(p.relative_to(wt).as_posix() for p in wt.rglob("*") if ".git" not in p.parts),
            git(wt, "ls-files", "-t"),
        )
    assert results["pcheckout"] == results["git"]
    assert results["git"][0] == ["b", "b/f", "top"]


def test_the_plan_uses_the_filesystem_detected_beside_round_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _odd_repo(tmp_path, "sha1")
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_with_git(src, tmp_path / "theirs")

    def again(*args: object, **kw: object) -> object:
        raise AssertionError("the filesystem was detected a second time")

    monkeypatch.setattr(planner, "detect", again)
    result = checkout_mod.checkout(CheckoutOptions(ours))
    assert result.filesystem.path == str(ours)
    assert_same_as_git(ours, theirs)


@pytest.mark.parametrize(
    ("latency_bound", "writer", "dry_run", "imported"),
    [
        (True, None, False, True),
        (True, "pcheckout", False, True),
        (False, None, False, False),  # git's writer will run: nothing spent before it
        (True, "git", False, False),
        (True, None, True, False),  # a dry run writes nothing
    ],
)
def test_the_engine_modules_are_imported_ahead_only_where_the_engine_will_write(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    latency_bound: bool,
    writer: str | None,
    dry_run: bool,
    imported: bool,
) -> None:
    real = detect_mod.detect(tmp_path)
    monkeypatch.setattr(
        detect_mod, "detect", lambda path: real._replace(latency_bound=latency_bound)
    )
    names: list[str] = []
    monkeypatch.setattr(session.importlib, "import_module", names.append)
    ahead = session.Ahead(CheckoutOptions(tmp_path, writer=writer, dry_run=dry_run))
    assert ahead.finish(tmp_path) is not None
    engine = list(session.ENGINE_MODULES) if imported else []
    assert names == [*session.PLAN_MODULES, *engine]
    assert ahead.finish(tmp_path / "elsewhere") is None  # another directory: detected again


def test_the_rooted_listing_names_every_gitattributes_as_git_lists_them(tmp_path: Path) -> None:
    """``files_named``: every file called .gitattributes, whatever its directory's name
    holds (a tab, a newline), and not a directory of that name nor ``x.gitattributes``."""
    files = {
        b".gitattributes": b"* text\n",
        b"d/.gitattributes": b"x\n",
        b"x.gitattributes": b"no\n",
        b"e/.gitattributes/f": b"a directory\n",
        b"t\tab/.gitattributes": b"x\n",
        b"a\t.gitattributes": b"a name with a tab\n",
        b"n\nl/deep/.gitattributes": b"x\n",
        b"\xff/.gitattributes": b"x\n",
    }
    repo = make_repo(tmp_path, files)
    g = Git(repo, version=(*MIN_GIT, 0))
    listed = git(repo, "ls-files", "-z").split(b"\0")
    want = sorted(p for p in listed if p.rpartition(b"/")[2] == b".gitattributes")
    assert list_rooted(g, "HEAD").files_named(b".gitattributes") == want
    assert len(want) == 5
