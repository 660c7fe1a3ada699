"""The command line end to end: exit codes, one-line errors, reports, export."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers import clone_no_checkout, git, make_repo, run_cli, snapshot


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
    import shutil
    import subprocess

    if shutil.which("git-pcheckout") is None:
        import pytest

        pytest.skip("git-pcheckout is not on PATH (package not installed)")
    src = make_repo(tmp_path, {b"f": b"x"})
    ours = clone_no_checkout(src, tmp_path / "ours")
    proc = subprocess.run(["git", "-C", str(ours), "pcheckout", "checkout", "-q"], capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert (ours / "f").read_bytes() == b"x"


def test_errors_are_one_line_with_exit_codes(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"x"})
    occupied = clone_no_checkout(src, tmp_path / "occupied")
    (occupied / "stray").write_bytes(b"mine")
    cases = [
        (["checkout", "-C", str(tmp_path / "missing")], 1, "no such directory"),
        (["checkout", "-C", str(tmp_path)], 1, "not a git repository"),
        (["checkout", "-C", str(src), "nope"], 1, "unknown revision 'nope'"),
        (["checkout", "-C", str(occupied)], 1, "not empty"),
        (["checkout", "--workers", "zero", "-C", str(src)], 2, "workers"),
        (["frobnicate"], 2, "invalid choice"),
        ([], 2, "a command is required"),
    ]
    for argv, code, text in cases:
        proc = run_cli(*argv)
        assert proc.returncode == code, (argv, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, (argv, proc.stderr)
        assert lines[0].startswith("pcheckout: error: ")
        assert text in lines[0], (argv, lines[0])
        assert "Traceback" not in proc.stderr


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
    import subprocess

    subprocess.run(["tar", "-x", "-C", str(ref)], input=archive, check=True)
    dest = tmp_path / "exported"
    proc = run_cli("export", "-C", str(bare), "v1", str(dest))
    assert proc.returncode == 0, proc.stderr
    assert snapshot(dest) == snapshot(ref)
    assert not (dest / ".git").exists()
    # a second export into the now-occupied destination is refused, nothing touched
    proc = run_cli("export", "-C", str(bare), "v1", str(dest))
    assert proc.returncode == 1 and "not empty" in proc.stderr


def test_export_applies_attributes_from_the_tree(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b".gitattributes": b"*.txt eol=crlf\n", b"t.txt": b"a\nb\n"})
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(bare))
    dest = tmp_path / "out"
    proc = run_cli("export", "-C", str(bare), "HEAD", str(dest))
    assert proc.returncode == 0, proc.stderr
    assert (dest / "t.txt").read_bytes() == b"a\r\nb\r\n"
