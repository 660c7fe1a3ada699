"""Repository layouts, each run by git's checkout and by pcheckout's (both writers) on twin
repositories: linked worktrees, ``core.worktree`` and ``GIT_DIR``/``GIT_WORK_TREE``, a
``.git`` file, sha256, a subdirectory as the starting point; and where git refuses to run
(no repository, a bare one, inside the git dir): its message and exit code 128."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import assert_same_as_git, git, run_cli

pytestmark = pytest.mark.usefixtures("writer")


def _history(tmp_path: Path, *, fmt: str = "sha1") -> Path:
    """main: c1 (branch side: + only/x), c2."""
    src = tmp_path / "src"
    git(tmp_path, "init", "-q", "-b", "main", f"--object-format={fmt}", "src")
    (src / "a").write_bytes(b"1\n")
    (src / "d").mkdir()
    (src / "d" / "b").write_bytes(b"x\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "c1")
    git(src, "checkout", "-q", "-b", "side")
    (src / "only").mkdir()
    (src / "only" / "x").write_bytes(b"x\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "side")
    git(src, "checkout", "-q", "main")
    (src / "a").write_bytes(b"2\n")
    git(src, "commit", "-q", "-am", "c2")
    return src


def _said(text: str) -> list[str]:
    return [
        re.sub(r"^(pcheckout: error: |error: |fatal: )", "", line) for line in text.splitlines()
    ]


def _both(
    tmp_path: Path, make: Callable[[Path], tuple[Path, dict[str, str]]], *words: str
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """``make(root)`` builds the layout in ``root`` (ours/, theirs/) and says where to run
    and with what environment; git checkout runs in theirs, pcheckout checkout in ours."""
    runs = []
    for side in ("theirs", "ours"):
        root = tmp_path / side
        root.mkdir()
        cwd, env = make(root)
        full = {**os.environ, **env}
        if side == "theirs":
            runs.append(
                subprocess.run(
                    ["git", "checkout", *words], cwd=cwd, env=full, capture_output=True, text=True
                )
            )
        else:
            runs.append(run_cli("checkout", *words, cwd=cwd, env=env))
    want, proc = runs
    assert proc.returncode == want.returncode, (proc.stderr, want.stderr)
    assert _said(proc.stderr) == _said(want.stderr.replace("/theirs/", "/ours/"))
    return proc, want


def _clone(root: Path, *options: str) -> Path:
    git(root, "clone", "-q", *options, str(root.parent / "src"), "w")
    return root / "w"


def test_a_subdirectory_the_switch_removes_stays(tmp_path: Path) -> None:
    """git keeps the directory it was started in (since 2.35) though the target lacks it."""
    _history(tmp_path)

    def make(root: Path) -> tuple[Path, dict[str, str]]:
        w = _clone(root)
        git(w, "checkout", "-q", "side")
        return w / "only", {}

    _both(tmp_path, make, "main")
    ours, theirs = tmp_path / "ours" / "w", tmp_path / "theirs" / "w"
    assert (ours / "only").is_dir() and (theirs / "only").is_dir()
    assert_same_as_git(ours, theirs)


@pytest.mark.parametrize("dash_c", [False, True], ids=["cwd", "dash-C"])
def test_from_a_subdirectory(tmp_path: Path, dash_c: bool) -> None:
    """Started in w/d, or with -C w/d: the whole work tree is switched, as git does."""
    _history(tmp_path)
    for side in ("theirs", "ours"):
        (tmp_path / side).mkdir()
        _clone(tmp_path / side)
    pre, sub = (["-C", "w/d"], Path()) if dash_c else ([], Path("w/d"))
    want = subprocess.run(
        ["git", *pre, "checkout", "side"],
        cwd=tmp_path / "theirs" / sub,
        text=True,
        capture_output=True,
    )
    proc = run_cli(*pre, "checkout", "side", cwd=tmp_path / "ours" / sub)
    assert proc.returncode == want.returncode == 0
    assert proc.stderr == want.stderr
    assert_same_as_git(tmp_path / "ours" / "w", tmp_path / "theirs" / "w")


@pytest.mark.parametrize("rev", ["HEAD", "v"])
def test_a_linked_worktree_added_without_checkout(tmp_path: Path, rev: str) -> None:
    _history(tmp_path)

    def make(root: Path) -> tuple[Path, dict[str, str]]:
        w = _clone(root)
        git(w, "tag", "v", "origin/side")
        git(w, "worktree", "add", "-q", "--no-checkout", "-b", "wt", "../wt", "origin/main")
        return root / "wt", {}

    _both(tmp_path, make, rev)
    assert_same_as_git(tmp_path / "ours" / "wt", tmp_path / "theirs" / "wt")
    for args in (("rev-parse", "HEAD"), ("reflog", "-1", "--format=%gs"), ("for-each-ref",)):
        assert git(tmp_path / "ours" / "wt", *args) == git(tmp_path / "theirs" / "wt", *args)


@pytest.mark.parametrize("how", ["GIT_DIR+GIT_WORK_TREE", "core.worktree"])
def test_a_git_dir_apart_from_its_work_tree(tmp_path: Path, how: str) -> None:
    """The git dir elsewhere, named by the environment or by core.worktree: a fresh checkout
    into an empty work tree, then a switch."""
    _history(tmp_path)

    def make(root: Path) -> tuple[Path, dict[str, str]]:
        git(root, "clone", "-q", "--bare", str(root.parent / "src"), "g.git")
        (root / "work").mkdir()
        g, env = root / "g.git", {"GIT_DIR": str(root / "g.git")}
        if how == "core.worktree":
            git(g, "config", "core.bare", "false")
            git(g, "config", "core.worktree", str(root / "work"))
        else:
            env["GIT_WORK_TREE"] = str(root / "work")
        return root / "work", env

    _both(tmp_path, make, "main")
    env = {
        "GIT_DIR": str(tmp_path / "ours" / "g.git"),
        "GIT_WORK_TREE": str(tmp_path / "ours" / "work"),
    }
    proc = run_cli("checkout", "side", cwd=tmp_path / "ours" / "work", env=env)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("checkout", "-", cwd=tmp_path / "ours" / "work", env=env)
    assert proc.returncode == 0 and "Switched to branch 'main'" in proc.stderr


def test_a_separate_git_dir_and_sha256(tmp_path: Path) -> None:
    _history(tmp_path, fmt="sha256")

    def make(root: Path) -> tuple[Path, dict[str, str]]:
        return _clone(root, "--no-checkout", "--separate-git-dir", str(root / "sep.git")), {}

    _both(tmp_path, make)
    ours, theirs = tmp_path / "ours" / "w", tmp_path / "theirs" / "w"
    assert_same_as_git(ours, theirs)
    for repo in (ours, theirs):
        git(repo, "checkout", "-q", "--detach")
    proc = run_cli("checkout", "origin/side", cwd=ours)
    want = subprocess.run(
        ["git", "checkout", "origin/side"], cwd=theirs, capture_output=True, text=True
    )
    assert proc.returncode == want.returncode == 0 and proc.stderr == want.stderr
    assert_same_as_git(ours, theirs)


def test_sha256_with_attributes_in_nested_gitattributes(tmp_path: Path) -> None:
    """The tree's .gitattributes read from a sha256 repository (git 2.39: the temporary
    index pcheckout writes itself for check-attr --cached)."""
    src = tmp_path / "src"
    git(tmp_path, "init", "-q", "-b", "main", "--object-format=sha256", "src")
    (src / ".gitattributes").write_bytes(b"*.txt text eol=crlf\n")
    (src / "sub").mkdir()
    (src / "sub" / ".gitattributes").write_bytes(b"*.txt -text ident\n")
    for d in (src, src / "sub"):
        (d / "a.txt").write_bytes(b"one\ntwo $Id$\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "c1")

    def make(root: Path) -> tuple[Path, dict[str, str]]:
        return _clone(root, "--no-checkout"), {}

    _both(tmp_path, make, "main")
    ours, theirs = tmp_path / "ours" / "w", tmp_path / "theirs" / "w"
    assert_same_as_git(ours, theirs)
    assert (ours / "a.txt").read_bytes() == b"one\r\ntwo $Id$\r\n"
    assert (ours / "sub" / "a.txt").read_bytes().startswith(b"one\ntwo $Id: ")


@pytest.mark.parametrize("where", ["nowhere", "bare", "git-dir", "missing"])
def test_where_git_refuses_to_run(tmp_path: Path, where: str) -> None:
    """git dies there (128) before it reads REV: its message, pcheckout's exit code."""
    _history(tmp_path)

    def make(root: Path) -> tuple[Path, dict[str, str]]:
        if where == "nowhere":
            (root / "plain").mkdir()
            return root / "plain", {}
        if where == "bare":
            git(root, "clone", "-q", "--bare", str(root.parent / "src"), "b.git")
            return root / "b.git", {}
        if where == "git-dir":
            return _clone(root) / ".git", {}
        return root, {}

    words = ["-C", "gone"] if where == "missing" else []
    runs = []
    for side in ("theirs", "ours"):
        (tmp_path / side).mkdir()
        cwd, _ = make(tmp_path / side)
        if side == "theirs":
            cmd = ["git", *words, "checkout", "nope"]
            runs.append(subprocess.run(cmd, cwd=cwd, capture_output=True, text=True))
        else:
            runs.append(run_cli(*words, "checkout", "nope", cwd=cwd))
    want, proc = runs
    assert proc.returncode == want.returncode == 128
    said = _said(proc.stderr)
    if where in ("bare", "git-dir"):  # pcheckout says what writes a tree there
        assert said[0].startswith(_said(want.stderr)[0] + " (")
    else:
        assert said == _said(want.stderr)


