"""submodule.recurse: a checkout moves, populates and removes submodules exactly as git's
own checkout does, with either writer; without it, git leaves submodules alone and so
does pcheckout.  Every case is run by git and by pcheckout on copies of one prepared
repository (file:// submodule remotes in the test's directory) and compared: the work
trees (submodules' too), their .git files, the submodules' HEADs and core.worktree,
``git status`` and ``git submodule status --recursive``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import GIT_ENV, git, make_repo

ALLOW = ("-c", "protocol.file.allow=always")
WRITERS = ["pcheckout", "git"]


def _commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD").decode().strip()


def _edit(repo: Path, name: str, text: str, message: str) -> str:
    (repo / name).write_text(text)
    return _commit(repo, message)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``super`` with three commits (tags one, two, three):

    * one: submodules a (at A1) and b;
    * two: a moved to A2, which adds a nested submodule ``deep``; b removed; c added;
    * three: a moved to A3 (``deep`` moved inside it); b back;
    * four (from two): the submodule c replaced by a file.

    ``work`` is a clone at two with every submodule initialized and cloned (at one, then
    switched by git itself, then ``submodule update --init --recursive``)."""
    top = tmp_path_factory.mktemp("subrec")
    leaf = make_repo(top, {b"l": b"l1\n"}, name="leaf")
    a = make_repo(top, {b"f": b"a1\n"}, name="a")
    b = make_repo(top, {b"g": b"b1\n"}, name="b")
    c = make_repo(top, {b"h": b"c1\n"}, name="c")
    sup = make_repo(top, {b"s": b"s\n"}, name="super")
    git(sup, *ALLOW, "submodule", "-q", "add", f"file://{a}", "a")
    git(sup, *ALLOW, "submodule", "-q", "add", f"file://{b}", "b")
    _commit(sup, "one")
    git(sup, "tag", "one")
    git(a, *ALLOW, "submodule", "-q", "add", f"file://{leaf}", "deep")
    _edit(a, "f", "a2\n", "A2")
    git(sup / "a", "pull", "-q", "origin", "main")
    git(sup, "rm", "-q", "b")
    git(sup, *ALLOW, "submodule", "-q", "add", f"file://{c}", "c")
    _commit(sup, "two")
    git(sup, "tag", "two")
    _edit(leaf, "l", "l2\n", "L2")
    git(a / "deep", "pull", "-q", "origin", "main")
    _edit(a, "f", "a3\n", "A3")
    git(sup / "a", "pull", "-q", "--recurse-submodules", "origin", "main")
    git(sup, *ALLOW, "submodule", "-q", "add", "--force", f"file://{b}", "b")
    _commit(sup, "three")
    git(sup, "tag", "three")
    git(sup, "checkout", "-q", "-b", "file", "two")
    git(sup, "rm", "-q", "c")
    shutil.rmtree(sup / "c", ignore_errors=True)
    (sup / "c").write_text("a file\n")
    git(sup, "add", "c")  # (only c: b's directory, left by the checkout, is no gitlink here)
    git(sup, "commit", "-q", "-m", "four")
    git(sup, "tag", "four")
    git(sup, "checkout", "-q", "main")
    work = top / "work"
    git(top, "clone", "-q", str(sup), str(work))
    git(work, "checkout", "-q", "one")
    git(work, *ALLOW, "submodule", "-q", "update", "--init", "--recursive")
    git(work, "-c", "submodule.recurse=true", "checkout", "-q", "two")
    git(work, *ALLOW, "submodule", "-q", "update", "--init", "--recursive")
    assert git(work, "status", "--porcelain", "--ignore-submodules=none") == b""
    return work


def _copy(world: Path, tmp_path: Path, name: str, recurse: bool = True) -> Path:
    dest = tmp_path / name
    shutil.copytree(world, dest, symlinks=True)
    git(dest, "config", "submodule.recurse", "true" if recurse else "false")
    # the copy's stat data differs from the indexes': refreshed, as a real work tree's is
    git(dest, "update-index", "-q", "--refresh", check=False)
    refresh = "git update-index -q --refresh || :"
    git(dest, "submodule", "-q", "foreach", "--recursive", refresh)
    return dest


def _pcheckout(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(
        [sys.executable, "-m", "pcheckout", "checkout", "-C", str(repo), "-q", *args],
        capture_output=True,
        text=True,
        env=env,
    )


def _git_checkout(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), "checkout", "-q", *args], capture_output=True, text=True
    )


