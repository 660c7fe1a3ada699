"""git-lfs's hooks: the four hooks its filter installs where one is missing, each time it
starts (``git lfs update``).  Under git's writer the filter installs none (it reads the
``core.hooksPath=/dev/null`` that keeps git's own hooks off), nor where the engine writes
LFS files without it: pcheckout installs them then.

Apart from ``git/lfs.py`` (7.5 ms in ``-X importtime``): a checkout where git-lfs is
configured looks for these hooks on every run, and most runs find them."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

from pcheckout.git import hooks
from pcheckout.git.runner import Git, Repo

#: The hooks git-lfs's filter installs where they are missing, each time it starts.
HOOKS = ("pre-push", "post-checkout", "post-commit", "post-merge")


def hooks_missing(repo: Repo, config: Mapping[str, str]) -> bool:
    """Whether one of the hooks git-lfs's filter installs is missing."""
    return not all(hooks.find(repo, config, name) is not None for name in HOOKS)


def install_hooks(git: Git, repo: Repo, config: Mapping[str, str]) -> None:
    """What git-lfs's filter does when it starts, for a checkout that ran none: its hooks
    where one is missing (``git lfs update``; one that exists is left as it is, and a
    failure is git-lfs's to report the next time it runs)."""
    HookInstall(git, repo, config).wait()


class HookInstall:
    """:func:`install_hooks`, started beside the writes (``git lfs update`` is a git-lfs
    process that finds the repository first: ~0.3 s on the 1 ms latency mount, after the
    last file where it ran last); :meth:`wait` for it before the hooks run, :meth:`kill`
    if the run fails."""

    def __init__(self, git: Git, repo: Repo, config: Mapping[str, str]) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        if hooks_missing(repo, config):
            self._proc = git.popen(
                ["lfs", "update"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    def wait(self) -> None:
        if self._proc is not None:
            self._proc.wait()  # (its status is git-lfs's to report the next time it runs)

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
