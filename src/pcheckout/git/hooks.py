"""git's hooks, found and run as git finds and runs them (hook.c, githooks(5)).

A hook is ``<hooks dir>/<name>``: ``core.hooksPath`` when set (a relative path is taken
from the work tree's top, where hooks run; ``~`` expanded), else ``hooks/`` in the common
git dir.  git looks for it when it runs it, so a hook that appears during the checkout
runs (git-lfs's filter installs its ``post-checkout`` while git writes).  git runs it
from the work tree's top with its standard input closed and its standard output sent to
standard error; a hook file that is not executable is ignored (with git's hint).  From
git 2.36 on, ``git hook run`` does exactly that, so pcheckout asks it (``--ignore-missing``:
a hook that vanished is no error); before 2.36 the file is run directly, in the same place,
with ``GIT_PREFIX`` set as git sets it.

git clone runs its checkout's hooks in its own process, which never set up a repository
the way a command run inside one does: the hook's ``$0`` is absolute, ``GIT_DIR`` names
the git dir, ``GIT_PREFIX`` is not set (builtin/clone.c ``checkout``; ``git hook run``
would set it), and clone's exit status is the hook's.  Such a hook is run directly, with
the environment git gives every child (run-command.c, exec-cmd.c ``setup_path``:
``GIT_EXEC_PATH``, the exec path ahead of ``PATH``).

``git -c core.hooksPath=/dev/null ...`` (or the config key) is git's own way of running
no hooks; pcheckout also has ``--no-hooks``.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from pcheckout.git.config import config_bool
from pcheckout.git.runner import Git, Repo

__all__ = [
    "GIT_HOOK_RUN",
    "Hook",
    "Ran",
    "Where",
    "find",
    "post_checkout",
    "post_index_change",
    "run",
]

#: ``git hook run`` came in git 2.36 (RelNotes/2.36.0.txt); before it the file is run.
GIT_HOOK_RUN = (2, 36)

#: hook.c ``find_hook``: what git says of a hook file that is not executable (advice.c
#: prints each line after ``hint: ``), unless ``advice.ignoredHook`` is false.
IGNORED_HINT = (
    "The '{path}' hook was ignored because it's not set as executable.\n"
    "You can disable this warning with `git config advice.ignoredHook false`."
)

#: The shell git runs a hook without ``#!`` with (run-command.c: ``execve`` fails with
#: ENOEXEC, then ``SHELL_PATH``).
SHELL_PATH = "/bin/sh"


class Hook(NamedTuple):
    """One hook to run, with its arguments."""

    name: str
    args: tuple[str, ...]
    #: there when the run was planned (a dry run names it); looked for again when run
    planned: bool = True
    #: run as git clone runs its checkout's hooks (see the module docstring)
    clone: bool = False


class Where(NamedTuple):
    """Where hooks run: the repository, its config, the environment, the work tree's top."""

    git: Git
    repo: Repo
    config: Mapping[str, str]
    environ: Mapping[str, str]
    top: Path


class Ran(NamedTuple):
    """A hook's run: its exit status (None: there was none to run) and git's hint lines
    (a hook file that is not executable), to be said as git says them."""

    code: int | None
    hints: tuple[str, ...] = ()


def _base(repo: Repo, config: Mapping[str, str]) -> Path:
    """The hooks directory as git names it (path.c ``adjust_git_path``): a relative
    ``core.hooksPath`` stays relative to the work tree's top, where hooks run."""
    configured = config.get("core.hookspath")
    if configured:
        return Path(os.path.expanduser(configured))
    return repo.common_dir / "hooks"


def find(repo: Repo, config: Mapping[str, str], name: str) -> Path | None:
    """The file of hook ``name`` if there is one (executable or not: git says why it
    ignores one that is not)."""
    base = _base(repo, config)
    if not base.is_absolute():
        top = repo.work_tree if repo.work_tree is not None else repo.git_dir
        base = top / base
    path = base / name
    return path if path.is_file() else None


