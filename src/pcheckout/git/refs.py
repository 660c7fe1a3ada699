"""Refs: branch names, where HEAD points, where ``git checkout REV`` goes and
how it moves HEAD afterwards."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from pcheckout.errors import GitError, UnknownRevisionError, decode
from pcheckout.git.config import config_bool
from pcheckout.git.objects import batch_check, resolve
from pcheckout.git.round1 import batchable, is_branch_name, target_names
from pcheckout.git.runner import Git, Repo

__all__ = [
    "HeadOutcome",
    "Target",
    "head_outcome",
    "is_branch_name",
    "is_local_branch",
    "prior_checkout",
    "resolve_target",
    "symbolic_head",
    "unique_remote_branch",
    "update_head",
]


_HEX_HEAD = re.compile(rb"(?:[0-9a-f]{40}|[0-9a-f]{64})\n?")


def symbolic_head(git: Git, repo: Repo, config: Mapping[str, str]) -> str | None:
    """The ref HEAD points to (``refs/heads/main``), None when detached.

    With the files ref backend HEAD is a file in the git dir (gitrepository-layout:
    ``ref: refs/heads/main`` or an object id), read directly: one git process
    fewer, which on a network mount is tens of round trips.  Anything else (the
    reftable backend, an unexpected content) asks ``git symbolic-ref``."""
    if "extensions.refstorage" not in config:
        try:
            data = (repo.git_dir / "HEAD").read_bytes()
        except OSError:
            data = b""
        if data.startswith(b"ref: refs/") and data.endswith(b"\n") and b"\n" not in data[:-1]:
            return decode(data[5:-1].strip())
        if _HEX_HEAD.fullmatch(data):
            return None
    proc = git.run("symbolic-ref", "--quiet", "HEAD", ok_codes=(0, 1, 128))
    return decode(proc.stdout.strip()) or None


def is_local_branch(git: Git, name: str) -> bool:
    if name == "HEAD" or name.startswith("-"):
        return False
    proc = git.run("show-ref", "--verify", "--quiet", f"refs/heads/{name}", ok_codes=(0, 1, 128))
    return proc.returncode == 0


_PRIOR = re.compile(r"@\{-([0-9]+)\}")


def prior_checkout(git: Git, rev: str) -> str:
    """What ``git checkout REV`` reads ``-`` and ``@{-N}`` as (sha1-name.c
    ``interpret_nth_prior_checkout``): the branch the Nth checkout before this one left
    (so it is checked out attached, and the reflog names it), or the commit it left when
    HEAD was detached.  Any other REV is returned as it is."""
    asked = rev
    if rev == "-":
        rev = "@{-1}"
    if _PRIOR.fullmatch(rev) is None:
        return rev
    proc = git.run("rev-parse", "--symbolic-full-name", rev, ok_codes=(0, 128))
    name = decode(proc.stdout.strip())
    if proc.returncode != 0:
        raise UnknownRevisionError(f"invalid revision '{asked}': no such earlier checkout")
    if name.startswith("refs/heads/"):
        return name.removeprefix("refs/heads/")
    return resolve(git, rev, "commit")


class Target(NamedTuple):
    """Where ``git checkout REV`` goes."""

    commit: str
    tree: str
    branch: str | None  # the local branch HEAD will name, else detached
    branch_exists: bool  # False: a remote-tracking branch guessed, to be created
    head_tree: str | None  # the tree HEAD has now (None: unborn HEAD)
    head_commit: str | None  # the commit HEAD is at now (None: unborn HEAD)
    #: the tree REV names read as any revision (``git diff-tree HEAD REV`` reads it so),
    #: where a local branch of that name may win (None: not known)
    rev_tree: str | None = None


def resolve_target(git: Git, rev: str) -> Target:
    """Resolve ``rev`` as git checkout reads it: a local branch of that name wins
    over a tag or any other reading (git warns "refname is ambiguous" and takes
    the branch); else any commit-ish; else a unique remote-tracking branch
    (``--guess``).  One ``cat-file --batch-check`` answers the common case."""
    if batchable(rev):
        found = [f[0] if f else None for f in batch_check(git, target_names(rev))]
        head = found[0], found[1]
        if rev == "HEAD":
            found[2:2] = [found[1], found[0]]
        if len(found) > 4 and found[4] and found[5]:
            return Target(found[4], found[5], rev, True, *head, found[3])
        if found[2] and found[3]:
            return Target(found[2], found[3], None, False, *head, found[3])
    # Unknown (perhaps a remote branch to guess), or not sayable in a batch line.
    head = _head_tree_and_commit(git)
    try:
        commit = resolve(git, rev, "commit")
    except UnknownRevisionError:
        remote = unique_remote_branch(git, rev)
        if remote is None:
            raise
        commit = resolve(git, remote, "commit")
        return Target(commit, resolve(git, commit, "tree"), rev, False, *head)
    branch = rev if is_local_branch(git, rev) else None
    return Target(commit, resolve(git, commit, "tree"), branch, branch is not None, *head)


def _head_tree_and_commit(git: Git) -> tuple[str | None, str | None]:
    try:
        return resolve(git, "HEAD", "tree"), resolve(git, "HEAD", "commit")
    except UnknownRevisionError:  # unborn
        return None, None


def unique_remote_branch(git: Git, name: str) -> str | None:
    """git checkout's --guess: ``name`` matches exactly one remote-tracking branch."""
    if not name or name.startswith("-"):
        return None
    out = git.out("for-each-ref", "--format=%(refname)", "refs/remotes/")
    matches = [
        r
        for r in out.decode("utf-8", "replace").splitlines()
        if r.count("/") >= 3 and r.split("/", 3)[3] == name
    ]
    return matches[0] if len(matches) == 1 else None


