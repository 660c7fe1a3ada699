"""The command line end to end: exit codes, one-line errors, reports, export."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import clone_no_checkout, git, make_repo, run_cli, snapshot

from pcheckout.cli.main import main


def test_checkout_summary_and_quiet(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"a/b": b"1\n", b"c": b"22\n"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    proc = run_cli("checkout", "-C", str(ours), "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("wrote 2 files")
    assert "2 workers (user)" in proc.stdout
    ours2 = clone_no_checkout(src, tmp_path / "ours2")
    proc = run_cli("-q", "checkout", "-C", str(ours2))
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""


def test_git_subcommand_name(tmp_path: Path) -> None:
    if shutil.which("git-pcheckout") is None:
        pytest.skip("git-pcheckout is not on PATH (package not installed)")
    src = make_repo(tmp_path, {b"f": b"x"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    proc = subprocess.run(
        ["git", "-C", str(ours), "pcheckout", "checkout", "-q"], capture_output=True
    )
    assert proc.returncode == 0, proc.stderr
    assert (ours / "f").read_bytes() == b"x"


ERROR_CASES = [
    ("missing-directory", ["checkout", "-C", "{tmp}/missing"], 128, "No such file or directory"),
    ("not-a-repository", ["checkout", "-C", "{tmp}"], 128, "not a git repository"),
    ("unknown-revision", ["checkout", "-C", "{src}", "nope"], 1, "pathspec 'nope' did not"),
    ("occupied", ["checkout", "-C", "{occupied}"], 1, "untracked working tree files"),
    ("bad-workers", ["checkout", "--workers", "zero", "-C", "{src}"], 2, "workers"),
    ("unknown-command", ["frobnicate"], 2, "'frobnicate' is not a pcheckout command"),
    ("mistyped-command", ["chekout"], 2, "did you mean 'checkout'?"),
    ("mistyped-option", ["checkout", "--dryrun"], 2, "unknown option '--dryrun'; did you mean"),
    ("no-command", [], 2, "a command is required"),
]


def _error_argv(tmp_path: Path, argv: list[str]) -> list[str]:
    src = make_repo(tmp_path, {b"f": b"x"})
    occupied = clone_no_checkout(src, tmp_path / "occupied")
    (occupied / "f").write_bytes(b"mine")  # untracked, where the tree has a file
    return [a.format(tmp=tmp_path, src=src, occupied=occupied) for a in argv]


@pytest.mark.parametrize(
    ("argv", "code", "text"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_errors_are_one_line_with_exit_codes(
    tmp_path: Path, argv: list[str], code: int, text: str
) -> None:
    proc = run_cli(*_error_argv(tmp_path, argv))
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pcheckout: error: ")
    assert text in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("argv", "code", "text"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_main_in_process_returns_the_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, text: str
) -> None:
    assert main(_error_argv(tmp_path, argv)) == code
    err = capsys.readouterr().err
    assert err.startswith("pcheckout: error: ") and text in err and err.count("\n") == 1


def test_main_in_process_checks_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = make_repo(tmp_path, {b"a/b": b"1\n"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    assert main(["checkout", "-C", str(ours), "--workers", "1"]) == 0
    assert capsys.readouterr().out.startswith("wrote 1 file ")
    assert (ours / "a" / "b").read_bytes() == b"1\n"


def test_debug_prints_git_commands_and_traceback(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"x"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    proc = run_cli("checkout", "--debug", "-C", str(ours))
    assert proc.returncode == 0
    assert "[debug] running: git" in proc.stderr and "ls-tree" in proc.stderr
    proc = run_cli("checkout", "--debug", "-C", str(ours), "nope")
    assert proc.returncode == 1 and "Traceback" in proc.stderr


def test_dry_run_json(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"a": b"1", b"d/b": b"22"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    proc = run_cli("checkout", "-C", str(ours), "--dry-run", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["files"] == 2 and report["bytes"] == 3
    assert report["source"] in ("user", "tuned", "policy")
    assert isinstance(report["workers"], int) and report["reason"]
    assert report["filesystem"]["kind"]
    assert sorted(os.listdir(ours)) == [".git"]
    proc = run_cli("checkout", "-C", str(ours), "--dry-run")
    assert proc.returncode == 0 and "would write 2 entries" in proc.stdout
    proc = run_cli("checkout", "-C", str(ours), "--dry-run", "--workers", "7")
    assert "7 (user)" in proc.stdout


def test_export_like_archive(tmp_path: Path) -> None:
    files = {b"a/b": b"1\n", b"x.sh": ("x", b"#!/bin/sh\n"), b"l": ("l", b"a/b"), b"n\nl": b"odd"}
    src = make_repo(tmp_path, files)
    git(src, "tag", "v1")
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(bare))
    ref = tmp_path / "ref"
    ref.mkdir()
    archive = git(bare, "archive", "v1")
    subprocess.run(["tar", "-x", "-C", str(ref)], input=archive, check=True)
    dest = tmp_path / "exported"
    proc = run_cli("export", "-C", str(bare), "v1", str(dest))
    assert proc.returncode == 0, proc.stderr
    assert snapshot(dest) == snapshot(ref)
    assert not (dest / ".git").exists()
    # a second export into the now-occupied destination is refused, nothing touched
    proc = run_cli("export", "-C", str(bare), "v1", str(dest))
    assert proc.returncode == 1 and "already holds what the export writes: a/b, l, " in proc.stderr
    assert snapshot(dest) == snapshot(ref)


def test_export_applies_attributes_from_the_tree(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b".gitattributes": b"*.txt eol=crlf\n", b"t.txt": b"a\nb\n"})
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(bare))
    dest = tmp_path / "out"
    proc = run_cli("export", "-C", str(bare), "HEAD", str(dest))
    assert proc.returncode == 0, proc.stderr
    assert (dest / "t.txt").read_bytes() == b"a\r\nb\r\n"


def test_the_command_runs_without_the_cyclic_garbage_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    import pcheckout.cli.main as cli_main
    from pcheckout.cli import start

    seen: list[bool] = []
    monkeypatch.setattr(cli_main, "entrypoint", lambda: seen.append(gc.isenabled()))
    try:
        start.entrypoint()
    finally:
        gc.enable()
    assert seen == [False]
