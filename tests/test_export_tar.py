"""``pcheckout export`` leaves the modes and times ``git archive REV | tar -x`` leaves:
each member's mode (tar.umask, and the umask tar itself applies unless it runs as root)
and its mtime (the commit's date; the current time where REV names a tree), with both
writers; symlinks whatever ``core.symlinks`` says; REV as git archive reads it."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import git, make_repo

from pcheckout.errors import PcheckoutError
from pcheckout.export import ExportOptions, export

FILES: dict[bytes, bytes | tuple[str, bytes]] = {
    b"README": b"hello\n",
    b"d/x": b"x\n",
    b"d/e/deep.txt": b"deep\n",
    b"empty": b"",
    b"with space/f": b"f\n",
    b".gitattributes": b"*.tmp export-ignore\n",
    b"only/ignored.tmp": b"its directory is written empty\n",
    b"run.sh": ("x", b"#!/bin/sh\n"),
    b"rel": ("l", b"README"),
    b"d/dangling": ("l", b"/nowhere/at/all"),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = make_repo(tmp_path_factory.mktemp("tar"), FILES)
    git(src, "update-index", "--add", "--cacheinfo", "160000," + "1" * 40 + ",sub/mod")
    env = {**os.environ, "GIT_COMMITTER_DATE": "1500000000 +0200"}
    subprocess.run(["git", "-C", str(src), "commit", "-q", "-m", "two"], check=True, env=env)
    git(src, "tag", "-a", "v1", "-m", "v1")
    return src


def members(root: Path) -> dict[bytes, tuple[object, ...]]:
    """What tar -x leaves under ``root`` (root itself is no member): kind, permission
    bits, bytes or target, mtime in nanoseconds."""
    out: dict[bytes, tuple[object, ...]] = {}
    rb = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(rb):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            key = os.path.relpath(p, rb)
            if stat.S_ISLNK(st.st_mode):
                out[key] = ("l", os.readlink(p), st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                out[key] = ("d", oct(stat.S_IMODE(st.st_mode)), st.st_mtime_ns)
            else:
                data = Path(os.fsdecode(p)).read_bytes()
                out[key] = ("f", oct(stat.S_IMODE(st.st_mode)), data, st.st_mtime_ns)
    return out


def untarred(repo: Path, rev: str, dest: Path, tar_opts: tuple[str, ...] = ()) -> Path:
    """``git -C repo archive rev | tar -x tar_opts -C dest``."""
    dest.mkdir()
    tar = subprocess.run(["git", "-C", str(repo), "archive", rev], check=True, capture_output=True)
    subprocess.run(["tar", "-x", *tar_opts, "-C", str(dest)], input=tar.stdout, check=True)
    return dest


def ours(repo: Path, rev: str, dest: Path, writer: str) -> Path:
    export(ExportOptions(repository=repo, rev=rev, destination=dest, workers=2, writer=writer))
    return dest


@pytest.fixture(params=["pcheckout", "git"])
def writer(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)  # tar (as anyone but root) and git both apply it
    yield
    os.umask(old)


@pytest.mark.parametrize("rev", ["HEAD", "v1", "main"])
def test_modes_and_commit_times_as_tar_leaves_them(
    repo: Path, tmp_path: Path, writer: str, rev: str, umask_027: None
) -> None:
    want = members(untarred(repo, rev, tmp_path / "git"))
    got = members(ours(repo, rev, tmp_path / "ours", writer))
    assert got == want
    assert got[b"README"][3] == 1_500_000_000 * 10**9  # the commit's date
    assert got[b"sub/mod"][0] == "d" and got[b"only"][0] == "d"


@pytest.mark.parametrize("as_root", [True, False])
@pytest.mark.parametrize("tar_umask", [None, "022", "077", "0x12", "user"])
def test_tar_umask_and_who_extracts(
    repo: Path,
    tmp_path: Path,
    writer: str,
    as_root: bool,
    tar_umask: str | None,
    umask_027: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # root's tar keeps the archived modes (--same-permissions), anyone else's takes its
    # umask away too (--no-same-permissions): each compared under whoever runs this
    if tar_umask is not None:
        monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'tar.umask={tar_umask}'")
    opts = ("--same-permissions",) if as_root else ("--no-same-permissions",)
    want = members(untarred(repo, "HEAD", tmp_path / "git", opts))
    monkeypatch.setattr(os, "geteuid", lambda: 0 if as_root else 1000)
    got = members(ours(repo, "HEAD", tmp_path / "ours", writer))
    assert got == want


@pytest.mark.parametrize("rev", ["HEAD^{tree}", "HEAD:d", "v1:d"])
def test_a_tree_gets_the_current_time(repo: Path, tmp_path: Path, writer: str, rev: str) -> None:
    t0 = int(time.time())
    want = members(untarred(repo, rev, tmp_path / "git"))
    got = members(ours(repo, rev, tmp_path / "ours", writer))
    t1 = int(time.time())

    def times(m: dict[bytes, tuple[object, ...]]) -> set[object]:
        return {v[-1] for v in m.values()}

    def timeless(m: dict[bytes, tuple[object, ...]]) -> dict[bytes, tuple[object, ...]]:
        return {k: v[:-1] for k, v in m.items()}

    assert timeless(got) == timeless(want)
    (when,) = times(got)  # one time for every member, in whole seconds
    assert isinstance(when, int) and t0 * 10**9 <= when <= t1 * 10**9
    assert len(times(want)) == 1
    if rev != "HEAD^{tree}":
        assert b"e/deep.txt" in got and b"README" not in got


def test_symlinks_whatever_core_symlinks_says(
    repo: Path, tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.symlinks=false'")
    want = members(untarred(repo, "HEAD", tmp_path / "git"))
    got = members(ours(repo, "HEAD", tmp_path / "ours", writer))
    assert got == want
    assert got[b"rel"][:2] == ("l", b"README")


@pytest.mark.parametrize(
    ("rev", "words"),
    [
        ("nosuch", "not a valid object name: nosuch"),
        ("HEAD:nosuch", "not a valid object name: HEAD:nosuch"),
        ("HEAD:README", "not a tree object: "),
    ],
)
def test_a_rev_git_archive_refuses(repo: Path, tmp_path: Path, rev: str, words: str) -> None:
    done = subprocess.run(["git", "-C", str(repo), "archive", rev], capture_output=True)
    assert done.returncode == 128
    assert done.stderr.decode().strip().startswith("fatal: " + words)
    with pytest.raises(PcheckoutError) as exc:
        ours(repo, rev, tmp_path / "ours", "pcheckout")
    assert exc.value.exit_code == 128
    assert done.stderr.decode().strip() == "fatal: " + str(exc.value)
    assert not (tmp_path / "ours").exists()


@pytest.mark.parametrize("rev", ["HEAD", "HEAD^{tree}"])
def test_from_a_subdirectory_its_subtree_alone(
    repo: Path, tmp_path: Path, writer: str, rev: str
) -> None:
    # git archive run in a subdirectory writes that subtree, paths from there; a commit's
    # date stays the members' mtime
    want = members(untarred(repo / "d", rev, tmp_path / "git"))
    got = members(ours(repo / "d", rev, tmp_path / "ours", writer))
    if rev == "HEAD":
        assert got == want
    assert {k: v[:-1] for k, v in got.items()} == {k: v[:-1] for k, v in want.items()}
    assert set(got) == {b"x", b"e", b"e/deep.txt", b"dangling"}


def test_from_an_untracked_directory(repo: Path, tmp_path: Path) -> None:
    (repo / "untracked-dir").mkdir(exist_ok=True)
    done = subprocess.run(
        ["git", "archive", "HEAD"], cwd=repo / "untracked-dir", capture_output=True
    )
    with pytest.raises(PcheckoutError) as exc:
        ours(repo / "untracked-dir", "HEAD", tmp_path / "ours", "pcheckout")
    assert (done.returncode, done.stderr.decode().strip()) == (
        exc.value.exit_code,
        "fatal: " + str(exc.value),
    )


def test_into_a_directory_holding_other_files(repo: Path, tmp_path: Path, writer: str) -> None:
    # tar -x keeps what is there besides its members, and gives a directory that was
    # there already (a submodule's too) its member's mode and time
    for side in ("git", "ours"):
        (tmp_path / side / "d" / "e").mkdir(parents=True)
        (tmp_path / side / "sub" / "mod").mkdir(parents=True)
        (tmp_path / side / "sub" / "mod" / "f").write_bytes(b"in a submodule\n")
        (tmp_path / side / "d").chmod(0o700)
        (tmp_path / side / "d" / "mine.txt").write_bytes(b"mine\n")
        (tmp_path / side / "other").symlink_to("README")
        os.utime(tmp_path / side / "d" / "mine.txt", ns=(0, 10**9), follow_symlinks=False)
        os.utime(tmp_path / side / "other", ns=(0, 10**9), follow_symlinks=False)
        os.utime(tmp_path / side / "sub" / "mod" / "f", ns=(0, 10**9))
    tar = subprocess.run(
        ["git", "-C", str(repo), "archive", "HEAD"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(tmp_path / "git")], input=tar.stdout, check=True)
    export(ExportOptions(repository=repo, rev="HEAD", destination=tmp_path / "ours", writer=writer))
    got, want = members(tmp_path / "ours"), members(tmp_path / "git")
    assert got == want
    assert got[b"d/mine.txt"][2] == b"mine\n" and got[b"d"][1] == want[b"d"][1] != "0o700"


@pytest.mark.parametrize("there", ["README", "d/x", "d/e", "d", "sub/mod"])
def test_nothing_written_over_what_is_in_the_way(
    repo: Path, tmp_path: Path, writer: str, there: str
) -> None:
    # where tar -x would replace something (a file, a symlink to a directory, a file
    # where a directory goes), pcheckout refuses, naming it, and writes nothing
    dest = tmp_path / "ours"
    (dest / there).parent.mkdir(parents=True, exist_ok=True)
    if there == "d":
        (tmp_path / "elsewhere").mkdir()
        (dest / there).symlink_to(tmp_path / "elsewhere")
    else:
        (dest / there).write_bytes(b"mine\n")
    before = members(dest)
    with pytest.raises(PcheckoutError) as exc:
        ours(repo, "HEAD", dest, writer)
    assert f"already holds what the export writes: {there} (" in str(exc.value)
    assert members(dest) == before
    if there == "d":
        assert os.listdir(tmp_path / "elsewhere") == []