def post_checkout(
    repo: Repo, config: Mapping[str, str], old: str | None, new: str, *, clone: bool = False
) -> Hook:
    """The ``post-checkout`` hook git runs after moving HEAD from ``old`` (None: no
    commit, the null id) to ``new``, branch checkout flag 1 (builtin/checkout.c
    ``post_checkout_hook``; builtin/clone.c gives the null id as the old HEAD)."""
    null = "0" * repo.oid_hex_len
    planned = find(repo, config, "post-checkout") is not None
    return Hook("post-checkout", (old or null, new, "1"), planned, clone)


def post_index_change(repo: Repo, config: Mapping[str, str], *, clone: bool = False) -> Hook:
    """The ``post-index-change`` hook git runs once a checkout's index is in place
    (read-cache.c ``do_write_locked_index``), before HEAD moves: the work tree was
    updated (unpack-trees sets ``updated_workdir`` whenever it updates files, a checkout
    that changes nothing included), no skip-worktree bit changed (only ``git
    sparse-checkout`` sets ``updated_skipworktree``).  Its exit status is ignored."""
    planned = find(repo, config, "post-index-change") is not None
    return Hook("post-index-change", ("1", "0"), planned, clone)


def run(where: Where, hook: Hook) -> Ran:
    """Run ``hook`` as git runs it, if it is there now, from ``where.git``'s directory
    (which sets its ``GIT_PREFIX``) in the work tree whose top is ``where.top``."""
    path = find(where.repo, where.config, hook.name)
    if path is None:
        return Ran(None)
    git = where.git
    if hook.clone or not git.has(GIT_HOOK_RUN):
        return _run_file(where, hook, path)
    # (no --no-pager, which git passes on to the hook as GIT_PAGER=cat)
    cmd = [git.exe, "-C", str(git.cwd), "hook", "run", "--ignore-missing", hook.name]
    return Ran(_spawn(git, [*cmd, "--", *hook.args], None, where.environ))


def _run_file(where: Where, hook: Hook, path: Path) -> Ran:
    """The hook file itself, where git would run it: as git clone runs it, or as git
    before 2.36 runs it (``GIT_PREFIX`` from ``where.git``'s directory)."""
    git, environ = where.git, dict(where.environ)
    if hook.clone:
        shown = _base(where.repo, where.config) / hook.name
        if not shown.is_absolute():
            shown = Path(os.path.relpath(path, where.top))
        exec_path = git.out("--exec-path").decode().rstrip("\n")
        environ.update(
            GIT_DIR=str(where.repo.git_dir),
            GIT_EXEC_PATH=exec_path,
            PATH=exec_path + os.pathsep + environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        )
        environ.pop("GIT_PREFIX", None)
    else:
        prefix = os.path.relpath(git.cwd.resolve(), where.top)
        environ["GIT_PREFIX"] = "" if prefix == "." else prefix + "/"
        shown = path
    if not os.access(path, os.X_OK):
        if not config_bool(where.config.get("advice.ignoredhook"), True):
            return Ran(None)
        text = IGNORED_HINT.format(path=shown)
        return Ran(None, tuple("hint: " + line for line in text.splitlines()))
    return Ran(_spawn(git, [str(shown), *hook.args], where.top, environ))


def _spawn(git: Git, cmd: list[str], cwd: Path | None, environ: Mapping[str, str]) -> int:
    """``cmd``'s exit status, its standard input closed and its output on standard
    error (run-command.c, as hook.c starts a hook)."""
    git.log(cmd)
    for argv in (cmd, [SHELL_PATH, *cmd]):
        try:
            proc = subprocess.run(
                argv, cwd=cwd, env=dict(environ), stdin=subprocess.DEVNULL, stdout=2, check=False
            )
        except OSError as exc:
            if exc.errno == errno.ENOEXEC and argv is cmd:
                continue  # a script without "#!": git runs it with the shell
            # run-command.c: "cannot run <hook>: <reason>", and the run fails
            git.log([f"cannot run {cmd[0]}: {exc.strerror}"])
            return 1
        return proc.returncode
    return 1  # pragma: no cover - the loop returns
