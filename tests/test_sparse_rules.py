"""git/sparse.py decides each path as git does: compared with ``git read-tree -mu``'s
skip-worktree bits (``ls-files -t``) and warnings, for cone and non-cone pattern sets."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import make_repo
from sparsehelp import git_sparse_set, skip_flags

from pcheckout.git.sparse import Sparsity, parse
from pcheckout.git.tree import Entry

PATHS = [
    "top.txt", "README", "a/x.txt", "a/b/y.txt", "a/b/c/z.md", "a/b/c/deep/q.txt", "b/x.txt",
    "b/a/x.txt", "d/e.txt", "d/f/e.txt", "docs/a.md", "docs/sub/b.md", "src/lib/m.py",
    "src/lib/t/test_m.py", "src/main.py", "x/y/z/w.txt", "x/y/f", "x/f", "[br]/k", "sp ace/f",
    "a.txt/in", "foo/bar/baz/bar/q",
]  # fmt: skip

NON_CONE = [
    ["*.txt", "!d/"], ["/a/", "!/a/b/"], ["a/b/"], ["*"], ["!*", "docs"], ["docs/**"],
    ["**/lib"], ["src/**/t"], ["x/*/f"], ["[br]/"], ["\\[br\\]/"], ["f"], ["/f"],
    ["a", "!a/b"], ["*.md", "!docs/sub/"], ["bar/"], ["foo/**/q"], ["a.txt"], ["sp ace/"],
    ["*/x.txt"], ["/[ab]/x.txt"], ["a/**/*.txt"], ["!top.txt", "*"], ["*", "!*/", "/docs/"],
    ["d/*"], ["**/x.txt"], ["x/y"], ["?/x.txt"], ["[!a]/x.txt"], ["[a-c]/x.txt"],
    ["[[:alpha:]]/x.txt"], ["*/", "!*.py"], ["# comment", "", "docs/   "],
]  # fmt: skip
CONE = [
    ["/*", "!/*/", "/a/", "!/a/*/", "/a/b/", "!/a/b/*/", "/a/b/c/"],
    ["/*", "!/*/", "/x/y/"],
    ["/*", "!/*/", "/src/lib/", "/docs/"],
    ["/*"],
    ["/*", "!/*/"],
    ["/*", "!/*/", "/a/b/", "!/a/b/*/"],  # no parent chain: git leaves a/b out
    ["/*", "!/*/", "/d/", "!/d/*/"],
    # patterns cone mode does not recognize: git warns and matches them as non-cone
    ["/*", "!/*/", "/a/", "/a/b/*"],
    ["/*", "!/*/", "docs/"],
    ["/*", "!/*/", "/a/b"],
    ["/*", "!/*/", "/x/", "!/x/*/", "/x/y/", "/x/"],
    ["/*", "!/*/", "/\\[br\\]/"],
    ["/*", "!/*/", "!/a/*/"],
]


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("rules")
    return make_repo(base, {p.encode(): p.encode() for p in PATHS})


def _git_decides(
    repo: Path, patterns: list[str], cone: bool
) -> tuple[dict[bytes, bool], list[str]]:
    git_sparse_set(repo, patterns, cone=cone)
    proc = subprocess.run(["git", "-C", str(repo), "read-tree", "-mu", "HEAD"],
                          capture_output=True, check=True)  # fmt: skip
    warnings: list[str] = []
    for line in proc.stderr.decode().splitlines():  # git reads the file more than once
        text = line.removeprefix("warning: ")
        if text not in warnings:
            warnings.append(text)
    return {p: not s for p, s in skip_flags(repo).items()}, warnings


@pytest.mark.parametrize("patterns", NON_CONE, ids=lambda p: " ".join(p))
def test_non_cone_patterns_match_as_git(repo: Path, patterns: list[str]) -> None:
    theirs, _ = _git_decides(repo, patterns, cone=False)
    data = "".join(p + "\n" for p in patterns).encode()
    sp = parse(data, cone=False)
    assert {p: sp.includes(p) for p in theirs} == theirs
    assert _split(sp, theirs) == theirs


@pytest.mark.parametrize("patterns", CONE, ids=lambda p: " ".join(p))
def test_cone_patterns_match_as_git_with_its_warnings(repo: Path, patterns: list[str]) -> None:
    theirs, warnings = _git_decides(repo, patterns, cone=True)
    data = "".join(p + "\n" for p in patterns).encode()
    sp = parse(data, cone=True)
    assert {p: sp.includes(p) for p in theirs} == theirs
    assert _split(sp, theirs) == theirs
    assert sp.warnings == warnings


def _split(sp: Sparsity, theirs: dict[bytes, bool]) -> dict[bytes, bool]:
    """``split_entries`` over the paths in git's (the index's, ls-tree's) order, every
    other one only (``todo``) and then all."""
    entries = [Entry(p, 0o100644, "0" * 40, -1) for p in theirs]
    odd = range(1, len(entries), 2)
    wanted, skip = sp.split_entries(entries, odd)
    assert wanted == [i for i in odd if not skip[i]]
    assert not any(skip[i] for i in range(0, len(entries), 2))
    wanted, skip = sp.split_entries(entries, range(len(entries)))
    assert wanted == [i for i in range(len(entries)) if not skip[i]]
    return {e.path: not skip[i] for i, e in enumerate(entries)}
