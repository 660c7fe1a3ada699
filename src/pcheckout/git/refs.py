"""Refs: branch names, where HEAD points."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pcheckout.errors import decode
from pcheckout.git.runner import Git, Repo

_NOT_IN_BRANCH_NAMES = frozenset(" ~^:?*[\\\x7f") | {chr(c) for c in range(32)}


def is_branch_name(name: str) -> bool:
    """Whether ``refs/heads/<name>`` is a well-formed ref name (git's
    check_refname_format, conservatively), so that naming it cannot be read
    as revision syntax (``v1~2``, ``x^{tree}``, ``@{-1}``)."""
    if not name or name in ("HEAD", "@") or name.startswith("-") or "@{" in name:
        return False
    if ".." in name or "//" in name or name.endswith(("/", ".")):
        return False
    if any(c in _NOT_IN_BRANCH_NAMES for c in name):
        return False
    return all(part and not part.startswith(".") and not part.endswith(".lock")
               for part in name.split("/"))


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
