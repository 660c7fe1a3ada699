"""git checkout's ``--guess``: a REV that names nothing, read as a remote's branch, which
checkout then creates locally, tracking it (builtin/checkout.c ``parse_remote_branch``,
checkout.c ``unique_tracking_name`` in git 2.39).

For each configured remote, ``refs/heads/NAME`` is mapped through the remote's fetch
refspecs (remote.c ``query_refspecs``: negative refspecs exclude, the first that maps
wins); a remote matches where the ref it maps to exists.  One match is taken; several are
an error unless ``checkout.defaultRemote`` names one of them; ``checkout.guess=false``
turns the guess off.  Asked only where REV resolved to nothing (two git processes).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from pcheckout.errors import RevisionRefusedError, decode
from pcheckout.git.config import config_bool
from pcheckout.git.runner import Git

#: The config the guess reads, in one ``git config --get-regexp`` (a remote's fetch
#: refspecs are multi-valued: ``read_config`` keeps the last value only).
_KEYS = r"^(remote\..+\.fetch|checkout\.guess|checkout\.defaultremote)$"

#: git's no_wildcard() (dir.c): a name with these is a pathspec pattern, never guessed.
_WILDCARDS = frozenset("*?[\\")


class _Settings(NamedTuple):
    guess: bool
    default_remote: str | None
    refspecs: dict[str, list[str]]  # remote -> its fetch refspecs, in config order


def _settings(git: Git) -> _Settings:
    proc = git.run("config", "-z", "--get-regexp", _KEYS, ok_codes=(0, 1))
    guess, default = "true", None
    refspecs: dict[str, list[str]] = {}
    for item in proc.stdout.split(b"\0"):
        key_b, _, value_b = item.partition(b"\n")
        key, value = decode(key_b), decode(value_b)
        if key == "checkout.guess":
            guess = value or "true"
        elif key == "checkout.defaultremote":
            default = value
        elif key.startswith("remote.") and key.endswith(".fetch"):
            refspecs.setdefault(key[len("remote.") : -len(".fetch")], []).append(value)
    return _Settings(config_bool(guess, True), default, refspecs)


def _glob(pattern: str, name: str) -> str | None:
    """What ``*`` stood for where ``name`` matches ``pattern`` (remote.c
    match_name_with_pattern: one ``*``; without one, an exact match)."""
    star = pattern.find("*")
    if star < 0:
        return "" if pattern == name else None
    head, tail = pattern[:star], pattern[star + 1 :]
    if len(name) < len(head) + len(tail) or not name.startswith(head) or not name.endswith(tail):
        return None
    return name[len(head) : len(name) - len(tail)]


def tracking_ref(refspecs: list[str], src: str) -> str | None:
    """Where a remote with ``refspecs`` fetches ``src`` to (remote.c query_refspecs):
    None where a negative refspec excludes it or none maps it."""
    plain = [r.removeprefix("+") for r in refspecs]
    if any(r.startswith("^") and _glob(r[1:], src) is not None for r in plain):
        return None
    for spec in plain:
        if spec.startswith("^") or ":" not in spec:
            continue
        left, right = spec.split(":", 1)
        star = _glob(left, src)
        if star is None or not right:
            continue
        return right.replace("*", star, 1) if "*" in left else right
    return None


def remote_branch(git: Git, name: str) -> str | None:
    """The remote-tracking ref (``refs/remotes/origin/NAME``) ``git checkout NAME`` would
    create NAME from; None where it guesses nothing (git then reads NAME as a path).
    Raises git's own refusals: NAME is also a file here, or several remotes have it."""
    if not name or name.startswith("-") or any(c in _WILDCARDS for c in name):
        return None
    settings = _settings(git)
    if not settings.guess:
        return None
    wanted: dict[str, str] = {}
    for remote, refspecs in settings.refspecs.items():
        dst = tracking_ref(refspecs, f"refs/heads/{name}")
        if dst is not None and dst.startswith("refs/"):
            wanted[remote] = dst
    existing = _existing(git, sorted(set(wanted.values())))
    matched = {remote: dst for remote, dst in wanted.items() if dst in existing}
    chosen = _choose(name, matched, settings.default_remote)
    if chosen is not None and os.path.lexists(os.path.join(git.cwd, name)):
        raise RevisionRefusedError(  # builtin/checkout.c parse_remote_branch()
            f"'{name}' could be both a local file and a tracking branch; "
            f"check out '{chosen.removeprefix('refs/remotes/')}', or create the branch with git"
        )
    return chosen


def _choose(name: str, matched: dict[str, str], default: str | None) -> str | None:
    if len(matched) == 1:
        return next(iter(matched.values()))
    if default is not None and default in matched:
        return matched[default]
    if len(matched) > 1:  # git's die(), its hint's advice in a few words
        raise RevisionRefusedError(
            f"'{name}' matched multiple ({len(matched)}) remote tracking branches; "
            "set checkout.defaultRemote to prefer one remote, or create the branch with "
            f"git branch --track {name} <remote>/{name}"
        )
    return None


def _existing(git: Git, refs: list[str]) -> set[str]:
    """Which of ``refs`` exist (for-each-ref also lists refs below a name: kept out)."""
    if not refs:
        return set()
    out = git.out("for-each-ref", "--format=%(refname)", *refs)
    return set(decode(out).splitlines()) & set(refs)
