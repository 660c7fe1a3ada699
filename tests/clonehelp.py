"""Helpers for the clone tests: a file:// server and a comparison of whole clones."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from helpers import assert_same_as_git, git, make_repo, run_cli, snapshot, write_tree_files

#: file:// submodules need this since git 2.38.1 (protocol.file.allow=user by
#: default); given to git and pcheckout alike through the environment.
ALLOW_FILE = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "protocol.file.allow",
    "GIT_CONFIG_VALUE_0": "always",
}


def make_server(tmp_path: Path, name: str = "server.git", *, prefix: str = "") -> Path:
    """A bare repository with three commits on main, a branch, an annotated and
    a light tag, nested directories, an executable and a symlink; filters
    allowed (uploadpack.allowFilter) for --filter clones."""
    work = make_repo(
        tmp_path,
        {
            f"{prefix}README".encode(): b"one\n",
            b"src/a.c": b"int a;\n",
            b"src/deep/b.c": b"int b;\n",
            b"docs/x.md": b"# x\n",
            b"bin/run": ("x", b"#!/bin/sh\n"),
            b"link": ("l", b"src/a.c"),
        },
        name=name.removesuffix(".git") + "-work",
    )
    git(work, "tag", "-a", "-m", "first", "v1")
    write_tree_files(work, {b"src/c.c": b"int c;\n", b"docs/y.md": b"# y\n"})
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "two")
    git(work, "tag", "v2")
    git(work, "branch", "release")
    write_tree_files(work, {b"src/a.c": b"int a = 3;\n", b"top": b"t\n"})
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "three")
    server = tmp_path / name
    git(tmp_path, "clone", "-q", "--bare", str(work), str(server))
    git(server, "config", "uploadpack.allowFilter", "true")
    return server


def url(path: Path) -> str:
    return "file://" + str(path)


def git_clone(cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
    """git clone itself, the reference."""
    import subprocess

    full = dict(os.environ)
    full.update(env or {})
    proc = subprocess.run(["git", "clone", "-q", *args], cwd=cwd, env=full, capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")


def pcheckout_clone(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = run_cli("clone", "-q", *args, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _tree_of(root: Path) -> dict[str, bytes | None]:
    """Every path under a git dir that git's state lives in, with contents for
    small text files (None for directories, objects and the index)."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel == "." and "objects" in dirnames:
            dirnames.remove("objects")  # compared as object sets (pack names differ)
        for d in dirnames:
            out[os.path.normpath(os.path.join(rel, d))] = None
        for f in filenames:
            key = os.path.normpath(os.path.join(rel, f))
            if key.startswith("modules" + os.sep) or key == "index":
                out[key] = None
            else:
                out[key] = (Path(dirpath) / f).read_bytes()
    return out


def assert_git_dir_same(ours: Path, theirs: Path) -> None:
    """Refs, packed-refs, config, HEAD, reflogs, shallow, sparse-checkout and
    every other file git keeps there: byte-identical (object packs aside)."""
    a, b = _tree_of(ours), _tree_of(theirs)
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key] == b[key], key
    assert _objects(ours) == _objects(theirs)


def _objects(git_dir: Path) -> set[bytes]:
    """The objects a repository has (a partial clone's fetched blobs among them)."""
    out = git(git_dir, "cat-file", "--batch-check", "--batch-all-objects", "--unordered")
    return set(out.splitlines())


def assert_clone_same(ours: Path, theirs: Path, *, bare: bool = False) -> None:
    if bare:
        assert_git_dir_same(ours, theirs)
        assert not any(p.name == "index" for p in ours.iterdir())
        return
    gd_ours = Path(git(ours, "rev-parse", "--absolute-git-dir").decode().strip())
    gd_theirs = Path(git(theirs, "rev-parse", "--absolute-git-dir").decode().strip())
    assert_git_dir_same(gd_ours, gd_theirs)
    sparse = git(theirs, "config", "--bool", "core.sparseCheckout", check=False).strip()
    if (gd_theirs / "index").exists() and sparse == b"true":
        assert_sparse_same(ours, theirs)
    elif (gd_theirs / "index").exists() and (ours / ".gitmodules").exists():
        assert_superproject_same(ours, theirs)
    elif (gd_theirs / "index").exists():
        assert_same_as_git(ours, theirs)
    else:
        assert not (gd_ours / "index").exists()
        assert sorted(p.name for p in ours.iterdir()) == sorted(p.name for p in theirs.iterdir())
    assert git(ours, "for-each-ref", "--format=%(refname) %(objectname) %(symref)") == git(
        theirs, "for-each-ref", "--format=%(refname) %(objectname) %(symref)"
    )


