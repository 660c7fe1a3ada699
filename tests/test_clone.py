"""pcheckout clone against git clone from a local file:// server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from clonehelp import (
    assert_clone_same,
    assert_git_dir_same,
    git_clone,
    make_server,
    pcheckout_clone,
    url,
)
from helpers import git, run_cli, snapshot

from pcheckout.clone import guess_dir_name, parse_args
from pcheckout.clone.stage import ENV as STAGE


@pytest.fixture
def server(tmp_path: Path) -> Path:
    return make_server(tmp_path)


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["--branch", "v1", "--depth", "1"],
        ["--branch=release", "--single-branch"],
        ["--filter=blob:none"],
        ["--origin", "upstream"],
        ["-c", "foo.bar=baz", "--config=core.abbrev=9", "-c", "foo.bar=again"],
        ["--no-tags", "-b", "release"],
        ["--no-checkout"],
        ["-n", "--depth=2"],
        ["--single-branch", "--branch", "v2"],
        ["--shallow-since=2019-06-01", "--no-single-branch"],
        ["--reference", "{server}", "--dissociate"],
    ],
    ids=[
        "plain",
        "tag-depth1",
        "branch-single",
        "filter-blob-none",
        "origin",
        "config",
        "no-tags",
        "no-checkout",
        "n-depth2",
        "single-branch-tag",
        "shallow-since",
        "reference-dissociate",
    ],
)
def test_clone_equals_git_clone(tmp_path: Path, server: Path, options: list[str]) -> None:
    options = [o.replace("{server}", str(server)) for o in options]
    git_clone(tmp_path, *options, url(server), "theirs")
    pcheckout_clone(tmp_path, *options, url(server), "ours")
    assert_clone_same(tmp_path / "ours", tmp_path / "theirs")
    # the git dir written on scratch space and copied (clone/stage.py) is the same
    pcheckout_clone(tmp_path, *options, url(server), "staged", env={STAGE: "always"})
    assert_clone_same(tmp_path / "staged", tmp_path / "theirs")


@pytest.mark.parametrize("option", ["--bare", "--mirror"])
def test_bare_and_mirror_write_no_files(tmp_path: Path, server: Path, option: str) -> None:
    git_clone(tmp_path, option, url(server), "theirs.git")
    pcheckout_clone(tmp_path, option, url(server), "ours.git")
    assert_clone_same(tmp_path / "ours.git", tmp_path / "theirs.git", bare=True)


def test_directory_defaults_as_git_clone(tmp_path: Path, server: Path) -> None:
    for kind, extra in (("plain", []), ("bare", ["--bare"])):
        (tmp_path / f"g-{kind}").mkdir()
        (tmp_path / f"p-{kind}").mkdir()
        git_clone(tmp_path / f"g-{kind}", *extra, url(server) + "/")
        pcheckout_clone(tmp_path / f"p-{kind}", *extra, url(server) + "/")
        names = sorted(p.name for p in (tmp_path / f"g-{kind}").iterdir())
        assert names == ["server.git" if extra else "server"]
        assert sorted(p.name for p in (tmp_path / f"p-{kind}").iterdir()) == names
        assert_clone_same(
            tmp_path / f"p-{kind}" / names[0], tmp_path / f"g-{kind}" / names[0], bare=bool(extra)
        )


def test_reflog_is_git_clones_only(tmp_path: Path, server: Path) -> None:
    pcheckout_clone(tmp_path, url(server), "ours")
    log = (tmp_path / "ours/.git/logs/HEAD").read_bytes().splitlines()
    assert len(log) == 1 and log[0].endswith(b"\tclone: from " + url(server).encode())


def test_empty_repository(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "--bare", "empty.git")
    proc = run_cli("clone", url(tmp_path / "empty.git"), "ours", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "You appear to have cloned an empty repository" in proc.stderr
    assert "empty repository: no checkout" in proc.stdout
    git_clone(tmp_path, url(tmp_path / "empty.git"), "theirs")
    assert_clone_same(tmp_path / "ours", tmp_path / "theirs")


def test_failing_url_passes_git_through(tmp_path: Path) -> None:
    proc = run_cli("clone", url(tmp_path / "missing.git"), "ours", cwd=tmp_path)
    assert proc.returncode == 128
    assert "fatal: '" in proc.stderr and "does not appear to be a git repository" in proc.stderr
    assert "pcheckout: error" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "ours").exists()  # git removed its partial clone


def test_occupied_destination_refused_before_fetching(tmp_path: Path, server: Path) -> None:
    (tmp_path / "ours").mkdir()
    (tmp_path / "ours/mine").write_bytes(b"keep")
    # an unreachable server proves nothing was fetched: the refusal comes first
    proc = run_cli("clone", url(tmp_path / "missing.git"), "ours", cwd=tmp_path)
    assert proc.returncode == 128
    assert (
        "fatal: destination path 'ours' already exists and is not an empty directory."
        in proc.stderr
    )
    assert sorted(p.name for p in (tmp_path / "ours").iterdir()) == ["mine"]
    # an existing empty directory is fine, as in git
    (tmp_path / "empty").mkdir()
    pcheckout_clone(tmp_path, url(server), "empty")
    assert (tmp_path / "empty/top").read_bytes() == b"t\n"


def test_json_report(tmp_path: Path, server: Path) -> None:
    proc = run_cli("clone", "--json", "--workers", "3", url(server), "ours", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["mode"] == "clone"
    assert report["directory"] == str(tmp_path / "ours")
    assert report["url"] == url(server) and report["bare"] is False
    assert report["skipped"] is None and report["submodules"] == []
    assert report["checkout"]["files"] == 9 and report["checkout"]["workers"] == 3
    assert report["checkout"]["source"] == "user"
    assert report["seconds"] >= report["clone_seconds"] >= 0
    proc = run_cli("clone", "--json", "--bare", url(server), "b.git", cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert report["checkout"] is None and report["skipped"] == "bare"


def test_jobs_is_git_clones(tmp_path: Path, server: Path) -> None:
    proc = run_cli("clone", "-j", "4", url(server), "ours", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "-j/--jobs is git clone's" in proc.stderr
    assert "(policy)" in proc.stdout  # not taken as 4 checkout workers


def test_help() -> None:
    proc = run_cli("clone", "--help")
    assert proc.returncode == 0
    assert "--workers N|auto" in proc.stdout and "-j, --jobs N" in proc.stdout


def test_usage_errors() -> None:
    for argv, text in (
        (["clone"], "you must specify a repository"),
        (["clone", "--depth"], "requires a value"),
        (["clone", "--workers", "zero", "u"], "workers"),
        (["clone", "a", "b", "c"], "too many arguments"),
    ):
        proc = run_cli(*argv)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert text in proc.stderr, (argv, proc.stderr)


def test_parse_args_reads_git_clone_options() -> None:
    a = parse_args(
        [
            "--depth",
            "1",
            "-bmain",
            "URL",
            "-qnj4",
            "--recurse-submodules",
            "D",
            "--workers=8",
            "--no-adapt",
            "-c",
            "x.y=z",
            "--dep=3",
            "--sing",
        ]
    )
    assert (a.url, a.directory, a.workers, a.adapt) == ("URL", "D", "8", False)
    assert a.git_options == [
        "--depth",
        "1",
        "-bmain",
        "-q",
        "-n",
        "-j4",
        "--recurse-submodules",
        "-c",
        "x.y=z",
        "--dep=3",
        "--sing",
    ]
    assert a.no_checkout and a.quiet and a.jobs == "4" and a.recurse_submodules == ["."]
    assert a.single_branch is True
    a = parse_args(["-n", "--checkout", "--bare", "--no-bare", "--", "-weird-url"])
    assert (a.url, a.no_checkout, a.bare) == ("-weird-url", False, False)
    a = parse_args(["--recurse-submodules=libs", "--recursive=x", "u"])
    assert a.recurse_submodules == ["libs", "x"]
    a = parse_args(["--branch", "--bare", "u"])  # a value may look like an option
    assert a.git_options == ["--branch", "--bare"] and not a.bare


@pytest.mark.parametrize(
    ("repo", "bare", "expected"),
    [
        # from git's t/t5603-clone-dirname.sh
        ("ssh://host/foo", False, "foo"),
        ("ssh://host/foo.git", False, "foo"),
        ("ssh://host/foo/.git", False, "foo"),
        ("ssh://host/foo.git/", False, "foo"),
        ("host:foo", False, "foo"),
        ("host:foo.git", False, "foo"),
        ("host:foo/.git", False, "foo"),
        ("ssh://host/", False, "host"),
        ("ssh://host:1234/", False, "host"),
        ("ssh://user@host/", False, "host"),
        ("ssh://user:passw@rd@host:1234/", False, "host"),
        ("ssh://host/foo", True, "foo.git"),
        ("ssh://host/foo/.git", True, "foo.git"),
        ("host:/", False, "host"),
        ("/path/to/repo.git", False, "repo"),
        ("http://example.com/user/bar.baz", False, "bar.baz"),
        ("ssh://host/foo bar  ", False, "foo bar"),
    ],
)
def test_guess_dir_name_as_git(repo: str, bare: bool, expected: str) -> None:
    assert guess_dir_name(repo, is_bundle=False, is_bare=bare) == expected


def test_recurse_submodules(tmp_path: Path) -> None:
    from clonehelp import ALLOW_FILE, make_super_server

    server = make_super_server(tmp_path)
    git_clone(tmp_path, "--recurse-submodules", url(server), "theirs", env=ALLOW_FILE)
    proc = run_cli(
        "clone",
        "--json",
        "--recurse-submodules",
        "-j",
        "2",
        url(server),
        "ours",
        cwd=tmp_path,
        env=ALLOW_FILE,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Submodule path 'two': checked out '" in proc.stderr
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    assert_clone_same(ours, theirs)
    assert git(ours, "submodule", "status") == git(theirs, "submodule", "status")
    for sub in ("libs/one", "two"):
        assert_clone_same(ours / sub, theirs / sub)
    report = json.loads(proc.stdout)
    assert sorted(s["path"] for s in report["submodules"]) == ["libs/one", "two"]
    files = {s["path"]: s["checkout"]["files"] for s in report["submodules"]}
    assert files == {"libs/one": 9, "two": 8}  # "two" is recorded at its second commit


def test_recurse_submodules_shallow(tmp_path: Path) -> None:
    from clonehelp import ALLOW_FILE, make_super_server

    server = make_super_server(tmp_path)
    opts = ["--recurse-submodules", "--shallow-submodules", "--depth", "1"]
    git_clone(tmp_path, *opts, url(server), "theirs", env=ALLOW_FILE)
    pcheckout_clone(tmp_path, *opts, url(server), "ours", env=ALLOW_FILE)
    for sub in ("", "libs/one", "two"):
        assert_clone_same(tmp_path / "ours" / sub, tmp_path / "theirs" / sub)


def test_sparse(tmp_path: Path, server: Path) -> None:
    for options in (["--sparse"], ["--sparse", "--filter=blob:none", "--branch", "release"]):
        tag = "-".join(options).replace("=", "").replace(":", "")
        git_clone(tmp_path, *options, url(server), f"theirs{tag}")
        pcheckout_clone(tmp_path, *options, url(server), f"ours{tag}")
        assert_clone_same(tmp_path / f"ours{tag}", tmp_path / f"theirs{tag}")


@pytest.mark.parametrize(("signum", "staging"), [(2, "never"), (15, "never"), (2, "always")])
def test_interrupted_clone_phase_leaves_what_git_leaves(
    tmp_path: Path, server: Path, signum: int, staging: str
) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    # an upload-pack that waits: the signal arrives while git clone is fetching
    slow = tmp_path / "slow-upload-pack"
    slow.write_text('#!/bin/sh\nsleep 3\nexec git-upload-pack "$@"\n')
    slow.chmod(0o755)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pcheckout", "clone", "-u", str(slow), url(server), "ours"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, STAGE: staging},
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "ours").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
    else:
        proc.send_signal(signal.SIGTERM)  # pcheckout alone: it passes it on to git
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum, err
    assert b"git clone removed the partial clone" in err
    assert not (tmp_path / "ours").exists()


def test_shared_clone_onto_a_latency_bound_mount_is_staged(tmp_path: Path, server: Path) -> None:
    from clonehelp import latency_mount

    with latency_mount(tmp_path) as mnt:
        git_clone(mnt, "--shared", str(server), "theirs")
        proc = run_cli("clone", "--json", "--shared", str(server), "ours", cwd=mnt)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["staged"] is True
        assert_clone_same(mnt / "ours", mnt / "theirs")
        # a clone that brings a pack is written in place
        proc = run_cli("clone", "--json", url(server), "packed", cwd=mnt)
        assert json.loads(proc.stdout)["staged"] is False


def test_staged_clone_failure_leaves_nothing(tmp_path: Path) -> None:
    proc = run_cli(
        "clone", url(tmp_path / "missing.git"), "ours", cwd=tmp_path, env={STAGE: "always"}
    )
    assert proc.returncode == 128
    assert "does not appear to be a git repository" in proc.stderr
    assert not (tmp_path / "ours").exists()


def test_post_checkout_hook_runs_as_in_git_clone(tmp_path: Path, server: Path) -> None:
    template = tmp_path / "template"
    (template / "hooks").mkdir(parents=True)
    hook = template / "hooks" / "post-checkout"
    hook.write_text('#!/bin/sh\necho "$@" > .git/post-checkout-args\n')
    hook.chmod(0o755)
    for options in ([], ["--no-checkout"]):
        tag = "".join(options)
        git_clone(tmp_path, f"--template={template}", *options, url(server), f"theirs{tag}")
        pcheckout_clone(tmp_path, f"--template={template}", *options, url(server), f"ours{tag}")
        assert_clone_same(tmp_path / f"ours{tag}", tmp_path / f"theirs{tag}")
    args = (tmp_path / "ours/.git/post-checkout-args").read_text().split()
    assert args[0] == "0" * 40 and args[2] == "1"
    assert not (tmp_path / "ours--no-checkout/.git/post-checkout-args").exists()


def test_separate_git_dir(tmp_path: Path, server: Path) -> None:
    git_clone(tmp_path, "--separate-git-dir", str(tmp_path / "theirs.git"), url(server), "theirs")
    pcheckout_clone(tmp_path, f"--separate-git-dir={tmp_path / 'ours.git'}", url(server), "ours")
    assert (tmp_path / "ours/.git").read_text() == f"gitdir: {tmp_path / 'ours.git'}\n"
    assert_git_dir_same(tmp_path / "ours.git", tmp_path / "theirs.git")
    assert snapshot(tmp_path / "ours") == snapshot(tmp_path / "theirs")  # .git aside
    for args in (("ls-files", "-s", "-z"), ("rev-parse", "HEAD"), ("status", "--porcelain")):
        assert git(tmp_path / "ours", *args) == git(tmp_path / "theirs", *args)
    assert git(tmp_path / "ours", "status", "--porcelain", "--ignored") == b""


def test_recurse_submodules_refuses_a_file_url_as_git_does(tmp_path: Path) -> None:
    """git submodule runs the submodules' clones with GIT_PROTOCOL_FROM_USER=0: their URLs
    are not the user's, and protocol.file.allow's default ("user", git 2.38.1) refuses
    file:// for them."""
    from clonehelp import make_super_server

    server = make_super_server(tmp_path)
    theirs = subprocess.run(
        ["git", "clone", "-q", "--recurse-submodules", url(server), "theirs"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert theirs.returncode == 1 and "transport 'file' not allowed" in theirs.stderr
    proc = run_cli("clone", "-q", "--recurse-submodules", url(server), "ours", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "cloning submodule" in proc.stderr and "Traceback" not in proc.stderr
    for sub in ("libs/one", "two"):
        assert not any((tmp_path / "ours" / sub).iterdir())
        assert not any((tmp_path / "theirs" / sub).iterdir())