def _state(repo: Path) -> dict[str, object]:
    """Everything a user sees of a superproject and its submodules."""
    files = []
    gitfiles = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        rel = os.path.relpath(dirpath, repo)
        if ".git" in dirnames:
            dirnames.remove(".git")  # a git dir (the superproject's, or a submodule's own)
        for name in sorted(dirnames + filenames):
            path = os.path.normpath(os.path.join(rel, name))
            files.append(path)
            if name == ".git":
                gitfiles[path] = Path(dirpath, name).read_text()
            elif os.path.isfile(os.path.join(dirpath, name)):
                files.append(Path(dirpath, name).read_text())
    subs = {}
    for line in git(repo, "submodule", "status", "--recursive").decode().splitlines():
        path = line[1:].split()[1]
        if line[0] != "-":
            head = git(repo / path, "rev-parse", "HEAD").decode().strip()
            branch = git(repo / path, "symbolic-ref", "-q", "HEAD", check=False).decode()
            subs[path] = (head, branch, git(repo / path, "ls-files", "-s").decode())
    modules = repo / ".git" / "modules"
    worktrees = {
        str(m.relative_to(modules)): git(m, "config", "--get", "core.worktree", check=False)
        for m in sorted(modules.rglob("config"))
        for m in [m.parent]
    }
    return {
        "files": sorted(files),
        "gitfiles": gitfiles,
        "status": git(repo, "status", "--porcelain", "--ignore-submodules=none").decode(),
        "submodules": git(repo, "submodule", "status", "--recursive").decode(),
        "heads": subs,
        "core.worktree": worktrees,
        "index": git(repo, "ls-files", "-s").decode(),
        "HEAD": git(repo, "rev-parse", "HEAD").decode(),
    }


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    ("start", "rev"), [("two", "one"), ("one", "two"), ("two", "three"), ("three", "one")]
)
def test_switch_as_git(world: Path, tmp_path: Path, writer: str, start: str, rev: str) -> None:
    by_git, by_us = _copy(world, tmp_path, "git"), _copy(world, tmp_path, "us")
    for repo in (by_git, by_us):
        if start != "two":
            assert _git_checkout(repo, start).returncode == 0
    assert _git_checkout(by_git, rev).returncode == 0
    proc = _pcheckout(by_us, "--writer", writer, rev)
    assert proc.returncode == 0, proc.stderr
    assert _state(by_us) == _state(by_git)


@pytest.mark.parametrize("writer", WRITERS)
def test_without_submodule_recurse_submodules_are_left_alone(
    world: Path, tmp_path: Path, writer: str
) -> None:
    by_git = _copy(world, tmp_path, "git", recurse=False)
    by_us = _copy(world, tmp_path, "us", recurse=False)
    said = _git_checkout(by_git, "one")
    assert said.returncode == 0
    proc = _pcheckout(by_us, "--writer", writer, "one")
    assert proc.returncode == 0, proc.stderr
    assert _state(by_us) == _state(by_git)
    assert (by_us / "c" / "h").exists()  # left where it was, as git leaves it
    assert said.stderr == "warning: unable to rmdir 'c': Directory not empty\n"
    assert proc.stderr == said.stderr


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("a/f", "Entry 'a/f' not uptodate. Cannot merge. Submodule 'a' could not be updated."),
        ("c/h", "Entry 'c/h' not uptodate. Cannot merge. Submodule 'c' could not be updated."),
        ("a/f staged", "submodule 'a' has dirty index"),
    ],
)
def test_local_changes_in_a_submodule_refuse_as_git(
    world: Path, tmp_path: Path, writer: str, change: str, said: str
) -> None:
    by_git, by_us = _copy(world, tmp_path, "git"), _copy(world, tmp_path, "us")
    path, _, staged = change.partition(" ")
    for repo in (by_git, by_us):
        (repo / path).write_text("local\n")
        if staged:
            git(repo / os.path.dirname(path), "add", os.path.basename(path))
    refused = _git_checkout(by_git, "one")
    assert refused.returncode == 1 and "Cannot update submodule" in refused.stderr
    proc = _pcheckout(by_us, "--writer", writer, "one")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"pcheckout: error: git checkout refused: {said}")
    assert proc.stderr.count("\n") == 1
    assert _state(by_us) == _state(by_git)


