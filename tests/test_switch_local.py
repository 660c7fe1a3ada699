"""A switch over what the user left in the work tree, compared with ``git checkout`` on the
same repository: ignored files in the way (git overwrites them: unpack-trees.c
check_ok_to_remove), untracked ones (git refuses; pcheckout also with --force), a directory
where a file goes; both writers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import (
    assert_index_matches_lstat,
    clone_no_checkout,
    git,
    make_repo,
    run_cli,
    snapshot_difference,
    write_tree_files,
)

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.errors import DestinationError

pytestmark = pytest.mark.usefixtures("writer")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    src = make_repo(tmp_path, {b".gitignore": b"*.o\nbuild/\n", b"a": b"a\n", b"changed": b"1\n"})
    git(src, "tag", "v1")
    write_tree_files(
        src,
        {
            b"changed": b"2\n",
            b"x.o": b"tracked now\n",
            b"build/out": b"tracked too\n",
            b"out": b"a file where a directory was\n",
            b"gen/a.o": b"below a new directory\n",
        },
    )
    git(src, "add", "-f", "-A")
    git(src, "commit", "-qm", "two")
    git(src, "tag", "v2")
    return src


def _pair(tmp_path: Path, repo: Path) -> tuple[Path, Path]:
    out = []
    for name in ("ours", "theirs"):
        w = clone_no_checkout(repo, tmp_path / name)
        git(w, "checkout", "-q", "v1")
        out.append(w)
    return out[0], out[1]


def assert_same_as_git(ours: Path, theirs: Path) -> None:
    """helpers.assert_same_as_git where ignored files may stay (``git status`` the same)."""
    diff = snapshot_difference(ours, theirs)
    assert not diff, "the trees differ:\n" + diff
    for args in (["ls-files", "-s", "-z"], ["status", "--porcelain", "-z", "--ignored"]):
        assert git(ours, *args) == git(theirs, *args), args
    assert git(ours, "rev-parse", "HEAD") == git(theirs, "rev-parse", "HEAD")
    assert_index_matches_lstat(ours)


def _git_switch(work: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(work), "checkout", "-q", *args], capture_output=True)


IGNORED = {
    "file": {b"x.o": b"mine\n"},
    "below-an-ignored-directory": {b"build/out": b"mine\n", b"build/more/deep": b"mine\n"},
    "directory-of-ignored-files": {b"out/x.o": b"mine\n", b"out/build/y": b"mine\n"},
    "file-where-a-directory-goes": {b"gen": b"mine\n", b"gen.o": b"mine\n"},
}


@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
@pytest.mark.parametrize("files", IGNORED.values(), ids=IGNORED.keys())
def test_ignored_files_in_the_way_are_overwritten_as_git_does(
    tmp_path: Path, repo: Path, files: dict[bytes, bytes], force: bool
) -> None:
    # git's checkout takes ignored files for expendable, with or without -f; the engine
    # refused them as untracked, and so did git's writer with --force.
    ours, theirs = _pair(tmp_path, repo)
    if b"gen" in files:  # (an ignored file where the target has a directory)
        for w in (ours, theirs):
            (w / ".git" / "info" / "exclude").write_bytes(b"/gen\n")
    for w in (ours, theirs):
        write_tree_files(w, files)
    proc = _git_switch(theirs, *(["-f"] if force else []), "v2")
    assert proc.returncode == 0, proc.stderr
    checkout(CheckoutOptions(directory=ours, rev="v2", force=force))
    assert_same_as_git(ours, theirs)


@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
def test_a_directory_with_untracked_files_where_a_file_goes_is_refused(
    tmp_path: Path, repo: Path, force: bool
) -> None:
    ours, theirs = _pair(tmp_path, repo)
    for w in (ours, theirs):
        write_tree_files(w, {b"out/x.o": b"ignored\n", b"out/keep": b"untracked\n"})
    if not force:  # git -f removes it, untracked file and all: pcheckout never does
        refused = _git_switch(theirs, "v2")
        assert refused.returncode == 1 and b"would lose untracked files" in refused.stderr
    with pytest.raises(DestinationError, match="out"):  # (git names the directory)
        checkout(CheckoutOptions(directory=ours, rev="v2", force=force))
    assert (ours / "out" / "keep").read_bytes() == b"untracked\n"
    assert git(ours, "rev-parse", "HEAD") == git(theirs, "rev-parse", "v1")


def test_a_tracked_file_replaced_by_a_directory_of_untracked_files_is_kept_with_force(
    tmp_path: Path, repo: Path
) -> None:
    # git -f removes the directory, its untracked files with it; pcheckout refuses, before
    # anything changes (the engine stopped half way on "cannot write changed: File exists",
    # git's writer let git delete them).
    ours, _theirs = _pair(tmp_path, repo)
    (ours / "changed").unlink()
    write_tree_files(ours, {b"changed/mine": b"my work\n"})
    with pytest.raises(DestinationError, match="changed/mine"):
        checkout(CheckoutOptions(directory=ours, rev="v2", force=True))
    assert (ours / "changed" / "mine").read_bytes() == b"my work\n"
    assert not (ours / "x.o").exists()  # nothing written


@pytest.mark.parametrize("case", ["local", "untracked"])
def test_a_refusal_says_what_git_says(tmp_path: Path, repo: Path, case: str) -> None:
    # git's own sentences (unpack-trees.c setup_unpack_trees_porcelain), on pcheckout's one
    # line, whoever writes; exit 1 as git's
    ours, theirs = _pair(tmp_path, repo)
    for w in (ours, theirs):
        if case == "local":
            (w / "changed").write_bytes(b"my work\n")
        else:
            write_tree_files(w, {b"out": b"mine\n"})
    said = _git_switch(theirs, "v2")
    assert said.returncode == 1
    proc = run_cli("checkout", "-C", str(ours), "v2")
    assert proc.returncode == 1
    (line,) = proc.stderr.splitlines()
    header, path, advice, aborting = said.stderr.decode().splitlines()
    assert f"{header.removeprefix('error: ')} {path.strip()}; {advice} {aborting}" in line


def test_local_changes_carried_over_are_listed_as_git_lists_them(
    tmp_path: Path, repo: Path
) -> None:
    # git checkout ends by listing what differs from the new commit (checkout.c
    # show_local_changes: diff-index --name-status, no renames), on stdout, before its
    # branch's tracking line; -q and -f list nothing.
    ours, theirs = _pair(tmp_path, repo)
    for w in (ours, theirs):
        git(w, "checkout", "-q", "-b", "topic")
        git(w, "branch", "--set-upstream-to", "main")
        write_tree_files(w, {b"a": b"mine\n", b"staged": b"new\n", b'q"uote': b"x\n"})
        git(w, "add", "staged", 'q"uote')
        (w / ".gitignore").unlink()
        git(w, "branch", "-q", "-f", "other", "v2")
    said = subprocess.run(
        ["git", "-C", str(theirs), "checkout", "other"], capture_output=True, check=True
    )
    proc = run_cli("checkout", "-C", str(ours), "other")
    assert proc.returncode == 0, proc.stderr
    summary, *lines = proc.stdout.splitlines()
    assert summary.startswith("switched ")
    assert lines == said.stdout.decode().splitlines()
    assert lines[:4] == ["D\t.gitignore", "M\ta", 'A\t"q\\"uote"', "A\tstaged"]
    git(ours, "checkout", "-q", "topic")
    for args in (["-q", "other"], ["-f", "other"]):
        git(ours, "checkout", "-q", "topic")
        assert run_cli("checkout", "-C", str(ours), *args).stdout.count("\t") == 0


@pytest.mark.parametrize("writer", ["git", "pcheckout"])
def test_the_carried_changes_and_head_lines_by_either_writer_are_git_s(
    tmp_path: Path, repo: Path, writer: str
) -> None:
    # git's writer runs git's checkout without -q: git lists what it carried itself, from
    # the entries it has just looked at, and pcheckout asks no second git process for it
    # (a diff-index lstats every entry again: 0.46 s at 250k). The engine asks one.
    ours, theirs = _pair(tmp_path, repo)
    for w in (ours, theirs):
        git(w, "checkout", "-q", "-b", "topic")
        write_tree_files(w, {b"a": b"mine\n", b"staged": b"new\n"})
        git(w, "add", "staged")
        git(w, "branch", "-q", "-f", "other", "v2")
    said = subprocess.run(
        ["git", "-C", str(theirs), "checkout", "other"], capture_output=True, check=True
    )
    trace = tmp_path / "trace"
    env = {"PCHECKOUT_WRITER": writer, "GIT_TRACE": str(trace)}
    proc = run_cli("checkout", "-C", str(ours), "other", env=env)
    assert proc.returncode == 0, proc.stderr
    summary, _, rest = proc.stdout.partition("\n")
    assert summary.startswith("switched ")
    assert (rest, proc.stderr) == (said.stdout.decode(), said.stderr.decode())
    assert "M\ta" in rest.splitlines() and "Switched to branch 'other'" in proc.stderr
    assert ("diff-index" in trace.read_text()) == (writer == "pcheckout")


def test_a_clean_filter_that_fails_leaves_the_switch_done(tmp_path: Path) -> None:
    # listing what the switch carried runs the clean filter the switch brought in where
    # git's checkout, its entries found fresh before, does not: the list is left out, the
    # switch succeeds as git's does
    src = make_repo(tmp_path, {b"f.r": b"x\n"})
    git(src, "tag", "v1")
    write_tree_files(src, {b".gitattributes": b"*.r filter=r\n"})
    git(src, "add", ".gitattributes")
    git(src, "commit", "-qm", "two")
    cfg = {"filter.r.required": "true", "filter.r.clean": "false", "filter.r.smudge": "cat"}
    ours, theirs = (clone_no_checkout(src, tmp_path / n, cfg) for n in ("ours", "theirs"))
    for w in (ours, theirs):
        git(w, "checkout", "-q", "v1")
    assert _git_switch(theirs, "main").returncode == 0
    proc = run_cli("checkout", "-C", str(ours), "main")
    assert proc.returncode == 0, proc.stderr
    assert (ours / ".gitattributes").exists()
