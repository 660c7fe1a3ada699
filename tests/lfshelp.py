"""Git LFS repositories for the tests: real git-lfs, objects present or behind a file:// remote."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import git, make_repo

GIT_LFS = shutil.which("git-lfs")
needs_lfs = pytest.mark.skipif(GIT_LFS is None, reason="git-lfs is not installed")

#: What ``git lfs install --local`` configures.
LFS_CONFIG = {
    "filter.lfs.process": "git-lfs filter-process",
    "filter.lfs.smudge": "git-lfs smudge -- %f",
    "filter.lfs.clean": "git-lfs clean -- %f",
    "filter.lfs.required": "true",
}
ATTRIBUTES = b"*.bin filter=lfs diff=lfs merge=lfs -text\n"


def lfs_files(n: int = 12) -> dict[bytes, bytes]:
    """Plain files beside LFS ones of a few sizes (one over 1 MiB: streamed)."""
    files: dict[bytes, bytes] = {b".gitattributes": ATTRIBUTES}
    for i in range(n):
        files[b"d%d/plain%02d.txt" % (i % 3, i)] = b"plain %d\n" % i * 30
        files[b"d%d/blob%02d.bin" % (i % 3, i)] = os.urandom(5000 + 997 * i)
    files[b"big/large.bin"] = os.urandom(3 * 1024 * 1024 + 17)
    files[b"empty.bin"] = b""
    return files


def lfs_repo(tmp_path: Path, files: dict[bytes, bytes], name: str = "src") -> Path:
    """A repository whose ``*.bin`` are committed through git-lfs (objects in its store)."""
    return make_repo(tmp_path, files, name=name, config=LFS_CONFIG)


def objects_dir(repo: Path) -> Path:
    """The repository's LFS store (git-lfs's default LocalMediaDir)."""
    common = Path(git(repo, "rev-parse", "--git-common-dir").decode().strip())
    return (common if common.is_absolute() else repo / common) / "lfs" / "objects"


def lfs_clone(
    src: Path, dest: Path, *, objects: bool = True, config: dict[str, str] | None = None
) -> Path:
    """``git clone --no-checkout`` with git-lfs configured; ``objects``: the source's LFS
    store copied in (else they are fetched from the source, as git-lfs would)."""
    git(src.parent, "clone", "-q", "--no-checkout", str(src), str(dest))
    for k, v in {**LFS_CONFIG, **(config or {})}.items():
        git(dest, "config", k, v)
    if objects:
        shutil.copytree(objects_dir(src), dest / ".git" / "lfs" / "objects")
    return dest


def no_lfs_path(tmp_path: Path) -> str:
    """A PATH with git and without git-lfs: a filter process cannot start."""
    bin_dir = tmp_path / "bin-without-lfs"
    bin_dir.mkdir(exist_ok=True)
    real = shutil.which("git")
    assert real is not None
    if not (bin_dir / "git").exists():
        (bin_dir / "git").symlink_to(real)
    return str(bin_dir)


def lfs_views(repo: Path) -> tuple[bytes, bytes]:
    """What ``git lfs ls-files`` and ``git lfs status`` say."""
    return git(repo, "lfs", "ls-files", "-l"), git(repo, "lfs", "status", "--porcelain")