def test_a_local_change_the_move_does_not_touch_is_reset_as_git_does(
    world: Path, tmp_path: Path
) -> None:
    """git 2.39 resets a submodule it moves (read-tree --reset): a change to a file the
    move leaves alone is lost, with git's checkout and with pcheckout's."""
    by_git, by_us = _copy(world, tmp_path, "git"), _copy(world, tmp_path, "us")
    for repo in (by_git, by_us):
        (repo / "a" / ".gitmodules").write_text("local\n")
    assert _git_checkout(by_git, "three").returncode == 0
    assert _pcheckout(by_us, "--writer", "pcheckout", "three").returncode == 0
    assert _state(by_us) == _state(by_git)


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("recurse", [True, False])
@pytest.mark.parametrize(("start", "rev"), [("two", "four"), ("four", "two")])
def test_a_file_replacing_a_submodule_as_git(
    world: Path, tmp_path: Path, writer: str, recurse: bool, start: str, rev: str
) -> None:
    """git removes the submodule's directory whole (entry.c remove_subtree, untracked
    files too), with or without submodule.recurse; the engine failed on it ("File
    exists")."""
    by_git = _copy(world, tmp_path, "git", recurse=recurse)
    by_us = _copy(world, tmp_path, "us", recurse=recurse)
    for repo in (by_git, by_us):
        if start != "two":
            assert _git_checkout(repo, start).returncode == 0
        else:
            (repo / "c" / "untracked").write_text("u\n")
    assert _git_checkout(by_git, rev).returncode == 0
    proc = _pcheckout(by_us, "--writer", writer, rev)
    assert proc.returncode == 0, proc.stderr
    assert _state(by_us) == _state(by_git)


@pytest.mark.parametrize("rev", ["one"])
def test_a_submodule_with_its_own_git_dir_is_absorbed_first(
    world: Path, tmp_path: Path, rev: str
) -> None:
    """A submodule whose .git is its repository (cloned by hand) is moved into
    .git/modules first, as git does, saying so as git does."""
    by_git, by_us = _copy(world, tmp_path, "git"), _copy(world, tmp_path, "us")
    for repo in (by_git, by_us):
        (repo / "c" / ".git").unlink()
        (repo / ".git" / "modules" / "c").rename(repo / "c" / ".git")
        git(repo, "config", "--file", "c/.git/config", "--unset", "core.worktree")
    said = _git_checkout(by_git, rev)
    assert said.returncode == 0
    proc = _pcheckout(by_us, "--writer", "pcheckout", rev)
    assert proc.returncode == 0, proc.stderr
    assert _state(by_us) == _state(by_git)
    assert "Migrating git directory of 'c'" in said.stderr
    assert proc.stderr == said.stderr.replace(str(by_git), str(by_us))


def test_untracked_files_keep_a_removed_submodules_directory(world: Path, tmp_path: Path) -> None:
    by_git, by_us = _copy(world, tmp_path, "git"), _copy(world, tmp_path, "us")
    for repo in (by_git, by_us):
        (repo / "c" / "untracked").write_text("mine\n")
    said = _git_checkout(by_git, "one")
    assert said.returncode == 0
    proc = _pcheckout(by_us, "--writer", "pcheckout", "one")
    assert proc.returncode == 0
    assert _state(by_us) == _state(by_git)
    assert (by_us / "c" / "untracked").read_text() == "mine\n"
    assert said.stderr == "warning: unable to rmdir 'c': Directory not empty\n"
    assert proc.stderr == said.stderr


@pytest.mark.parametrize("writer", WRITERS)
def test_force_resets_every_submodule_as_git(world: Path, tmp_path: Path, writer: str) -> None:
    by_git, by_us = _copy(world, tmp_path, "git"), _copy(world, tmp_path, "us")
    for repo in (by_git, by_us):
        (repo / "a" / "f").write_text("local\n")
        (repo / "c" / "h").write_text("local\n")
    assert _git_checkout(by_git, "-f", "three").returncode == 0
    proc = _pcheckout(by_us, "--writer", writer, "-f", "three")
    assert proc.returncode == 0, proc.stderr
    assert _state(by_us) == _state(by_git)


@pytest.mark.parametrize("writer", WRITERS)
def test_fresh_checkout_populates_the_active_submodules(
    world: Path, tmp_path: Path, writer: str
) -> None:
    """A work tree emptied, index and all, the submodules' repositories kept: git's
    ``checkout -f`` writes it again, submodules populated."""
    by_git, by_us = _copy(world, tmp_path, "git"), _copy(world, tmp_path, "us")
    for repo in (by_git, by_us):
        for p in repo.iterdir():
            if p.name != ".git":
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        (repo / ".git" / "index").unlink()
    assert _git_checkout(by_git, "-f", "HEAD").returncode == 0
    proc = _pcheckout(by_us, "--writer", writer)
    assert proc.returncode == 0, proc.stderr
    assert _state(by_us) == _state(by_git)


