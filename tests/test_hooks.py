"""git's post-checkout hook, run as git runs it: after the index is in place and HEAD has
moved, with git's arguments, directory and environment; compared line by line with what
the same hook records under git's own checkout, with either writer."""

from __future__ import annotations

import os
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
    proc = __import__("subprocess").run(["git", "-C", str(theirs), "checkout", "-q", "side"])
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
    theirs_err = (
        __import__("subprocess")
        .run(["git", "-C", str(theirs), "checkout", "-q", "side"], capture_output=True, text=True)
        .stderr
    )
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
