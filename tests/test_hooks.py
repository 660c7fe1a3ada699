"""git's post-checkout hook, run as git runs it: after the index is in place and HEAD has
moved, with git's arguments, directory and environment; compared line by line with what
the same hook records under git's own checkout, with either writer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, git, make_repo, run_cli

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.errors import HookError

pytestmark = pytest.mark.usefixtures("writer")

FILES = {b"a": b"1\n", b"d/b": b"2\n", b"d/e/c": b"3\n"}

#: Records what git gives a hook: its arguments, where it runs, git's variables, whether
#: the index is readable and unlocked (git status works), where HEAD is.
HOOK = """#!/bin/sh
{
  echo "args: $*"
  echo "cwd: $(pwd)"
  env | grep '^GIT_' | grep -v '^GIT_TRACE' | sort
  echo "head: $(git rev-parse HEAD) $(git symbolic-ref -q HEAD)"
  echo "status:"; git status --porcelain
  test -e "$(git rev-parse --git-dir)/index.lock" && echo "index.lock held"
} >> "$HOOKLOG"
exit "${HOOK_EXIT:-0}"
"""


def _repo(tmp_path: Path) -> Path:
    src = make_repo(tmp_path, FILES)
    git(src, "checkout", "-q", "-b", "side")
    (src / "d" / "b").write_bytes(b"two\n")
    (src / "new").write_bytes(b"n\n")
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "side")
    git(src, "checkout", "-q", "main")
    return src


def _hook(work: Path, hooks_dir: Path | None = None) -> None:
    d = hooks_dir if hooks_dir is not None else work / ".git" / "hooks"
    d.mkdir(parents=True, exist_ok=True)
    (d / "post-checkout").write_text(HOOK)
    (d / "post-checkout").chmod(0o755)


def _log(path: Path, work: Path) -> list[str]:
    """The hook's records, with the work tree's own path made generic."""
    text = path.read_text() if path.exists() else ""
    return text.replace(str(work), "<work>").splitlines()


def _pair(tmp_path: Path, src: Path) -> tuple[Path, Path]:
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_no_checkout(src, tmp_path / "theirs")
    for w in (ours, theirs):
        _hook(w)
    return ours, theirs


@pytest.mark.parametrize("rev", ["HEAD", "side", "origin/side"])
def test_post_checkout_runs_as_git_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rev: str
) -> None:
    src = _repo(tmp_path)
    ours, theirs = _pair(tmp_path, src)
    logs = {"ours": tmp_path / "ours.log", "theirs": tmp_path / "theirs.log"}
    monkeypatch.setenv("HOOKLOG", str(logs["theirs"]))
    git(theirs, "checkout", "-q", rev)  # a fresh checkout (no index yet) ...
    monkeypatch.setenv("HOOKLOG", str(logs["ours"]))
    checkout(CheckoutOptions(ours, rev=rev))
    assert _log(logs["ours"], ours) == _log(logs["theirs"], theirs)
    for name, w in (("theirs", theirs), ("ours", ours)):  # ... then a switch back
        monkeypatch.setenv("HOOKLOG", str(logs[name]))
        if name == "theirs":
            git(w, "checkout", "-q", "main")
        else:
            checkout(CheckoutOptions(w, rev="main"))
    assert _log(logs["ours"], ours) == _log(logs["theirs"], theirs)
    assert "index.lock held" not in _log(logs["ours"], ours)
    assert_same_as_git(ours, theirs)


def test_a_failing_hook_fails_the_run_after_a_complete_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _repo(tmp_path)
    ours, theirs = _pair(tmp_path, src)
    monkeypatch.setenv("HOOK_EXIT", "3")
    monkeypatch.setenv("HOOKLOG", str(tmp_path / "log"))
    theirs_rc = git(theirs, "checkout", "-q", "side", check=False)
    proc = run_cli("checkout", "-C", str(ours), "side")
    assert proc.returncode == 1  # git's own: 1, whatever the hook's status
    assert "post-checkout hook exited with status 3" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert theirs_rc is not None
    assert_same_as_git(ours, theirs)
    with pytest.raises(HookError) as info:
        checkout(CheckoutOptions(ours, rev="main"))
    assert info.value.result is not None


def test_git_gives_the_same_exit_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = _repo(tmp_path)
    _ours, theirs = _pair(tmp_path, src)
    monkeypatch.setenv("HOOK_EXIT", "3")
    monkeypatch.setenv("HOOKLOG", str(tmp_path / "log"))
    proc = subprocess.run(["git", "-C", str(theirs), "checkout", "-q", "side"])
    assert proc.returncode == 1


@pytest.mark.parametrize("relative", [True, False])
def test_core_hookspath(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: bool) -> None:
    src = _repo(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_no_checkout(src, tmp_path / "theirs")
    for w in (ours, theirs):
        hooks_dir = w / "my-hooks" if relative else tmp_path / f"hooks-{w.name}"
        _hook(w, hooks_dir)
        git(w, "config", "core.hooksPath", "my-hooks" if relative else str(hooks_dir))
    for name, w in (("theirs", theirs), ("ours", ours)):
        monkeypatch.setenv("HOOKLOG", str(tmp_path / f"{name}.log"))
        if name == "theirs":
            git(w, "checkout", "-q", "side")
        else:
            checkout(CheckoutOptions(w, rev="side"))
    assert _log(tmp_path / "ours.log", ours) == _log(tmp_path / "theirs.log", theirs)
    assert _log(tmp_path / "ours.log", ours)  # the hook did run


def test_no_hooks_and_gits_own_way_to_run_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _repo(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    _hook(ours)
    log = tmp_path / "log"
    monkeypatch.setenv("HOOKLOG", str(log))
    checkout(CheckoutOptions(ours, rev="side", hooks=False))
    assert not log.exists()
    proc = run_cli(
        "checkout",
        "-C",
        str(ours),
        "main",
        env={"GIT_CONFIG_PARAMETERS": "'core.hooksPath'='/dev/null'"},
    )  # what `git -c core.hooksPath=/dev/null pcheckout checkout main` passes on
    assert proc.returncode == 0, proc.stderr
    assert not log.exists()
    proc = run_cli("checkout", "-C", str(ours), "--no-hooks", "side")
    assert proc.returncode == 0, proc.stderr
    assert not log.exists()


def test_a_hook_that_is_not_executable_is_ignored_with_gits_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _repo(tmp_path)
    ours, theirs = _pair(tmp_path, src)
    for w in (ours, theirs):
        (w / ".git" / "hooks" / "post-checkout").chmod(0o644)
    monkeypatch.setenv("HOOKLOG", str(tmp_path / "log"))
    theirs_err = subprocess.run(
        ["git", "-C", str(theirs), "checkout", "-q", "side"], capture_output=True, text=True
    ).stderr
    proc = run_cli("checkout", "-C", str(ours), "-q", "side")
    assert proc.returncode == 0, proc.stderr
    assert "was ignored because it's not set as executable" in theirs_err
    assert "was ignored because it's not set as executable" in proc.stderr
    assert not (tmp_path / "log").exists()


def test_the_dry_run_names_the_hook_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _repo(tmp_path)
    ours = clone_no_checkout(src, tmp_path / "ours")
    _hook(ours)
    monkeypatch.setenv("HOOKLOG", str(tmp_path / "log"))
    result = checkout(CheckoutOptions(ours, rev="side", dry_run=True))
    assert result.hooks == ["post-checkout"]
    assert result.to_json()["hooks"] == ["post-checkout"]
    assert not (tmp_path / "log").exists()
    no_hook = clone_with_git(src, tmp_path / "plain")
    assert checkout(CheckoutOptions(no_hook, rev="side", dry_run=True)).hooks == []


def test_a_hook_run_from_a_subdirectory_gets_gits_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _repo(tmp_path)
    ours = clone_with_git(src, tmp_path / "ours")
    theirs = clone_with_git(src, tmp_path / "theirs")
    for w in (ours, theirs):
        _hook(w)
    monkeypatch.setenv("HOOKLOG", str(tmp_path / "theirs.log"))
    git(theirs / "d", "checkout", "-q", "side")
    monkeypatch.setenv("HOOKLOG", str(tmp_path / "ours.log"))
    checkout(CheckoutOptions(ours / "d", rev="side"))
    ours_log = _log(tmp_path / "ours.log", ours)
    assert ours_log == _log(tmp_path / "theirs.log", theirs)
    assert "GIT_PREFIX=d/" in ours_log
    assert os.path.isdir(ours / "d")


#: Records every hook git runs, in order: its name as git gives it ($0), its arguments,
#: where it runs, git's variables, its standard input, and where HEAD is at that moment.
ANY_HOOK = """#!/bin/sh
{
  echo "hook: $0 $*"
  echo "cwd: $(pwd)"
  env | grep '^GIT_\\|^TEXTDOMAIN' | grep -v '^GIT_TRACE' | sort
  echo "stdin: $(cat)"
  echo "head: $(git rev-parse -q --verify HEAD) $(git symbolic-ref -q HEAD)"
} >> "$HOOKLOG"
exit "${HOOK_EXIT:-0}"
"""

#: The hooks git 2.39's checkout and clone run (read-cache.c, builtin/checkout.c, clone.c).
CHECKOUT_HOOKS = ("post-index-change", "post-checkout")


def _compared(writer: str) -> tuple[str, ...]:
    """The hooks whose runs are compared line by line: git's own switch (git's writer)
    runs post-index-change after HEAD has moved, and no reference-transaction
    (docs/git-differences.md)."""
    return (
        (*CHECKOUT_HOOKS, "reference-transaction") if writer == "pcheckout" else ("post-checkout",)
    )


def _hooks_dir(d: Path, names: tuple[str, ...] = CHECKOUT_HOOKS) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name in names:
        (d / name).write_text(ANY_HOOK)
        (d / name).chmod(0o755)
    return d


def _both(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    theirs: list[str],
    ours: list[str],
    names: tuple[str, str] = ("ours", "theirs"),
) -> tuple[list[str], list[str], int, int]:
    """pcheckout's command and git's, run in ``tmp_path``, each with a hook log of its own
    (``<name>.log``, ``names``: the two work trees, whose paths are made generic): the two
    logs and the two exit statuses."""
    logs, codes = [], []
    runs = ((names[0], [sys.executable, "-m", "pcheckout", *ours]), (names[1], ["git", *theirs]))
    for name, cmd in runs:
        log = tmp_path / f"{name}.log"
        log.unlink(missing_ok=True)
        monkeypatch.setenv("HOOKLOG", str(log))
        codes.append(subprocess.run(cmd, cwd=tmp_path, capture_output=True).returncode)
        monkeypatch.delenv("HOOKLOG")  # (git status would run post-index-change)
        text = log.read_text() if log.exists() else ""
        logs.append(text.replace(str(tmp_path / name), "<work>").splitlines())
    return logs[0], logs[1], codes[0], codes[1]


def test_every_checkout_runs_gits_hooks_as_git_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """A fresh checkout, switches, ``-`` and ``@{-1}``, a checkout of the branch HEAD is
    on, ``HEAD``, a detached HEAD: post-index-change before HEAD moves, then
    post-checkout, each as git runs it."""
    src = _repo(tmp_path)
    for w in ("ours", "theirs"):
        clone_no_checkout(src, tmp_path / w)
        _hooks_dir(tmp_path / w / ".git" / "hooks", _compared(writer))
    for rev in ["main", "side", "-", "@{-1}", "main", "HEAD", "origin/side", "-"]:
        ours, theirs, rc_ours, rc_theirs = _both(
            monkeypatch,
            tmp_path,
            ["-C", "theirs", "checkout", "-q", rev],
            ["checkout", "-q", "-C", "ours", rev],
        )
        assert (rc_ours, rc_theirs) == (0, 0)
        assert ours == theirs, rev
        assert sum(line.startswith("hook: .git/hooks/post-checkout") for line in ours) == 1
    assert_same_as_git(tmp_path / "ours", tmp_path / "theirs")


def test_a_switch_by_gits_writer_runs_both_hooks_with_gits_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PCHECKOUT_WRITER", "git")
    src = _repo(tmp_path)
    for w in ("ours", "theirs"):
        clone_with_git(src, tmp_path / w)
        _hooks_dir(tmp_path / w / ".git" / "hooks")
    ours, theirs, *codes = _both(
        monkeypatch,
        tmp_path,
        ["-C", "theirs", "checkout", "-q", "side"],
        ["checkout", "-q", "-C", "ours", "side"],
    )
    assert codes == [0, 0]
    hooks = [line for line in ours if line.startswith("hook: ")]
    assert hooks == [line for line in theirs if line.startswith("hook: ")]
    assert [h.split()[1] for h in hooks] == [
        ".git/hooks/post-index-change",
        ".git/hooks/post-checkout",
    ]


def test_clone_runs_its_hooks_as_git_clone_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git clone runs them in its own process: $0 absolute, GIT_DIR set, no GIT_PREFIX."""
    src = _repo(tmp_path)
    template = _hooks_dir(tmp_path / "template" / "hooks").parent
    ours, theirs, *codes = _both(
        monkeypatch,
        tmp_path,
        ["clone", "-q", f"--template={template}", str(src), "theirs"],
        ["clone", "-q", f"--template={template}", str(src), "ours"],
    )
    assert codes == [0, 0]
    assert ours == theirs
    assert "hook: <work>/.git/hooks/post-checkout 0000000000000000000000000000000000000000" in (
        " ".join(ours)
    )
    assert "GIT_DIR=<work>/.git" in ours and not any("GIT_PREFIX" in x for x in ours)
    assert_same_as_git(tmp_path / "ours", tmp_path / "theirs")
    ours, theirs, *codes = _both(  # no checkout: no hook
        monkeypatch,
        tmp_path,
        ["clone", "-q", "--no-checkout", f"--template={template}", str(src), "theirs2"],
        ["clone", "-q", "--no-checkout", f"--template={template}", str(src), "ours2"],
        names=("ours2", "theirs2"),
    )
    assert codes == [0, 0]
    assert ours == theirs == []


