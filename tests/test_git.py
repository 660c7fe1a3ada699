"""git.py helpers that replace git processes: batch lookups, branch names, HEAD."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import git, make_repo

from pcheckout.errors import GitError
from pcheckout.git.config import read_config
from pcheckout.git.objects import batch_check
from pcheckout.git.refs import symbolic_head
from pcheckout.git.round1 import is_branch_name
from pcheckout.git.runner import Git, discover, git_version


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    src = make_repo(tmp_path, {b"f": b"1\n", b"d/g": b"2\n"})
    git(src, "tag", "v1")
    return src


def test_batch_check_answers_like_rev_parse(repo: Path) -> None:
    names = [
        "HEAD^{tree}",
        "v1^{commit}",
        "HEAD:d",
        "HEAD:f",
        "nope^{commit}",
        "HEAD:no such",
        "main~5",
    ]
    found = batch_check(Git(repo), names)
    for name, got in zip(names, found, strict=True):
        proc = git(repo, "rev-parse", "--verify", "--quiet", name, check=False)
        if not proc.strip():
            assert got is None, name
        else:
            assert got is not None and got[0] == proc.decode().strip(), name
    assert [f[1] for f in found if f] == ["tree", "commit", "tree", "blob"]


def test_batch_check_refuses_a_newline(repo: Path) -> None:
    with pytest.raises(ValueError):
        batch_check(Git(repo), ["HEAD\nHEAD"])


@pytest.mark.parametrize("name", ["main", "feature/x", "v1.2", "ünï", "a-b_c", "a@b"])
def test_branch_names_git_accepts(repo: Path, name: str) -> None:
    assert is_branch_name(name)
    assert git(repo, "check-ref-format", "--branch", name, check=False).strip()


@pytest.mark.parametrize(
    "name",
    [
        "v1~2",
        "x^{tree}",
        "@{-1}",
        "a..b",
        ".hidden",
        "a/.b",
        "x.lock",
        "a b",
        "-x",
        "a/",
        "a\\b",
        "x:y",
        "a//b",
        "x*",
        "",
        "@",
        "HEAD",
    ],
)
def test_revision_syntax_is_no_branch_name(name: str) -> None:
    assert not is_branch_name(name)


def test_symbolic_head_reads_the_file_as_git_does(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    g = Git(repo)
    r = discover(g)
    ran: list[tuple[str, ...]] = []
    real = Git.run

    def spy(self: Git, *args: str, **kw: object):  # type: ignore[no-untyped-def]
        ran.append(args)
        return real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Git, "run", spy)
    config = read_config(g)
    ran.clear()
    assert symbolic_head(g, r, config) == "refs/heads/main"
    git(repo, "checkout", "-q", "--detach")
    assert symbolic_head(g, r, config) is None
    assert ran == []  # the files backend: no git process
    # Another ref backend (reftable keeps a placeholder in HEAD): ask git.
    assert symbolic_head(g, r, {**config, "extensions.refstorage": "reftable"}) is None
    assert ran == [("symbolic-ref", "--quiet", "HEAD")]


def test_concurrently_returns_in_order_and_raises_the_first_error() -> None:
    import threading

    from pcheckout.context import concurrently as _concurrently
    from pcheckout.errors import UnknownRevisionError

    names = _concurrently(lambda: threading.current_thread().name, lambda: 2, lambda: 3)
    assert names[0] == threading.current_thread().name and names[1:] == [2, 3]

    def boom(msg: str) -> None:
        raise UnknownRevisionError(msg)

    finished = []
    with pytest.raises(UnknownRevisionError, match="first"):
        _concurrently(lambda: finished.append(1), lambda: boom("first"), lambda: boom("second"))
    assert finished == [1]


def test_git_missing_from_path_is_said_in_one_line() -> None:
    with pytest.raises(GitError, match="^git is not installed or not on PATH$"):
        git_version("pcheckout-no-such-git")
