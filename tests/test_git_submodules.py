"""git/submodules.py against git: gitlinks, .gitmodules, which submodules are active and
which are populated."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import git, make_repo

from pcheckout.git.config import read_config
from pcheckout.git.runner import Git
from pcheckout.git.submodules import (
    Gitlink,
    Gitmodule,
    active_paths,
    by_path,
    index_gitlinks,
    populated,
    read_gitmodules,
    submodule_config,
    tree_gitlinks,
)
from pcheckout.git.tree import list_tree

ODD = b"odd\t\xe9 name"  # a tab and a byte that is not UTF-8 (git reads 0xff in a blob as EOF)

GITMODULES = (
    b'[submodule "libs/one"]\n'
    b"\tpath = libs/one\n\turl = ../one.git\n\tShallow = yes\n\tbranch = dev\n"
    b'[submodule "a.b.c"]\n'
    b"\tpath = two\n\turl = ../two.git\n\tupdate = none\n\tshallow = false\n"
    b'[submodule "odd"]\n'
    b'\tpath = "odd\\t\xe9 name"\n\turl = ../odd\n\tshallow\n'
    b'[submodule "not-a-gitlink"]\n'
    b"\tpath = f\n"
)


def _superproject(tmp_path: Path, paths: list[bytes]) -> tuple[Path, str]:
    """A repository whose index and HEAD hold a gitlink at each of ``paths`` (all at the
    repository's first commit) and the .gitmodules above."""
    repo = make_repo(tmp_path, {b"f": b"x\n"}, name="super")
    commit = git(repo, "rev-parse", "HEAD").decode().strip()
    for path in paths:
        git(repo, "update-index", "--add", "--cacheinfo", b"160000,%s,%s" % (commit.encode(), path))
    (repo / ".gitmodules").write_bytes(GITMODULES)
    git(repo, "add", ".gitmodules")
    git(repo, "commit", "-q", "-m", "submodules")
    return repo, commit


def test_gitlinks_of_the_index_and_of_a_tree(tmp_path: Path) -> None:
    repo, commit = _superproject(tmp_path, [b"two", ODD, b"libs/one"])
    g = Git(repo)
    expected = [Gitlink(p, commit) for p in sorted([b"two", ODD, b"libs/one"])]  # git's order
    assert index_gitlinks(g) == expected
    assert tree_gitlinks(list_tree(g, "HEAD")) == expected
    git(repo, "rm", "-q", "--cached", "two")
    assert index_gitlinks(g) == [x for x in expected if x.path != b"two"]
    assert tree_gitlinks(list_tree(g, "HEAD")) == expected


def test_gitmodules_read_by_git(tmp_path: Path) -> None:
    repo, _ = _superproject(tmp_path, [b"libs/one"])
    modules = read_gitmodules(Git(repo))
    assert list(modules) == ["libs/one", "a.b.c", "odd", "not-a-gitlink"]  # file order
    assert modules["libs/one"] == Gitmodule(
        "libs/one", b"libs/one", "../one.git", None, "dev", True
    )
    assert modules["a.b.c"] == Gitmodule("a.b.c", b"two", "../two.git", "none", None, False)
    assert modules["odd"] == Gitmodule("odd", ODD, "../odd", None, None, False)
    for name, module in modules.items():  # each as git config itself answers
        got = git(repo, "config", "-f", ".gitmodules", f"submodule.{name}.path").rstrip(b"\n")
        assert module.path == got
    assert by_path(modules)[ODD].name == "odd"
    # the committed file, whatever the work tree's says now
    (repo / ".gitmodules").write_bytes(b'[submodule "x"]\n\tpath = x\n')
    assert list(read_gitmodules(Git(repo))) == ["x"]
    assert read_gitmodules(Git(repo), "HEAD:.gitmodules") == modules


def test_a_later_section_naming_the_same_path_wins(tmp_path: Path) -> None:
    repo, _ = _superproject(tmp_path, [])
    (repo / ".gitmodules").write_bytes(
        b'[submodule "a"]\n\tpath = p\n[submodule "b"]\n\tpath = p\n'
    )
    assert by_path(read_gitmodules(Git(repo)))[b"p"].name == "b"


def _populated_superproject(tmp_path: Path, names: list[str]) -> Path:
    """A gitlink per name, each with its own .gitmodules section and populated (a
    repository in its directory), so that ``git submodule status`` marks exactly the
    inactive ones with "-"."""
    repo = make_repo(tmp_path, {b"f": b"x\n"}, name="super")
    sections = b""
    for name in names:
        sub = make_repo(repo, {b"s": b"s\n"}, name=name)
        commit = git(sub, "rev-parse", "HEAD").decode().strip()
        git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},{name}")
        sections += b'[submodule "%s"]\n\tpath = %s\n\turl = ../%s\n' % ((name.encode(),) * 3)
    (repo / ".gitmodules").write_bytes(sections)
    return repo


