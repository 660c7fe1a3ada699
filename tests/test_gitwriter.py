"""git's own checkout as the writer (write/gitwriter.py), compared with git checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    assert_same_as_git,
    clone_no_checkout,
    clone_with_git,
    git,
    make_repo,
    run_cli,
    snapshot,
)
from test_checkout import ODD_NAMES

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.context import Context, NullReporter
from pcheckout.errors import GitError, GitRefusedError
from pcheckout.export import ExportOptions, export
from pcheckout.git import runner
from pcheckout.git.runner import Git, discover
from pcheckout.write import gitwriter

MANY = {b"d%d/f%03d" % (i % 4, i): b"%d\n" % i * (i % 9) for i in range(240)}


def _tree(repo: Path, rev: str = "HEAD") -> str:
    return git(repo, "rev-parse", f"{rev}^{{tree}}").decode().strip()


def test_fresh_write_is_git_checkout(tmp_path: Path) -> None:
    src = make_repo(tmp_path, ODD_NAMES)
    theirs = clone_with_git(src, tmp_path / "theirs")
    ours = clone_no_checkout(src, tmp_path / "ours")
    seen: list[tuple[int, int]] = []
    done = gitwriter.write_tree(
        Git(ours), _tree(ours), workers=3, threshold=1, progress=lambda d, t: seen.append((d, t))
    )
    assert done.updated == len(ODD_NAMES) and done.command == "read-tree"
    assert seen[-1] == (len(ODD_NAMES), len(ODD_NAMES))
    assert_same_as_git(ours, theirs)


def test_git_runs_the_planned_parallel_workers(tmp_path: Path) -> None:
    src = make_repo(tmp_path, MANY)
    ours = clone_no_checkout(src, tmp_path / "ours")
    trace = tmp_path / "trace2.json"
    g = Git(ours, env={**os.environ, "GIT_TRACE2_EVENT": str(trace)})
    gitwriter.write_tree(g, _tree(ours), workers=3, threshold=100)
    events = trace.read_text()
    assert events.count('"checkout--worker"') >= 3  # git's parallel checkout ran its workers
    assert git(ours, "status", "--porcelain") == b""


def test_without_progress_git_prints_nothing_we_drop(tmp_path: Path) -> None:
    src = make_repo(tmp_path, MANY)
    ours = clone_no_checkout(src, tmp_path / "ours")
    done = gitwriter.write_tree(Git(ours), _tree(ours), workers=2, threshold=100)
    assert done.updated == -1  # git said nothing: no progress was asked for
    assert git(ours, "status", "--porcelain") == b""


def _two_versions(tmp_path: Path) -> Path:
    src = make_repo(tmp_path, {b"change.txt": b"old\n", b"keep": b"k\n", b"gone": b"g\n"})
    git(src, "tag", "v1")
    (src / "change.txt").write_bytes(b"new\n")
    (src / "gone").unlink()
    (src / "added").write_bytes(b"a\n")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "two")
    git(src, "tag", "v2")
    return src


def test_switch_moves_like_git_checkout(tmp_path: Path) -> None:
    src = _two_versions(tmp_path)
    theirs = clone_with_git(src, tmp_path / "theirs", rev="v1")
    git(theirs, "checkout", "-q", "v2")
    ours = clone_with_git(src, tmp_path / "ours", rev="v1")
    done = gitwriter.switch(Git(ours), "v2", workers=2, threshold=100, progress=lambda d, t: None)
    assert done.command == "checkout" and done.updated == 3  # change.txt, added, gone
    assert_same_as_git(ours, theirs)
    assert git(ours, "reflog", "-1", "--format=%gs") == git(theirs, "reflog", "-1", "--format=%gs")


def test_switch_refusal_is_gits_own(tmp_path: Path) -> None:
    src = _two_versions(tmp_path)
    ours = clone_with_git(src, tmp_path / "ours", rev="v1")
    (ours / "change.txt").write_bytes(b"my work\n")
    (ours / "added").write_bytes(b"untracked, mine\n")
    theirs = subprocess.run(["git", "-C", str(ours), "checkout", "v2"], capture_output=True)
    assert theirs.returncode == 1
    with pytest.raises(GitRefusedError) as info:
        gitwriter.switch(Git(ours), "v2", workers=2, threshold=100)
    msg = str(info.value)
    assert "\n" not in msg and "\t" not in msg
    assert "would be overwritten by checkout: change.txt;" in msg
    first_line = theirs.stderr.decode().splitlines()[0].removeprefix("error: ")
    assert first_line in msg
    assert (ours / "change.txt").read_bytes() == b"my work\n"
    assert git(ours, "rev-parse", "HEAD") == git(ours, "rev-parse", "v1")


def test_many_refused_paths_are_summarised(tmp_path: Path) -> None:
    files = {b"f%02d" % i: b"1\n" for i in range(12)}
    src = make_repo(tmp_path, files)
    git(src, "tag", "v1")
    for name in files:
        (src / name.decode()).write_bytes(b"2\n")
    git(src, "commit", "-qam", "two")
    ours = clone_with_git(src, tmp_path / "ours", rev="v1")
    for name in files:
        (ours / name.decode()).write_bytes(b"mine\n")
    with pytest.raises(GitRefusedError, match=r"f00, f01, f02, f03, f04 and 7 more;"):
        gitwriter.switch(Git(ours), "main", workers=2, threshold=100)


def test_unknown_revision_and_option_like_names_are_git_errors(tmp_path: Path) -> None:
    src = _two_versions(tmp_path)
    ours = clone_with_git(src, tmp_path / "ours")
    with pytest.raises(GitError, match="no-such"):
        gitwriter.switch(Git(ours), "no-such", workers=1, threshold=100)
    with pytest.raises(GitError, match="--writer pcheckout"):
        gitwriter.switch(Git(ours), "--orphan", workers=1, threshold=100)


def test_export_writes_the_tree_alone(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {**ODD_NAMES, b".gitattributes": b"*.txt text eol=crlf\n"})
    # the repository's own sparse-checkout patterns must not shrink an export
    git(src, "sparse-checkout", "set", "--no-cone", "/plain.txt")
    dest = tmp_path / "export"
    dest.mkdir()
    g = Git(src)
    ctx = Context(g, discover(g), {}, NullReporter(), dict(os.environ))
    gitwriter.export_tree(ctx, _tree(src), dest, workers=2, threshold=1)
    via_checkout = clone_with_git(src, tmp_path / "theirs")
    expected = snapshot(via_checkout)
    assert snapshot(dest) == expected
    assert (dest / "plain.txt").read_bytes() == b"hello\r\n"  # not sparse
    assert (dest / "a.txt").read_bytes() == b"x\r\n"  # attributes from the exported tree
    assert not (dest / ".git").exists()


def test_sparse_cone_is_applied_by_git(tmp_path: Path) -> None:
    files = {b"top": b"t\n", b"in/a": b"a\n", b"in/deep/b": b"b\n", b"out/c": b"c\n"}
    src = make_repo(tmp_path, files)
    results = []
    for name in ("theirs", "ours"):
        w = clone_no_checkout(src, tmp_path / name)
        git(w, "sparse-checkout", "set", "--cone", "in")
        if name == "theirs":
            git(w, "checkout", "-q", "-f", "HEAD")
        else:
            gitwriter.write_tree(Git(w), _tree(w), workers=2, threshold=1)
        results.append(w)
    theirs, ours = results
    assert snapshot(ours) == snapshot(theirs)
    assert not (ours / "out").exists() and (ours / "in" / "deep" / "b").exists()
    assert git(ours, "ls-files", "-s", "-t") == git(theirs, "ls-files", "-s", "-t")
    assert git(ours, "status", "--porcelain") == b""


def test_partial_clone_fetches_what_it_writes(tmp_path: Path) -> None:
    src = make_repo(tmp_path, MANY)
    git(src, "config", "uploadpack.allowFilter", "true")
    url = src.as_uri()
    clones = []
    for name in ("theirs", "ours"):
        git(tmp_path, "clone", "-q", "--no-checkout", "--filter=blob:none", url, name)
        clones.append(tmp_path / name)
    theirs, ours = clones
    git(theirs, "checkout", "-q", "-f", "HEAD")
    missing = git(ours, "rev-list", "--objects", "--missing=print", "HEAD").count(b"\n?")
    assert missing > 0
    gitwriter.write_tree(Git(ours), _tree(ours), workers=2, threshold=1)
    assert_same_as_git(ours, theirs)


# --- the writer chosen end to end --------------------------------------------------------------


@pytest.fixture
def shm() -> Iterator[Path]:
    """A directory on tmpfs, where the policy picks git's writer."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm tmpfs here")
    base = Path(tempfile.mkdtemp(prefix="pcheckout-gitwriter-", dir="/dev/shm"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_auto_picks_git_on_tmpfs_and_says_why(shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PCHECKOUT_WRITER")
    src = make_repo(shm, MANY)
    theirs = clone_with_git(src, shm / "theirs")
    ours = clone_no_checkout(src, shm / "ours")
    plan = checkout(CheckoutOptions(directory=ours, dry_run=True)).plan
    assert (plan.writer, plan.writer_source) == ("git", "policy")
    assert "tmpfs is CPU-bound" in plan.writer_reason and "docs/benchmarks.md" in plan.writer_reason
    result = checkout(CheckoutOptions(directory=ours))
    assert result.plan.writer == "git" and not result.processes
    assert result.written == len(MANY) and result.bytes == sum(map(len, MANY.values()))
    assert_same_as_git(ours, theirs)


def test_old_git_falls_back_to_the_engine(shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PCHECKOUT_WRITER")
    old = lambda exe="git": (2, 31, 0)  # noqa: E731
    monkeypatch.setattr(runner, "git_version", old)
    monkeypatch.setattr("pcheckout.session.git_version", old)  # asked beside rev-parse
    src = make_repo(shm, MANY)
    theirs = clone_with_git(src, shm / "theirs")
    ours = clone_no_checkout(src, shm / "ours")
    result = checkout(CheckoutOptions(directory=ours))
    assert result.plan.writer == "pcheckout"
    assert "git 2.31.0 has no parallel checkout (2.32+)" in result.plan.writer_reason
    assert_same_as_git(ours, theirs)


def test_export_by_either_writer_is_the_same(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {**ODD_NAMES, b".gitattributes": b"*.txt text eol=crlf\n"})
    shots = []
    for name in ("pcheckout", "git"):
        dest = tmp_path / f"export-{name}"
        result = export(ExportOptions(repository=src, rev="HEAD", destination=dest, writer=name))
        assert result.plan.writer == name and result.written == len(ODD_NAMES) + 1
        shots.append(snapshot(dest))
    assert shots[0] == shots[1]


def _json(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    proc = run_cli(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_writer_precedence_cli_env_config(tmp_path: Path) -> None:
    src = make_repo(tmp_path, MANY)
    ours = clone_no_checkout(src, tmp_path / "ours")
    base = ("checkout", "-C", str(ours), "--dry-run", "--json")
    env = {"PCHECKOUT_WRITER": "pcheckout"}
    got = _json(*base, "--writer", "git", env=env)
    assert (got["writer"], got["writer_source"]) == ("git", "user")
    assert "--writer" in str(got["writer_reason"])
    got = _json(*base, env=env)
    assert (got["writer"], got["writer_source"]) == ("pcheckout", "user")
    git(ours, "config", "pcheckout.writer", "git")
    got = _json(*base, env={"PCHECKOUT_WRITER": ""})
    assert got["writer"] == "git" and "git config pcheckout.writer" in str(got["writer_reason"])
    got = _json(*base, "--writer", "auto", env={"PCHECKOUT_WRITER": "auto"})
    assert got["writer"] == "git"  # auto defers to the next level: the git config here


def test_bad_writer_is_a_usage_error() -> None:
    proc = run_cli("checkout", "--writer", "svn")
    assert proc.returncode == 2 and "--writer" in proc.stderr


def test_git_refusal_reaches_the_user_as_one_line(tmp_path: Path) -> None:
    src = _two_versions(tmp_path)
    ours = clone_with_git(src, tmp_path / "ours", rev="v1")
    (ours / "change.txt").write_bytes(b"my work\n")
    proc = run_cli("checkout", "-C", str(ours), "--writer", "git", "v2")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pcheckout: error: git checkout refused: ")
    assert "Your local changes to the following files would be overwritten" in lines[0]
    assert (ours / "change.txt").read_bytes() == b"my work\n"


def test_blobless_checkout_by_git_matches_git(tmp_path: Path) -> None:
    src = make_repo(tmp_path, MANY)
    git(src, "config", "uploadpack.allowFilter", "true")
    for name in ("theirs", "ours"):
        git(tmp_path, "clone", "-q", "--no-checkout", "--filter=blob:none", src.as_uri(), name)
        git(tmp_path / name, "sparse-checkout", "set", "--cone", "d1", "d3")
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    git(theirs, "checkout", "-q", "-f", "HEAD")
    result = checkout(CheckoutOptions(directory=ours, writer="git"))
    assert result.plan.writer == "git" and result.files == len(MANY) // 2
    assert snapshot(ours) == snapshot(theirs)
    assert git(ours, "ls-files", "-s", "-t") == git(theirs, "ls-files", "-s", "-t")
    assert git(ours, "status", "--porcelain") == b""


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def debug(self, message: str) -> None:
        pass

    def start(self, files: int, nbytes: int, workers: int) -> None:
        self.calls.append(("start", files, workers))

    def update(self, files: int, nbytes: int) -> None:
        self.calls.append(("update", files, nbytes))

    def finish(self) -> None:
        self.calls.append(("finish", 0, 0))


def test_gits_progress_reaches_the_reporter(tmp_path: Path) -> None:
    src = make_repo(tmp_path, MANY)
    ours = clone_no_checkout(src, tmp_path / "ours")
    ui = _Recorder()
    report = gitwriter.Reporting(ui, 3)
    gitwriter.write_tree(Git(ours), _tree(ours), workers=3, threshold=100, progress=report)
    report.finish()
    assert ui.calls[0] == ("start", len(MANY), 3)  # git's own total
    updates = [c for c in ui.calls if c[0] == "update"]
    assert updates[-1] == ("update", len(MANY), 0)  # files only: git does not count bytes
    assert [u[1] for u in updates] == sorted(u[1] for u in updates)
    assert ui.calls[-1][0] == "finish"


def test_git_s_lines_are_kept_as_it_printed_them_without_its_progress() -> None:
    # a switch without -q (gitwriter.switch(said=True)), in git's order across its two
    # streams, blank lines kept; progress updates end in "\r" and the last in ", done."
    err = (
        b"Updating files:   0% (0/5)\rUpdating files: 100% (5/5)\r"
        b"Updating files: 100% (5/5), done.\n"
        b"Note: switching to 'v1'.\n\nYou are in 'detached HEAD' state.\n"
        b"Updating files:  40% (2/5)\rwarning: over the bar\n"
        b"HEAD is now at 1234567 fix: 50% (1/2)\n"
    )
    tracking = b"Your branch is ahead of 'origin/main' by 1 commit.\n  (use ...)\n"
    assert gitwriter._said(b"M\ta\nD\tb\n" + tracking, err) == (
        ("out", "M\ta"),  # (git's order: the carried changes, stderr, then tracking)
        ("out", "D\tb"),
        ("err", "Note: switching to 'v1'."),
        ("err", ""),
        ("err", "You are in 'detached HEAD' state."),
        ("err", "warning: over the bar"),
        ("err", "HEAD is now at 1234567 fix: 50% (1/2)"),
        ("out", "Your branch is ahead of 'origin/main' by 1 commit."),
        ("out", "  (use ...)"),
    )
    assert gitwriter._said(b"", b"") == ()
