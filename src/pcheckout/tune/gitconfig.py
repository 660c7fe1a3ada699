"""The git config ``pcheckout tune --git-config`` writes: plain git tuned per mount, an
``[includeIf "gitdir:MOUNT/"]`` section in the user's global git config, pointing at a file
pcheckout owns that sets ``checkout.workers`` (and ``checkout.thresholdForParallelism``) for
every repository whose git dir is under MOUNT.

So ``git checkout``, ``git switch``, ``git clone`` and every tool built on git use the count
measured for that mount, without pcheckout and without changing git (what the 2020 proposal to
auto-enable parallel checkout on NFS wanted; docs/tuning.md).  The global file is changed
only through ``git config --global`` (git picks the file: ``GIT_CONFIG_GLOBAL``, ``~/.gitconfig``
or ``$XDG_CONFIG_HOME/git/config``); writing is idempotent, and :func:`remove` takes out the
include and the owned file, and the section once nothing else is left in it.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pcheckout.errors import GitError, decode
from pcheckout.fs.detect import FsInfo
from pcheckout.git.runner import Git
from pcheckout.plan import policy

#: The first line of every file pcheckout owns; :func:`remove` deletes only files that have it.
MARKER = "# Written by pcheckout tune --git-config"


@dataclass(frozen=True)
class GitConfigChange:
    """What writing the per-mount git config does, before it is done."""

    mount_point: str
    key: str  # the global config key, e.g. includeIf.gitdir:/mnt/nfs/.path
    owned: Path  # the file pcheckout owns
    content: str  # what the owned file will hold
    include_present: bool  # the global config already includes ``owned`` for this mount
    owned_current: bool  # ``owned`` already holds exactly ``content``

    @property
    def needed(self) -> bool:
        return not (self.include_present and self.owned_current)

    def describe(self) -> str:
        """What will be written, for a human, before it is."""
        section = self.key.rsplit(".", 1)[0].split(".", 1)[1]
        lines = [
            f'global git config: [includeIf "{section}"] path = {self.owned}'
            + (" (already there)" if self.include_present else "")
        ]
        lines.append(f"{self.owned}" + (" (unchanged):" if self.owned_current else ":"))
        lines += ["    " + line for line in self.content.splitlines()]
        return "\n".join(lines)


def pattern(mount_point: str) -> str:
    """``gitdir:MOUNT/`` with wildmatch's special characters escaped (a trailing ``/`` means
    everything below, git-config(1) "Conditional includes")."""
    path = mount_point.rstrip("/") + "/"
    return "gitdir:" + re.sub(r"([*?\[\\])", r"\\\1", path)


def config_key(mount_point: str) -> str:
    return f"includeIf.{pattern(mount_point)}.path"


def owned_path(mount_point: str, environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/pcheckout/git/<name>-<hash>.gitconfig`` (``~/.config`` by default):
    one file per mount, named so a human can tell which."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or os.path.join(
        env.get("HOME") or str(Path.home()), ".config"
    )
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", mount_point.strip("/")) or "root"
    digest = hashlib.sha256(mount_point.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return Path(base) / "pcheckout" / "git" / f"{name[:60]}-{digest}.gitconfig"


def render(mount_point: str, workers: int, threshold: int, why: str, date: str) -> str:
    """The owned file: git config syntax, comments saying where it came from."""
    return (
        f"{MARKER} on {date} for the mount {mount_point}.\n"
        f"# {why}\n"
        f"# Remove with: pcheckout tune {mount_point} --git-config --remove\n"
        "[checkout]\n"
        f"\tworkers = {workers}\n"
        f"\tthresholdForParallelism = {threshold}\n"
        "# For pcheckout itself: the count above is this file's, not the user's choice.\n"
        "[pcheckout]\n"
        f"\tgitConfigWorkers = {workers}\n"
    )


#: The entry count the plain-git count is planned for (checkout.workers holds one number for
#: every repository under the mount): a mid-sized repository; only NFS 3/4.1/4.2 counts
#: change with it (policy.NFS_LARGE_ENTRIES).
PLAIN_GIT_ENTRIES = 10_000


class MountConfig(NamedTuple):
    """The git config planned for one mount: the count plain git gets, and the change."""

    git: Git
    mount_point: str
    plan: policy.WorkerPlan  # git's writer's plan for PLAIN_GIT_ENTRIES entries
    threshold: int  # checkout.thresholdForParallelism
    change: GitConfigChange


def for_mount(git: Git, fs: FsInfo, mount_point: str, tuned: policy.Tuned | None) -> MountConfig:
    """Plain git under this mount gets the count pcheckout would give git's writer there (the
    tune result ``tuned``, else the policy): the owned file's content, and what writing it
    changes."""
    inputs = policy.Inputs(
        cpus=policy.CpuInfo.current(),
        entries=PLAIN_GIT_ENTRIES,
        tuned=tuned,
        writer=policy.ExplicitWriter("git", "--git-config"),
        git_version=git.version,
        ceilings=policy.ceiling_for({}, {}, tuned),
    )
    planned = policy.choose_workers(fs, inputs)
    content = render(
        mount_point,
        planned.workers,
        policy.PARALLEL_THRESHOLD,
        f"{fs.kind} ({fs.fstype} {fs.source}): {planned.reason}",
        time.strftime("%Y-%m-%d"),
    )
    change = plan(git, mount_point, content)
    return MountConfig(git, mount_point, planned, policy.PARALLEL_THRESHOLD, change)


def _global_values(git: Git, key: str) -> list[str]:
    proc = git.run("config", "--global", "--get-all", key, ok_codes=(0, 1))
    return [decode(v) for v in proc.stdout.split(b"\n") if v]


def plan(
    git: Git, mount_point: str, content: str, environ: Mapping[str, str] | None = None
) -> GitConfigChange:
    key = config_key(mount_point)
    owned = owned_path(mount_point, environ)
    try:
        current = owned.read_text(encoding="utf-8")
    except OSError:
        current = None
    present = str(owned) in _global_values(git, key)
    return GitConfigChange(mount_point, key, owned, content, present, current == content)


def apply(git: Git, change: GitConfigChange) -> bool:
    """Write the owned file and add the include, each only if needed; True if anything changed."""
    if not change.needed:
        return False
    if not change.owned_current:
        change.owned.parent.mkdir(parents=True, exist_ok=True)
        tmp = change.owned.with_name(change.owned.name + ".tmp")
        tmp.write_text(change.content, encoding="utf-8")
        os.replace(tmp, change.owned)
    if not change.include_present:
        git.run(
            "config",
            "--global",
            "--add",
            change.key,
            str(change.owned),
            what="cannot add the include to the global git config",
        )
    return True


def _ere(text: str) -> str:
    """``text`` as a POSIX extended regular expression matching itself (git config's value
    and name patterns are EREs, regcomp(3))."""
    return re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", text)


def remove(
    git: Git, mount_point: str, environ: Mapping[str, str] | None = None, dry_run: bool = False
) -> list[str]:
    """Take out the include for this mount (and its section, when nothing else is left in it)
    and the owned file; return what was removed (with ``dry_run``: what would be, and
    nothing is), for the user."""
    key = config_key(mount_point)
    owned = owned_path(mount_point, environ)
    removed: list[str] = []
    if str(owned) in _global_values(git, key):
        if not dry_run:
            _remove_include(git, key, owned)
        removed.append(f"{key} = {owned} (global git config)")
    try:
        text = owned.read_text(encoding="utf-8")
    except OSError:
        text = None
    if text is not None:
        if not text.startswith(MARKER):
            raise GitError(f"{owned} was not written by pcheckout; left alone")
        if not dry_run:
            owned.unlink()
        removed.append(str(owned))
    return removed


def _remove_include(git: Git, key: str, owned: Path) -> None:
    # A value pattern, not --fixed-value (git 2.30; pcheckout supports 2.25).
    git.run(
        "config",
        "--global",
        "--unset-all",
        key,
        "^" + _ere(str(owned)) + "$",
        what="cannot remove the include from the global git config",
    )
    section = key.rsplit(".", 1)[0]
    # git matches the canonical name: section and variable lower-cased, subsection as is.
    canonical = "includeif." + section.split(".", 1)[1]
    rest = git.run(
        "config", "--global", "--get-regexp", "^" + _ere(canonical) + r"\.", ok_codes=(0, 1)
    )
    if not rest.stdout.strip():
        # An empty section header stays behind after --unset; drop it (ok if already gone).
        git.run("config", "--global", "--remove-section", section, ok_codes=(0, 128))