def _active_by_git(repo: Path) -> set[bytes]:
    lines = git(repo, "submodule", "status").splitlines()
    return {line[1:].split(b" ")[1] for line in lines if not line.startswith(b"-")}


@pytest.mark.parametrize(
    ("specs", "settings"),
    [
        # no submodule.active: a url registered, unless submodule.<name>.active says
        ([], {"a.url": "../a", "b.url": "../b", "b.active": "false", "c.active": "true"}),
        # submodule.active's pathspecs (every value counts), then the name's own setting
        (["a", ":(glob)c*"], {"b.url": "../b", "cd.active": "0"}),
        ([":(exclude)a", "."], {"a.url": "../a"}),
    ],
    ids=["url-or-own", "pathspecs", "exclude"],
)
def test_active_as_git_decides(tmp_path: Path, specs: list[str], settings: dict[str, str]) -> None:
    repo = _populated_superproject(tmp_path, ["a", "b", "c", "cd"])
    for spec in specs:
        git(repo, "config", "--add", "submodule.active", spec)
    for key, value in settings.items():
        git(repo, "config", f"submodule.{key}", value)
    g = Git(repo)
    paths = [link.path for link in index_gitlinks(g)]
    got = active_paths(g, read_config(g), read_gitmodules(g), paths)
    assert got == _active_by_git(repo)


def test_active_pathspecs_match_a_trees_paths(tmp_path: Path) -> None:
    repo, _ = _superproject(tmp_path, [b"libs/one", b"two"])
    git(repo, "config", "submodule.active", "t*")
    git(repo, "rm", "-q", "--cached", "two")  # a switch's target tree has it, the index not
    g = Git(repo)
    config, modules = read_config(g), read_gitmodules(g)
    assert active_paths(g, config, modules, [b"libs/one", b"two"]) == set()
    assert active_paths(g, config, modules, [b"libs/one", b"two"], "HEAD") == {b"two"}


def test_repository_settings(tmp_path: Path) -> None:
    repo, _ = _superproject(tmp_path, [])
    git(repo, "config", "submodule.a.b.c.URL", "file:///x")
    git(repo, "config", "submodule.a.b.c.update", "rebase")
    config = read_config(Git(repo))
    assert submodule_config(config, "a.b.c") == ("file:///x", "rebase", None)
    assert submodule_config(config, "A.b.c") == (None, None, None)  # names are case-sensitive


def test_populated_as_git_submodule_foreach_sees_it(tmp_path: Path) -> None:
    repo = _populated_superproject(tmp_path, ["dir", "file", "empty", "absent"])
    # "file": a .git file naming the git dir, moved elsewhere
    (repo / "file" / ".git").rename(tmp_path / "file.git")
    (repo / "file" / ".git").write_text(f"gitdir: {tmp_path / 'file.git'}\n")
    shutil.rmtree(repo / "empty" / ".git")
    shutil.rmtree(repo / "absent")
    g = Git(repo)
    found = {p for p in (b"dir", b"file", b"empty", b"absent") if populated(g, p)}
    foreach = git(repo, "submodule", "foreach", "--quiet", "echo $sm_path").split()
    assert found == set(foreach) == {b"dir", b"file"}
    (repo / "empty" / ".git").write_text("gitdir: /nowhere\n")  # names no git dir
    assert not populated(g, b"empty")