def test_an_active_submodule_without_its_repository_is_refused(tmp_path: Path) -> None:
    """git's checkout dies half-way there (not a git repository); pcheckout writes
    nothing and says why."""
    leaf = make_repo(tmp_path, {b"l": b"l\n"}, name="leaf")
    sup = make_repo(tmp_path, {b"s": b"s\n"}, name="super")
    git(sup, *ALLOW, "submodule", "-q", "add", f"file://{leaf}", "leaf")
    _commit(sup, "leaf")
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", "--no-checkout", str(sup), str(work))
    git(work, "config", "submodule.active", ".")
    git(work, "config", "submodule.recurse", "true")
    proc = _pcheckout(work, "--writer", "pcheckout")
    assert proc.returncode == 1
    assert "submodule 'leaf' is active but has no repository" in proc.stderr
    assert sorted(p.name for p in work.iterdir()) == [".git"]


def test_dry_run_names_the_submodules_it_would_move(world: Path, tmp_path: Path) -> None:
    repo = _copy(world, tmp_path, "us")
    before = _state(repo)
    proc = _pcheckout(repo, "--dry-run", "--json", "one")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    a2 = git(repo, "rev-parse", "two:a").decode().strip()
    assert [(m["path"], m["action"], m["from"], m["to"]) for m in report["submodules"]] == [
        ("c", "removed", git(repo, "rev-parse", "two:c").decode().strip(), None),
        ("a", "moved", a2, git(repo, "rev-parse", "one:a").decode().strip()),
        ("b", "populated", None, git(repo, "rev-parse", "one:b").decode().strip()),
    ]
    text = subprocess.run(
        [sys.executable, "-m", "pcheckout", "checkout", "-C", str(repo), "-n", "one"],
        capture_output=True,
        text=True,
    ).stdout
    assert f"would move submodule 'a' from {a2[:7]} to " in text
    assert "would remove submodule 'c' (its git dir kept)" in text
    assert "would populate submodule 'b' at " in text
    assert _state(repo) == before


@pytest.mark.parametrize("writer", WRITERS)
def test_clone_recurse_submodules_with_submodule_recurse_set(
    world: Path, tmp_path: Path, writer: str
) -> None:
    """git clone's own checkout never moves submodules (git submodule update does, after
    it); with submodule.recurse=true in the user's config, git's writer's read-tree did
    and died ("not a git repository: ../.git/modules/a")."""
    env = {
        **os.environ,
        **GIT_ENV,
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "protocol.file.allow",
        "GIT_CONFIG_VALUE_0": "always",
        "GIT_CONFIG_KEY_1": "submodule.recurse",
        "GIT_CONFIG_VALUE_1": "true",
        "PCHECKOUT_WRITER": writer,
    }
    src = world.parent / "super"
    run = {"capture_output": True, "text": True, "env": env}
    by_git = subprocess.run(
        ["git", "clone", "-q", "--recurse-submodules", str(src), str(tmp_path / "git")], **run
    )
    assert by_git.returncode == 0, by_git.stderr
    cmd = [sys.executable, "-m", "pcheckout", "clone", "-q", "--recurse-submodules"]
    proc = subprocess.run([*cmd, str(src), str(tmp_path / "us")], **run)
    assert proc.returncode == 0, proc.stderr
    ours, theirs = _state(tmp_path / "us"), _state(tmp_path / "git")
    assert ours["status"] == theirs["status"] == ""
    for key in ("files", "submodules", "heads", "index", "HEAD"):
        assert ours[key] == theirs[key]


@pytest.mark.parametrize("writer", WRITERS)
def test_a_submodule_commit_missing_locally_refuses_as_git(
    world: Path, tmp_path: Path, writer: str
) -> None:
    """A gitlink naming a commit the submodule's repository lacks: git's dry run in it
    fails ("failed to unpack tree object"), git refuses and changes nothing."""
    by_git, by_us = _copy(world, tmp_path, "git"), _copy(world, tmp_path, "us")
    for repo in (by_git, by_us):
        scratch = tmp_path / f"elsewhere-{repo.name}"
        git(tmp_path, "clone", "-q", str(repo / "a"), str(scratch))
        (scratch / "f").write_text("a commit only elsewhere\n")
        git(scratch, "commit", "-qam", "elsewhere")
        oid = git(scratch, "rev-parse", "HEAD").decode().strip()
        git(repo, "update-index", "--cacheinfo", f"160000,{oid},a")
        git(repo, "commit", "-qm", "missing")
        git(repo, "tag", "missing")
        git(repo, "-c", "submodule.recurse=false", "checkout", "-q", "two")
    said = _git_checkout(by_git, "missing")
    assert said.returncode == 1 and "failed to unpack tree object" in said.stderr
    proc = _pcheckout(by_us, "--writer", writer, "missing")
    assert proc.returncode == 1
    expected = " ".join(said.stderr.replace("fatal: ", "").replace("error: ", "").split())
    assert " ".join(proc.stderr.split()) == (
        "pcheckout: error: git checkout refused: "
        + expected.replace(
            "Cannot update submodule: a Aborting", "Cannot update submodule: a; Aborting"
        )
    )
    assert _state(by_us) == _state(by_git)


