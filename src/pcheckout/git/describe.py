"""What git says about commits when HEAD moves: ``%h %s`` lines, the commits a detached HEAD
leaves behind, a new branch's upstream, the local changes a switch carried.  Asked only for
a human's report (the CLI's ``HEAD is now at ...`` lines), never on a checkout's own path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pcheckout.errors import decode
from pcheckout.git.runner import Git


def onelines(git: Git, commits: Sequence[str]) -> dict[str, str]:
    """``{commit: "1a2b3c4 subject"}``, abbreviated as git abbreviates (core.abbrev)."""
    if not commits:
        return {}
    proc = git.run("log", "--no-walk=unsorted", "--format=%H %h %s", *commits, "--", ok_codes=(0,))
    out: dict[str, str] = {}
    for line in decode(proc.stdout).splitlines():
        full, _, rest = line.partition(" ")
        out[full] = rest
    return out


class LeftBehind(NamedTuple):
    """Commits reachable from a detached HEAD's old commit and from no ref (git's
    orphaned-commit warning), newest first."""

    lost: int
    first: tuple[str, ...]  # the "%h %s" lines of the first few


def left_behind(git: Git, old: str, shown: int = 5) -> LeftBehind:
    """What leaving ``old`` (a detached HEAD, HEAD moved already) leaves unreachable."""
    proc = git.run("log", "--format=%h %s", old, "--not", "--all", "--", ok_codes=(0,))
    lines = decode(proc.stdout).splitlines()
    return LeftBehind(len(lines), tuple(lines[:shown]))


class Tracking(NamedTuple):
    """A branch against its upstream, as git counts it (``%(upstream:track)``)."""

    upstream: str  # e.g. origin/main
    ahead: int
    behind: int
    gone: bool  # the upstream is configured, its ref is not there
    #: the remote and its branch as the config names them ("origin/main"), which git's
    #: "set up to track" line says (branch.c install_branch_config_multiple_remotes)
    configured: str = ""


def tracking(git: Git, branch: str) -> Tracking | None:
    """The branch's upstream and how far apart they are; None without an upstream."""
    fmt = (
        "--format=%(upstream:short)%00%(upstream:track,nobracket)"
        "%00%(upstream:remotename)%00%(upstream:remoteref)"
    )
    proc = git.run("for-each-ref", fmt, f"refs/heads/{branch}", ok_codes=(0,))
    upstream, track, remote, merge = (decode(proc.stdout).strip().split("\0") + [""] * 3)[:4]
    if not upstream:
        return None
    configured = f"{remote}/{merge.removeprefix('refs/heads/')}" if remote and merge else upstream
    # "ahead 2, behind 1": each word before its count
    counts = dict(part.split(" ", 1) for part in track.split(", ") if " " in part)
    ahead, behind = int(counts.get("ahead", 0)), int(counts.get("behind", 0))
    return Tracking(upstream, ahead, behind, track == "gone", configured)


def local_changes(git: Git) -> list[str]:
    """What differs from HEAD in the work tree, as git's checkout lists it once it has
    switched (checkout.c show_local_changes: diff-index --name-status, no rename
    detection, full paths quoted as core.quotePath says): "M\tpath" lines."""
    # A clean filter that fails (git's checkout had those entries fresh and never ran it)
    # leaves the report without the list, never the switch failed.
    proc = git.run("diff-index", "--name-status", "HEAD", "--", ok_codes=(0, 1, 128))
    return decode(proc.stdout).splitlines() if proc.returncode == 0 else []
