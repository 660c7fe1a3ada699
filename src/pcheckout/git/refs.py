"""Refs: branch names, where HEAD points, where ``git checkout REV`` goes and
how it moves HEAD afterwards."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import NamedTuple

from pcheckout.errors import (
    HeadUpdateError,
    RevisionRefusedError,
    UnbornHeadError,
    UnknownRevisionError,
    decode,
    no_such_revision,
)
from pcheckout.git import guess
from pcheckout.git.config import config_bool
from pcheckout.git.objects import batch_check, batch_check_said, resolve
from pcheckout.git.round1 import batchable, target_names
from pcheckout.git.runner import Git, Repo

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
        raise UnknownRevisionError(no_such_revision(asked))
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
    #: the remote-tracking branch the new branch starts from (``refs/remotes/origin/x``)
    start: str | None = None
    #: git's warnings on REV, as ``git checkout REV`` prints them ("refname is ambiguous")
    said: tuple[str, ...] = ()
    #: the tree REV names read as any revision (``git diff-tree HEAD REV`` reads it so),
    #: where a local branch of that name may win (None: not known)
    rev_tree: str | None = None


def resolve_target(git: Git, rev: str) -> Target:
    """Resolve ``rev`` as git checkout reads it (builtin/checkout.c parse_branchname_arg):
    any object name; a local branch of that name wins over a tag or any other reading (git
    warns "refname is ambiguous" and takes the branch); a commit is checked out, a tree or
    a blob refused as git refuses them; a name that resolves to nothing may be a unique
    remote-tracking branch (``--guess``).  One ``cat-file --batch-check`` answers the
    common case."""
    if not batchable(rev):
        raise UnknownRevisionError(no_such_revision(rev))
    answers, stderr = batch_check_said(git, target_names(rev))
    found = [f[0] if f else None for f in answers]
    head = found[0], found[1]
    if rev == "HEAD":
        found[2:2] = [found[1], found[0], found[1]]
    said = _ambiguous(rev, stderr)
    if len(found) > 5 and found[5] and found[6]:
        return Target(found[5], found[6], rev, True, *head, said=said, rev_tree=found[3])
    if found[4] and not found[3]:
        # REV resolved, REV^{tree} did not: a blob, or a name the suffix changes the reading
        # of (":/text^{tree}" searches for that text): peeled by its object id instead
        found[2:4] = [f[0] if f else None for f in batch_check(git, _peeled(found[4]))]
    if found[2] and found[3]:
        return Target(found[2], found[3], None, False, *head, said=said, rev_tree=found[3])
    if found[3]:  # a tree (or a tag of one): checkout.c checkout_branch()
        raise RevisionRefusedError(f"Cannot switch branch to a non-commit '{rev}'")
    if found[4]:  # a blob: parse_branchname_arg()
        raise RevisionRefusedError(f"reference is not a tree: {rev}")
    if rev == "HEAD":
        raise UnbornHeadError(no_such_revision(rev))
    return _guessed(git, rev, head)


def _peeled(oid: str) -> list[str]:
    return [f"{oid}^{{commit}}", f"{oid}^{{tree}}"]


def _ambiguous(rev: str, stderr: bytes) -> tuple[str, ...]:
    """git's "refname is ambiguous" warning on ``rev``, once (cat-file gave it per name)."""
    line = f"warning: refname '{rev}' is ambiguous."
    return (line,) if line in decode(stderr).splitlines() else ()


def _guessed(git: Git, rev: str, head: tuple[str | None, str | None]) -> Target:
    """A name no object matches: a remote's branch to create (``--guess``), else git's
    "pathspec did not match" (where REV is a path git would restore it: pcheckout writes
    whole trees only, docs/git-differences.md)."""
    if _names_an_id(git, rev):  # a ref (or a full id) naming an object that is missing
        raise RevisionRefusedError(f"reference is not a tree: {rev}")
    remote = guess.remote_branch(git, rev)
    if remote is None:
        if _is_known_path(git, rev):
            raise UnknownRevisionError(
                f"'{rev}' is a path, not a revision: pcheckout checks out whole trees "
                f"(git checkout -- {rev} restores paths)"
            )
        raise UnknownRevisionError(no_such_revision(rev))
    commit = resolve(git, remote, "commit")
    tree = resolve(git, commit, "tree")
    return Target(commit, tree, rev, False, *head, start=remote)


def _names_an_id(git: Git, rev: str) -> bool:
    """Whether ``rev`` names an object id although no object answers it (a dangling ref):
    git checkout's get_oid_mb() reads it, then finds no tree (parse_branchname_arg())."""
    proc = git.run("rev-parse", "--quiet", "--verify", rev, ok_codes=(0, 1, 128))
    return proc.returncode == 0 and bool(proc.stdout.strip())


def _is_known_path(git: Git, name: str) -> bool:
    """Whether ``name`` is a pathspec that matches the index (git checkout then restores it)."""
    proc = git.run("ls-files", "--error-unmatch", "--", name, ok_codes=(0, 1, 128))
    return proc.returncode == 0


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
    rev: str = "HEAD"  # REV as git names it (``-`` and ``@{-N}`` read as what they name)

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
            target.commit,
            old_branch,
            target.head_commit,
            old_branch,
            False,
            advice=advice,
            hints=hints,
            rev=rev,
        )
    created = target.branch is not None and not target.branch_exists
    return HeadOutcome(
        target.commit,
        target.branch,
        target.head_commit,
        old_branch,
        True,
        created,
        advice,
        hints,
        rev,
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
        if not target.branch_exists and target.start is not None:
            # git checkout's create_branch() with branch.autoSetupMerge's tracking, as git
            # branch makes it; its reflog: "branch: Created from refs/remotes/origin/x"
            _moving(git, "", "branch", "--", branch, target.start)
        message = _reflog_message(git, old_name, branch)
        _moving(git, "unable to update HEAD", "symbolic-ref", "-m", message, "HEAD", ref)
        return move
    message = _reflog_message(git, old_name, rev)
    _moving(git, "", "update-ref", "--no-deref", "-m", message, "HEAD", commit)
    return move


def _reflog_message(git: Git, old: str, new: str) -> str:
    """HEAD's reflog message: GIT_REFLOG_ACTION where the environment sets it (a command
    running git checkout for itself, as rebase does), else git's own words
    (builtin/checkout.c update_refs_for_switch())."""
    action = (git.env if git.env is not None else os.environ).get("GIT_REFLOG_ACTION")
    return action if action is not None else f"checkout: moving from {old} to {new}"


def _moving(git: Git, then: str, *args: str) -> None:
    """A git command that moves HEAD; its failure is git checkout's, in git's words, one
    line: a ref's lock held ("Unable to create '.git/HEAD.lock': File exists."), then
    ``then``, what git checkout dies with after it (builtin/checkout.c
    update_refs_for_switch())."""
    # (its reference-transaction hook sees what git's checkout gives it)
    proc = git.hooked().run(*args, ok_codes=(0, 1, 128))
    if proc.returncode == 0:
        return
    said = [
        line.strip().removeprefix("error: ").removeprefix("fatal: ")
        for line in decode(proc.stderr).splitlines()
        if line.strip()
    ]
    raise HeadUpdateError(" ".join([*said, then]).strip() or f"git {args[0]} failed")