def make_super_server(tmp_path: Path) -> Path:
    """A bare superproject with two submodules (one in a subdirectory, one
    whose recorded commit is not its branch tip), each from its own bare server."""
    import subprocess

    env = {**os.environ, **ALLOW_FILE}
    one = make_server(tmp_path, "one.git", prefix="one-")
    two = make_server(tmp_path, "two.git", prefix="two-")
    work = make_repo(tmp_path, {b"main.c": b"int main;\n"}, name="super-work")
    for sub, path in ((one, "libs/one"), (two, "two")):
        proc = subprocess.run(
            ["git", "-C", str(work), "submodule", "add", "-q", url(sub), path],
            env=env,
            capture_output=True,
        )
        assert proc.returncode == 0, proc.stderr
    # "two" at its second commit, not the tip of its default branch
    git(work / "two", "checkout", "-q", "HEAD~1")
    git(work, "add", "two")
    git(work, "commit", "-q", "-m", "submodules")
    server = tmp_path / "super.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(server))
    return server


def assert_superproject_same(ours: Path, theirs: Path) -> None:
    """assert_same_as_git for a tree with populated submodules: a gitlink's
    index stat data is its directory's before the submodule was cloned into
    it (git's too; git never compares it), so only other entries must equal
    their lstat."""
    from pcheckout.git.index import read_index

    assert snapshot(ours) == snapshot(theirs)
    for args in (("ls-files", "-s", "-z"), ("rev-parse", "HEAD"), ("submodule", "status")):
        assert git(ours, *args) == git(theirs, *args)
    assert git(ours, "status", "--porcelain", "-z", "--ignored") == b""
    assert subprocess.run(["git", "-C", str(ours), "diff-files", "--quiet"]).returncode == 0
    for e in read_index(ours / ".git" / "index").entries:
        if e.mode == 0o160000:
            continue
        st = os.lstat(os.fsencode(ours) + b"/" + e.path)
        assert (e.mtime_s, e.mtime_ns) == divmod(st.st_mtime_ns, 10**9), e.path
        assert (e.ino, e.size) == (st.st_ino & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF), e.path


@contextlib.contextmanager
def latency_mount(tmp_path: Path, latency_ms: float = 0.0) -> Iterator[Path]:
    """A latencyfs mount (scripts/latencyfs.py) for the test; skips without FUSE."""
    import importlib.util
    import shutil

    import pytest

    if not os.access("/dev/fuse", os.R_OK | os.W_OK) or shutil.which("fusermount3") is None:
        pytest.skip("latencyfs needs /dev/fuse and fusermount3")
    script = Path(__file__).resolve().parent.parent / "scripts" / "latencyfs.py"
    spec = importlib.util.spec_from_file_location("latencyfs_for_clone", script)
    assert spec is not None and spec.loader is not None
    lfs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lfs)
    try:
        lfs.build()
    except Exception as exc:  # noqa: BLE001 - no compiler or headers: skip, say why
        pytest.skip(f"latencyfs cannot be built: {exc}")
    backing, mnt = tmp_path / "lfs-backing", tmp_path / "lfs-mnt"
    lfs.mount(backing, mnt, latency_ms=latency_ms)
    try:
        yield mnt
    finally:
        lfs.umount(mnt)


def assert_sparse_same(ours: Path, theirs: Path) -> None:
    """assert_same_as_git for a sparse checkout: the same files, ``ls-files -s``
    and skip-worktree bits (``ls-files -t``), a clean status naming the sparse
    checkout as git's does, and index stat = lstat for the entries written."""
    from pcheckout.git.index import read_index

    assert snapshot(ours) == snapshot(theirs)
    for args in (("ls-files", "-s", "-z"), ("ls-files", "-t", "-z"), ("rev-parse", "HEAD")):
        assert git(ours, *args) == git(theirs, *args)
    assert git(ours, "status", "--porcelain", "-z") == b""
    assert git(ours, "status").replace(ours.name.encode(), b"X") == git(theirs, "status").replace(
        theirs.name.encode(), b"X"
    )
    skipped = {rec[2:] for rec in git(ours, "ls-files", "-t", "-z").split(b"\0") if rec[:1] == b"S"}
    for e in read_index(ours / ".git" / "index").entries:
        present = os.path.lexists(os.fsencode(ours) + b"/" + e.path)
        assert present != (e.path in skipped), e.path
        if present:
            st = os.lstat(os.fsencode(ours) + b"/" + e.path)
            assert (e.mtime_s, e.mtime_ns) == divmod(st.st_mtime_ns, 10**9), e.path
