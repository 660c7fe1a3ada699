"""git's hooks, found and run as git finds and runs them (hook.c, githooks(5)).

A hook is ``<hooks dir>/<name>``: ``core.hooksPath`` when set (a relative path is taken
from the work tree's top, where hooks run; ``~`` expanded), else ``hooks/`` in the common
git dir.  git runs it from the work tree's top with its standard input closed and its
standard output sent to standard error; a hook file that is not executable is ignored
(with git's hint).  From git 2.36 on, ``git hook run`` does exactly that, so pcheckout
asks it (``--ignore-missing``: a hook that vanished is no error); before 2.36 the file
is run directly, in the same place, with ``GIT_PREFIX`` set as git sets it.

``git -c core.hooksPath=/dev/null ...`` (or the config key) is git's own way of running
no hooks; pcheckout also has ``--no-hooks``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from pcheckout.git.runner import Git, Repo

__all__ = ["GIT_HOOK_RUN", "Hook", "find", "post_checkout", "run"]

#: ``git hook run`` came in git 2.36 (RelNotes/2.36.0.txt); before it the file is run.
GIT_HOOK_RUN = (2, 36)


class Hook(NamedTuple):
    """One hook to run, with its arguments."""

    name: str
    path: Path  # where it is (it exists; git decides whether it may run)
    args: tuple[str, ...]


def find(repo: Repo, config: Mapping[str, str], name: str) -> Path | None:
    """The file of hook ``name`` if there is one (executable or not: git says why it
    ignores one that is not)."""
    configured = config.get("core.hookspath")
    if configured:
        base = Path(os.path.expanduser(configured))
        if not base.is_absolute():
            top = repo.work_tree if repo.work_tree is not None else repo.git_dir
            base = top / base
    else:
        base = repo.common_dir / "hooks"
    path = base / name
    return path if path.is_file() else None


def post_checkout(
    repo: Repo, config: Mapping[str, str], old: str | None, new: str
) -> tuple[Hook, ...]:
    """The ``post-checkout`` hook git runs after moving HEAD from ``old`` (None: no
    commit, the null id) to ``new``, branch checkout flag 1 (builtin/checkout.c
    ``post_checkout_hook``; builtin/clone.c gives the null id as the old HEAD)."""
    path = find(repo, config, "post-checkout")
    if path is None:
        return ()
    null = "0" * repo.oid_hex_len
    return (Hook("post-checkout", path, (old or null, new, "1")),)


def run(git: Git, hook: Hook, environ: Mapping[str, str], top: Path) -> int:
    """Run ``hook`` as git runs it, from ``git``'s directory (which sets its
    ``GIT_PREFIX``) in the work tree whose top is ``top``; its exit status."""
    if git.has(GIT_HOOK_RUN):
        # (no --no-pager, which git passes on to the hook as GIT_PAGER=cat)
        cmd = [
            git.exe,
            "-C",
            str(git.cwd),
            "hook",
            "run",
            "--ignore-missing",
            hook.name,
            "--",
            *hook.args,
        ]
        cwd = None
    else:  # git < 2.36: the file itself, where git would run it
        prefix = os.path.relpath(git.cwd.resolve(), top)
        environ = {**environ, "GIT_PREFIX": "" if prefix == "." else prefix + "/"}
        cmd, cwd = [str(hook.path), *hook.args], top
        if not os.access(hook.path, os.X_OK):
            return 0
    git.log(cmd)
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, env=dict(environ), stdin=subprocess.DEVNULL, stdout=2, check=False
        )
    except OSError as exc:  # git's run_command: a hook that cannot start fails
        git.log([f"cannot run {hook.path}: {exc.strerror}"])
        return 1
    return proc.returncode