@pytest.mark.parametrize("words", [["side"], [], ["-f", "side"]], ids=["side", "HEAD", "force"])
def test_an_emptied_work_tree_with_its_index(tmp_path: Path, words: list[str]) -> None:
    """Every file deleted, the index kept (a staged file in it): git's two-way merge, not a
    fresh checkout: what both trees have alike stays deleted, the staged file stays staged
    (``--force``: everything written, as git's)."""
    _history(tmp_path)

    def make(root: Path) -> tuple[Path, dict[str, str]]:
        w = _clone(root)
        (w / "new").write_bytes(b"staged\n")
        git(w, "add", "new")
        for p in w.iterdir():
            if p.name == ".git":
                continue
            if p.is_dir():
                for q in sorted(p.rglob("*"), reverse=True):
                    q.rmdir() if q.is_dir() else q.unlink()
                p.rmdir()
            else:
                p.unlink()
        return w, {}

    _both(tmp_path, make, *words)
    ours, theirs = tmp_path / "ours" / "w", tmp_path / "theirs" / "w"
    for args in (("ls-files", "-s"), ("status", "--porcelain"), ("rev-parse", "HEAD")):
        assert git(ours, *args) == git(theirs, *args), args
    assert sorted(os.listdir(ours)) == sorted(os.listdir(theirs))