#: ``python -c STOPPER N SIG ARGS...``: the CLI, stopped by signal SIG (KILL: its whole
#: process group) once the engine has moved its N-th submodule.
STOPPER = r"""
import os, signal, sys
n, sig = int(sys.argv[1]), sys.argv[2]
import pcheckout.apply.submodules as sm
real = sm._one
moved = [0]
def one(ctx, m):
    out = real(ctx, m)
    moved[0] += 1
    if moved[0] == n:
        if sig == "KILL":
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), getattr(signal, "SIG" + sig))
    return out
sm._one = one
from pcheckout.cli.main import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize(("n", "sig"), [(1, "KILL"), (2, "KILL"), (1, "INT"), (2, "TERM")])
@pytest.mark.parametrize("rev", ["one", "three"])
def test_a_switch_interrupted_in_its_submodule_moves_is_finished_as_git(
    world: Path, tmp_path: Path, rev: str, n: int, sig: str
) -> None:
    """Killed between two submodule moves (one removed, moved or populated, the next not):
    the command it prints finishes the switch to git's result; the work tree's
    .gitmodules, the target's already, is the interrupted run's, not where it began."""
    by_git, by_us = _copy(world, tmp_path, "git"), _copy(world, tmp_path, "us")
    assert _git_checkout(by_git, rev).returncode == 0
    cmd = [sys.executable, "-c", STOPPER, str(n), sig, "checkout", "-C", str(by_us), "-q"]
    env = {**os.environ, **GIT_ENV, "PCHECKOUT_WRITER": "pcheckout"}
    stopped = subprocess.run(
        [*cmd, rev], capture_output=True, text=True, env=env, start_new_session=True
    )
    assert stopped.returncode != 0, stopped.stderr
    assert (by_us / ".git" / "pcheckout-in-progress").exists()
    if sig != "KILL":
        assert f"to finish, run: pcheckout checkout -C {by_us} {rev}" in stopped.stderr
    again = _pcheckout(by_us, rev)
    assert again.returncode == 0, again.stderr
    assert _state(by_us) == _state(by_git)


#: Logs a hook's run: its name as git gives it, its arguments, where, git's variables.
LOGGING_HOOK = """#!/bin/sh
{ echo "hook: $0 $* in $(pwd)"; env | grep '^GIT_' | grep -v '^GIT_TRACE' | sort; } >> "$HOOKLOG"
cat > /dev/null
"""


@pytest.mark.parametrize("rev", ["one", "three"])
def test_the_submodules_hooks_run_as_in_gits_checkout(
    world: Path, tmp_path: Path, rev: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git's checkout moves each submodule by read-tree and update-ref in it: the
    submodule's post-index-change and reference-transaction run there, with git's
    environment (no GIT_PAGER: pcheckout's own git commands run with --no-pager)."""
    by_git, by_us = _copy(world, tmp_path, "git"), _copy(world, tmp_path, "us")
    names = ("post-checkout", "post-index-change", "reference-transaction")
    for repo in (by_git, by_us):
        for hooks in [repo / ".git" / "hooks", *(repo / ".git" / "modules").glob("**/hooks")]:
            for name in names:
                (hooks / name).write_text(LOGGING_HOOK)
                (hooks / name).chmod(0o755)
    logs = {}
    for name, repo in (("git", by_git), ("us", by_us)):
        log = tmp_path / f"{name}.log"
        monkeypatch.setenv("HOOKLOG", str(log))
        if name == "git":
            assert _git_checkout(repo, rev).returncode == 0
        else:
            proc = _pcheckout(repo, "--writer", "pcheckout", rev)
            assert proc.returncode == 0, proc.stderr
        logs[name] = log.read_text().replace(str(repo), "<work>").splitlines()
    monkeypatch.delenv("HOOKLOG")
    assert logs["us"] == logs["git"]
    assert any("/modules/a/hooks/post-index-change" in line for line in logs["us"])
    assert _state(by_us) == _state(by_git)