def test_clone_runs_a_hook_its_tree_brings_by_a_relative_hooks_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = make_repo(tmp_path, {b"a": b"1\n", b".githooks/post-checkout": ("x", ANY_HOOK.encode())})
    ours, theirs, *codes = _both(
        monkeypatch,
        tmp_path,
        ["clone", "-q", "-c", "core.hooksPath=.githooks", str(src), "theirs"],
        ["clone", "-q", "-c", "core.hooksPath=.githooks", str(src), "ours"],
    )
    assert codes == [0, 0]
    assert ours == theirs and ours[0].startswith("hook: .githooks/post-checkout 000000")


def test_a_clone_whose_hook_fails_exits_with_the_hooks_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _repo(tmp_path)
    template = _hooks_dir(tmp_path / "template" / "hooks").parent
    monkeypatch.setenv("HOOK_EXIT", "3")
    ours, theirs, *codes = _both(
        monkeypatch,
        tmp_path,
        ["clone", "-q", f"--template={template}", str(src), "theirs"],
        ["clone", "-q", f"--template={template}", str(src), "ours"],
    )
    assert codes == [3, 3]
    assert ours == theirs
    assert_same_as_git(tmp_path / "ours", tmp_path / "theirs")


def test_a_clones_hook_that_is_not_executable_gets_gits_hint(tmp_path: Path) -> None:
    src = _repo(tmp_path)
    template = _hooks_dir(tmp_path / "template" / "hooks").parent
    (template / "hooks" / "post-checkout").chmod(0o644)
    err = {}
    for name, cmd in (("theirs", ["git"]), ("ours", [sys.executable, "-m", "pcheckout"])):
        proc = subprocess.run(
            [*cmd, "clone", "-q", f"--template={template}", str(src), name],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "HOOKLOG": str(tmp_path / "log")},
        )
        assert proc.returncode == 0, proc.stderr
        err[name] = proc.stderr.replace(str(tmp_path / name), "<work>")
    assert err["ours"] == err["theirs"]
    assert "hint: The '<work>/.git/hooks/post-checkout' hook was ignored" in err["ours"]


