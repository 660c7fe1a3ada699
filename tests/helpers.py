"""Test helpers: real git repositories in tmp dirs, and a comparison with git.

Every checkout test asks the same question: is what pcheckout wrote
indistinguishable from what git itself writes?  ``assert_same_as_git`` answers
it: same paths, bytes, modes, link targets, ``git ls-files -s``, a clean
``git status``, and index stat data equal to ``lstat`` of each file.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from pcheckout.git.index import read_index

GIT_ENV = {
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(
    cwd: Path | str, *args: str | bytes, input: bytes | None = None, check: bool = True
) -> bytes:
    proc = subprocess.run(["git", "-C", str(cwd), *args], input=input, capture_output=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {args!r} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def write_tree_files(root: Path, files: dict[bytes, bytes | tuple[str, bytes]]) -> None:
    """``{path: content}``; content may be ("x", bytes) exec, ("l", target) symlink."""
    rb = os.fsencode(root)
    for path, content in files.items():
        full = rb + b"/" + path
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if isinstance(content, tuple):
            kind, data = content
            if kind == "l":
                os.symlink(data, full)
                continue
            with open(full, "wb") as f:
                f.write(data)
            os.chmod(full, 0o755)
        else:
            with open(full, "wb") as f:
                f.write(content)


def make_repo(
    tmp_path: Path,
    files: dict[bytes, bytes | tuple[str, bytes]],
    *,
    name: str = "src",
    config: dict[str, str] | None = None,
) -> Path:
    repo = tmp_path / name
    git(tmp_path, "init", "-q", "-b", "main", name)
    for k, v in (config or {}).items():
        git(repo, "config", k, v)
    write_tree_files(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one", "--allow-empty")
    return repo


def clone_no_checkout(src: Path, dest: Path, config: dict[str, str] | None = None) -> Path:
    git(src.parent, "clone", "-q", "--no-checkout", str(src), str(dest))
    for k, v in (config or {}).items():
        git(dest, "config", k, v)
    return dest


def clone_with_git(
    src: Path, dest: Path, rev: str = "HEAD", config: dict[str, str] | None = None
) -> Path:
    clone_no_checkout(src, dest, config)
    git(dest, "checkout", "-q", "-f", rev)
    return dest


def snapshot(root: Path) -> dict[bytes, tuple[object, ...]]:
    """Everything under root except .git: kind, exec bit, bytes or link target."""
    out: dict[bytes, tuple[object, ...]] = {}
    rb = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(rb):
        rel = os.path.relpath(dirpath, rb)
        if rel == b".":
            dirnames[:] = [d for d in dirnames if d != b".git"]
            filenames = [f for f in filenames if f != b".git"]  # a linked worktree's gitfile
            rel = b""
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            key = os.path.join(rel, name) if rel else name
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[key] = ("l", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[key] = ("d",)
            else:
                with open(p, "rb") as f:
                    out[key] = ("f", bool(st.st_mode & 0o100), f.read())
    return out


def assert_index_matches_lstat(work: Path) -> None:
    idx_path = Path(git(work, "rev-parse", "--git-path", "index").decode().strip())
    if not idx_path.is_absolute():
        idx_path = work / idx_path
    index = read_index(idx_path)
    rb = os.fsencode(work)
    for e in index.entries:
        st = os.lstat(rb + b"/" + e.path)
        assert (e.mtime_s, e.mtime_ns) == (st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9), e.path
        assert (e.ctime_s, e.ctime_ns) == (st.st_ctime_ns // 10**9, st.st_ctime_ns % 10**9), e.path
        assert e.ino == st.st_ino & 0xFFFFFFFF, e.path
        assert e.dev == st.st_dev & 0xFFFFFFFF, e.path
        assert e.size == st.st_size & 0xFFFFFFFF, e.path
        assert (e.uid, e.gid) == (st.st_uid, st.st_gid), e.path


def snapshot_difference(ours: Path, theirs: Path) -> str:
    """What differs between the two trees' snapshots, one short line per path
    (a bare ``==`` on two large dicts tells nothing when it fails in CI)."""
    a, b = snapshot(ours), snapshot(theirs)
    lines = []
    for key in sorted(a.keys() | b.keys()):
        x, y = a.get(key), b.get(key)
        if x != y:
            lines.append(f"{key!r}: ours {_brief(x)}, git's {_brief(y)}")
    return "\n".join(lines[:20] + ([f"... {len(lines) - 20} more"] if len(lines) > 20 else []))


def _brief(v: tuple[object, ...] | None) -> str:
    if v is None:
        return "absent"
    if v[0] == "f":
        data = v[2]
        assert isinstance(data, bytes)
        return f"file exec={v[1]} {len(data)} bytes {data[:24]!r}"
    return repr(v)


def assert_same_as_git(ours: Path, theirs: Path) -> None:
    diff = snapshot_difference(ours, theirs)
    assert not diff, "the trees differ:\n" + diff
    assert git(ours, "ls-files", "-s", "-z") == git(theirs, "ls-files", "-s", "-z")
    assert git(ours, "status", "--porcelain", "-z", "--ignored") == b""
    assert git(ours, "rev-parse", "HEAD") == git(theirs, "rev-parse", "HEAD")
    assert git(ours, "symbolic-ref", "-q", "HEAD", check=False) == git(
        theirs, "symbolic-ref", "-q", "HEAD", check=False
    )
    # git must see every file as clean from stat data alone
    assert subprocess.run(["git", "-C", str(ours), "diff-files", "--quiet"]).returncode == 0
    assert_index_matches_lstat(ours)


def run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pcheckout", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
