"""The command line as a git user expects it: -C in git's position, git's own words for where
HEAD went, "did you mean", plurals, errors as JSON, whole --debug lines, no wrapping on a pipe."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import clone_no_checkout, git, make_repo, run_cli

from pcheckout.cli.console import ConsoleReporter
from pcheckout.cli.main import main

COMMIT = ("-c", "user.name=T", "-c", "user.email=t@example.org", "commit", "-q", "--allow-empty")


def _history(tmp_path: Path) -> Path:
    """main (two commits), a branch 'other' at the first, a tag v1 there."""
    src = make_repo(tmp_path, {b"a": b"1\n", b"d/b": b"2\n"})
    (src / "a").write_bytes(b"one\n")
    git(src, "add", "a")
    git(src, *COMMIT, "-m", "second one")
    git(src, "branch", "other", "HEAD~1")
    git(src, "tag", "v1", "HEAD~1")
    return src


def _twins(tmp_path: Path) -> tuple[Path, Path]:
    src = _history(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = tmp_path / "theirs"
    git(tmp_path, "clone", "-q", str(src), str(theirs))
    assert run_cli("-q", "-C", str(ours), "checkout").returncode == 0
    return ours, theirs


@pytest.mark.parametrize("writer", ["pcheckout", "git"])
def test_head_lines_are_gits_own(tmp_path: Path, writer: str) -> None:
    """Each step, by both writers: stderr is git checkout's, stdout git's after our summary."""
    ours, theirs = _twins(tmp_path)
    env = {"PCHECKOUT_WRITER": writer}
    steps = ["HEAD", "v1", "main~1", "main", "main", "v1", "other", "main", "@{-1}"]
    for k, rev in enumerate(steps):
        if rev == "@{-1}":  # leave commits behind on a detached HEAD: git's warning
            for repo in (ours, theirs):
                git(repo, "checkout", "-q", "v1")
                git(repo, *COMMIT, "-m", "lost 1")
                git(repo, *COMMIT, "-m", "lost 2")
            rev = "main"
        proc = run_cli("checkout", "-C", str(ours), rev, env=env)
        assert proc.returncode == 0, proc.stderr
        want = subprocess.run(
            ["git", "-C", str(theirs), "checkout", rev], capture_output=True, text=True
        )
        assert proc.stderr == want.stderr, f"step {k} ({rev})"
        summary, _, rest = proc.stdout.partition("\n")
        assert summary.startswith(("wrote ", "switched ")), proc.stdout
        assert rest == want.stdout, f"step {k} ({rev})"
        report = json.loads(run_cli("checkout", "-C", str(ours), "--json").stdout)
        head = git(ours, "rev-parse", "HEAD").decode().strip()
        assert report["commit"] == head


def test_new_branch_from_a_remote_and_advice_off(tmp_path: Path) -> None:
    ours, theirs = _twins(tmp_path)
    for repo in (ours, theirs):
        git(repo, "config", "advice.detachedHead", "false")
        git(repo, "config", "advice.statusHints", "false")
    for rev in ("other", "v1", "main"):
        proc = run_cli("checkout", "-C", str(ours), rev)
        want = subprocess.run(
            ["git", "-C", str(theirs), "checkout", rev], capture_output=True, text=True
        )
        assert proc.returncode == 0 and proc.stderr == want.stderr, rev
        assert proc.stdout.partition("\n")[2] == want.stdout, rev


def test_json_names_commit_branch_and_previous_head(tmp_path: Path) -> None:
    ours, _ = _twins(tmp_path)
    main_id = git(ours, "rev-parse", "main").decode().strip()
    v1 = git(ours, "rev-parse", "v1^{commit}").decode().strip()
    report = json.loads(run_cli("checkout", "-C", str(ours), "v1", "--json").stdout)
    assert (report["commit"], report["branch"], report["detached"]) == (v1, None, True)
    assert (report["previous_commit"], report["previous_branch"]) == (main_id, "main")
    report = json.loads(run_cli("checkout", "-C", str(ours), "main", "--json").stdout)
    assert (report["commit"], report["branch"], report["detached"]) == (main_id, "main", False)
    assert (report["previous_commit"], report["previous_branch"]) == (v1, None)
    dry = json.loads(run_cli("checkout", "-C", str(ours), "v1", "-n", "--json").stdout)
    assert dry["commit"] is None and dry["branch"] is None


def test_global_C_in_both_positions(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"x\n"})
    for k, argv in enumerate(
        (
            ["-C", "{w}", "checkout"],
            ["checkout", "-C", "{w}"],
            ["-C", "{parent}", "checkout", "-C", "{name}"],  # relative to the first, as git
            ["-C", "{parent}", "-C", "{name}", "checkout"],  # several add up, as git
        )
    ):
        w = clone_no_checkout(src, tmp_path / f"w{k}")
        words = [a.format(w=w, parent=tmp_path, name=w.name) for a in argv]
        proc = run_cli(*words, cwd=src)
        assert proc.returncode == 0, (words, proc.stderr)
        assert (w / "f").read_bytes() == b"x\n", words
    # relative paths of other commands follow -C too, as in git
    detected = json.loads(run_cli("-C", str(tmp_path), "detect", "--json", "w0").stdout)
    assert detected["path"] == str(tmp_path / "w0")
    proc = run_cli("-C", str(tmp_path / "missing"), "checkout")
    assert proc.returncode == 128  # git -C's
    missing = tmp_path / "missing"
    assert (
        proc.stderr
        == f"pcheckout: error: cannot change to '{missing}': No such file or directory\n"
    )


def test_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chekout"]) == 2
    assert "'chekout' is not a pcheckout command; did you mean 'checkout'?" in (
        capsys.readouterr().err
    )
    assert main(["checkout", "--dryrun"]) == 2
    err = capsys.readouterr().err
    assert "checkout: unknown option '--dryrun'; did you mean '--dry-run'?" in err
    assert main(["tune", "--max-wrkers", "3"]) == 2
    assert "did you mean '--max-workers'?" in capsys.readouterr().err
    assert main(["xyzzy"]) == 2
    assert "did you mean" not in capsys.readouterr().err


def test_errors_as_json_on_stdout(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"x"})
    for argv, code in (
        (["checkout", "-C", str(src), "nope", "--json"], 1),
        (["checkout", "--json", "--bogus"], 2),
        (["detect", "--json", "--mountinfo", str(tmp_path / "none")], 2),
    ):
        proc = run_cli(*argv)
        assert proc.returncode == code
        assert json.loads(proc.stdout) == {"error": proc.stderr[18:-1], "exit_code": code}
        assert proc.stderr.startswith("pcheckout: error: ") and proc.stderr.count("\n") == 1


def test_plurals_and_the_clamp_said_once(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"x"})
    w = clone_no_checkout(src, tmp_path / "w")
    proc = run_cli("checkout", "-C", str(w), "-j", "100000")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("wrote 1 file (1 B) in ") and "with 64 workers" in proc.stdout
    assert proc.stderr.count("-j 100000") == 1
    assert "at most 64 workers; using 64" in proc.stderr
    (src / "g").write_bytes(b"y")
    git(src, "add", "g")
    git(src, *COMMIT, "-m", "two")
    git(w, "fetch", "-q")
    proc = run_cli("checkout", "-C", str(w), "-j", "1", "origin/main")
    assert "switched 1 file " in proc.stdout and "with 1 worker " in proc.stdout


def test_debug_lines_are_whole_from_any_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    ui = ConsoleReporter(quiet=False, debug=True)
    words = ["running: git " + "x" * n for n in range(200)]

    def say(k: int) -> None:
        for w in words:
            ui.debug(f"{k} {w}")

    threads = [threading.Thread(target=say, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = out.getvalue().splitlines()
    assert len(lines) == 8 * len(words)
    assert sorted(lines) == sorted(f"[debug] {k} {w}" for k in range(8) for w in words)


def test_piped_output_is_not_wrapped(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f": b"x"})
    w = clone_no_checkout(src, tmp_path / "w")
    env = {"COLUMNS": "80", "PCHECKOUT_WRITER": "auto"}  # the policy's reason: a long line
    proc = run_cli("checkout", "-C", str(w), "--dry-run", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    writer = [line for line in lines if line.startswith("writer: ")]
    assert len(writer) == 1 and len(writer[0]) > 80  # one line, however long
    assert all(line == line.rstrip() for line in lines)


def test_gits_writer_relays_gits_own_errors(tmp_path: Path) -> None:
    """git's checkout finishes past a blob it cannot read and exits 0, saying so on stderr;
    through git's writer pcheckout says the same lines and exits as git did."""
    src = _history(tmp_path)
    git(src, "checkout", "-q", "-b", "two")
    (src / "g").write_bytes(b"new\n")
    git(src, "add", "g")
    git(src, *COMMIT, "-m", "g")
    git(src, "checkout", "-q", "main")
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = tmp_path / "theirs"
    git(tmp_path, "clone", "-q", str(src), str(theirs))
    assert run_cli("-q", "-C", str(ours), "checkout").returncode == 0
    blob = git(src, "rev-parse", "two:g").decode().strip()
    for repo in (ours, theirs):  # a damaged repository: the blob is gone
        git(repo, "branch", "-q", "two", "origin/two")
        (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    got = subprocess.run(["git", "-C", str(theirs), "checkout", "two"], capture_output=True)
    proc = run_cli("checkout", "-C", str(ours), "two", env={"PCHECKOUT_WRITER": "git"})
    assert b"error: unable to read sha1 file of g (" in got.stderr
    assert got.returncode == proc.returncode == 0
    assert proc.stderr.encode() == got.stderr
    assert git(ours, "status", "--short") == git(theirs, "status", "--short") == b" D g\n"