def test_clone_recurse_submodules_runs_each_submodules_hooks_as_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git submodule update checks each submodule out by ``git checkout`` under its
    script's environment (GIT_PROTOCOL_FROM_USER=0, its gettext variables): each
    submodule's own hooks (from init.templateDir) run there."""
    from clonehelp import ALLOW_FILE, make_super_server, url

    server = make_super_server(tmp_path)
    template = _hooks_dir(tmp_path / "template" / "hooks").parent
    git(tmp_path, "config", "--global", "init.templateDir", str(template))
    for k, v in ALLOW_FILE.items():
        monkeypatch.setenv(k, v)
    args = ["clone", "-q", "--recurse-submodules", "-j", "1", url(server)]
    ours, theirs, *codes = _both(monkeypatch, tmp_path, [*args, "theirs"], [*args, "ours"])
    assert codes == [0, 0]
    assert ours == theirs
    hooks = [line.split()[1] for line in ours if line.startswith("hook: ")]
    assert hooks == [
        f"<work>/.git/{where}hooks/{name}"
        for where in ("", "modules/libs/one/", "modules/two/")
        for name in CHECKOUT_HOOKS
    ]
    assert "GIT_PROTOCOL_FROM_USER=0" in ours


def test_a_linked_worktrees_hooks_run_as_git_runs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    """The common git dir's hooks, GIT_DIR the worktree's own git dir; from a
    subdirectory, GIT_PREFIX."""
    src = _repo(tmp_path)
    for w in ("ours", "theirs"):
        repo = clone_no_checkout(src, tmp_path / w / "repo")
        _hooks_dir(repo / ".git" / "hooks", _compared(writer))
        git(repo, "branch", "-q", "topic", "origin/side")
        git(repo, "worktree", "add", "-q", "--no-checkout", "../wt", "topic")
    for where, rev in (("wt", "topic"), ("wt", "origin/main"), ("wt/d", "-")):
        ours, theirs, *codes = _both(
            monkeypatch,
            tmp_path,
            ["-C", f"theirs/{where}", "checkout", "-q", rev],
            ["checkout", "-q", "-C", f"ours/{where}", rev],
        )
        assert codes == [0, 0]
        assert ours == theirs, rev
        assert "GIT_DIR=<work>/repo/.git/worktrees/wt" in ours
        assert ("GIT_PREFIX=d/" in ours) == (where == "wt/d")
    ours_wt, theirs_wt = tmp_path / "ours" / "wt", tmp_path / "theirs" / "wt"
    assert git(ours_wt, "ls-files", "-s") == git(theirs_wt, "ls-files", "-s")
    assert git(ours_wt, "status", "--porcelain") == b""