class HeadOutcome(NamedTuple):
    """Where a checkout left HEAD, and where HEAD was before."""

    commit: str  # the commit HEAD is at now
    branch: str | None  # the branch HEAD names now; None: detached
    previous_commit: str | None  # None: HEAD was unborn
    previous_branch: str | None  # None: HEAD was detached
    moved: bool = True  # False: REV was HEAD, and HEAD was left as it was
    created: bool = False  # the branch was made, tracking a remote one (git's --guess)
    advice: bool = True  # git config advice.detachedHead
    hints: bool = True  # git config advice.statusHints

    def describe(self, rev: str) -> str:
        """A few words for a human: the branch, or what HEAD is detached at."""
        if not self.moved:
            return self.previous_branch or self.commit
        return self.branch if self.branch is not None else f"detached at {rev}"


def head_outcome(
    target: Target, rev: str, old: str | None, config: Mapping[str, str]
) -> HeadOutcome:
    """Where ``git checkout REV`` takes HEAD from ``old`` (the ref HEAD named before, None
    when detached)."""
    old_branch = old.removeprefix("refs/heads/") if old and old.startswith("refs/heads/") else None
    advice = config_bool(config.get("advice.detachedhead"), True)
    hints = config_bool(config.get("advice.statushints"), True)
    if rev == "HEAD":
        return HeadOutcome(
            target.commit, old_branch, target.head_commit, old_branch, False, hints=hints
        )
    created = target.branch is not None and not target.branch_exists
    return HeadOutcome(
        target.commit, target.branch, target.head_commit, old_branch, True, created, advice, hints
    )


def update_head(
    git: Git, repo: Repo, config: Mapping[str, str], rev: str, target: Target
) -> HeadOutcome:
    """Point HEAD where ``git checkout REV`` would; return where it went.  The
    reflog says "checkout: moving from OLD to REV" with git's OLD: the branch
    name, or the full commit id when HEAD was detached."""
    commit, branch = target.commit, target.branch
    old = symbolic_head(git, repo, config)
    move = head_outcome(target, rev, old, config)
    old_name = move.previous_branch or target.head_commit or ""
    if not move.moved:
        return move
    if branch is not None:
        ref = f"refs/heads/{branch}"
        if not target.branch_exists:
            remote = unique_remote_branch(git, branch)
            if remote is None:  # pragma: no cover - resolved earlier
                raise GitError(f"branch {branch} disappeared")
            git.run("branch", "--track", branch, remote.removeprefix("refs/remotes/"))
        git.run("symbolic-ref", "-m", f"checkout: moving from {old_name} to {branch}", "HEAD", ref)
        return move
    git.run(
        "update-ref",
        "--no-deref",
        "-m",
        f"checkout: moving from {old_name} to {rev}",
        "HEAD",
        commit,
    )
    return move
