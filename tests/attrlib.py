"""Repositories whose blobs are stored exactly as given (no clean filter, no eol
normalisation on add), for comparing conversions with git's checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import git

#: Content kinds git's eol and ident rules tell apart.
CONTENTS: dict[str, bytes] = {
    "lf": b"one\ntwo\nthree\n",
    "crlf": b"one\r\ntwo\r\n",
    "mixed": b"one\r\ntwo\nthree\n",
    "lonecr": b"one\rtwo\nthree\n",
    "nul": b"bin\x00ary\nmore\n",
    "noeol": b"one\ntwo",
    "empty": b"",
    "ctrlz": b"dos text\n\x1a",
    "controls": b"\x01\x02\x03\x04\x05\x06\x07\n" * 3,
    "mostly": b"a" * 300 + b"\x01\n",
    "ident": b"/* $Id$ */\nline\n",
    "ident2": b"$Id: 0123456789012345678901234567890123456789 $\n$Id$ twice\n",
    "foreign": b"$Id: some foreign 1.2 $\n",
    "weird": b"$$Id$ $I$Id$ $Id:$ $Id:a\tb c$ $Id:x\ny$ $Id\x00$Id$ $Id",
    "tabbed": b"$Id: a\tb$\n$Id:\tab$\n$Id: ab $\n",
}


Files = dict[bytes, bytes | tuple[str, bytes]]


def commit_raw(repo: Path, files: Files, message: str = "raw") -> str:
    """Commit ``files`` ({path: bytes, or ("l", target) for a symlink, ("x", bytes)
    executable}) with their bytes stored as given; returns the commit id."""
    lines = []
    for path, content in sorted(files.items()):
        mode = "100644"
        if isinstance(content, tuple):
            kind, content = content
            mode = "120000" if kind == "l" else "100755"
        oid = git(repo, "hash-object", "-w", "--no-filters", "--stdin", input=content)
        oid = oid.decode().strip()
        lines.append(f"{mode} {oid}\t".encode() + path + b"\0")
    index = repo / ".git" / "raw-index"
    env = {"GIT_INDEX_FILE": str(index)}
    subprocess.run(
        ["git", "-C", str(repo), "update-index", "-z", "--add", "--index-info"],
        input=b"".join(lines),
        check=True,
        env={**_env(), **env},
    )
    tree = (
        subprocess.run(
            ["git", "-C", str(repo), "write-tree"],
            check=True,
            capture_output=True,
            env={**_env(), **env},
        )
        .stdout.decode()
        .strip()
    )
    index.unlink()
    parent = git(repo, "rev-parse", "-q", "--verify", "HEAD", check=False).decode().strip()
    args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
    commit = git(repo, *args).decode().strip()
    git(repo, "update-ref", "HEAD", commit)
    return commit


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def init_raw(path: Path, files: Files) -> Path:
    git(path.parent, "init", "-q", "-b", "main", path.name)
    commit_raw(path, files)
    return path


def git_checkout_clone(src: Path, dest: Path, config: dict[str, str]) -> Path:
    git(src.parent, "clone", "-q", "--no-checkout", str(src), str(dest))
    for k, v in config.items():
        git(dest, "config", k, v)
    git(dest, "checkout", "-q", "-f", "HEAD")
    return dest


def assert_like_git(ours: Path, theirs: Path) -> None:
    """``helpers.assert_same_as_git`` for trees whose stored blobs are not what git's
    clean filters would store (CRLF under ``text``, expanded idents): ``git status`` on
    such a file says "modified" whenever its entry is racily clean (git hashes it again,
    through the clean filter), so status depends on timing and is not compared; bytes,
    index entries and their stat data are."""
    from helpers import assert_index_matches_lstat, snapshot

    assert snapshot(ours) == snapshot(theirs)
    assert git(ours, "ls-files", "-s", "-z") == git(theirs, "ls-files", "-s", "-z")
    assert git(ours, "rev-parse", "HEAD") == git(theirs, "rev-parse", "HEAD")
    assert_index_matches_lstat(ours)
