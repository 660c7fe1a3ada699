"""What git checkout clears once HEAD is where it goes: an unfinished merge's, cherry-pick's
or revert's state (branch.c ``remove_branch_state``, sequencer.c
``sequencer_post_commit_cleanup``, git 2.39), which a later ``git commit`` would otherwise
take for its own (a merge commit with a parent from before the checkout).

git's own checkout (git's writer without ``--force``) clears them itself; this is for
every other checkout, the same files in the work tree's git dir.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from pcheckout.errors import decode
from pcheckout.git.runner import Git

#: branch.c remove_branch_state(): SQUASH_MSG; remove_merge_branch_state(): the merge's.
_MERGE_STATE = ("SQUASH_MSG", "MERGE_HEAD", "MERGE_RR", "MERGE_MSG", "MERGE_MODE", "AUTO_MERGE")

#: sequencer.c sequencer_post_commit_cleanup(): the pseudo-refs it deletes, with its warning.
_PICKS = (
    ("CHERRY_PICK_HEAD", "warning: cancelling a cherry picking in progress"),
    ("REVERT_HEAD", "warning: cancelling a revert in progress"),
)

#: sequencer.c apply_save_autostash_oid(): what git says storing a merge's autostash.
_STASHED = (
    "Autostash exists; creating a new stash entry.",
    "Your changes are safe in the stash.",
    'You can run "git stash pop" or "git stash drop" at any time.',
)


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def picks(git_dir: Path) -> list[str]:
    """The warnings clearing ``git_dir`` will give for a cherry-pick or revert in progress
    (git's own checkout, run quietly by git's writer, says none: they are said for it)."""
    return [warning for name, warning in _PICKS if (git_dir / name).exists()]


def clear(git: Git, git_dir: Path) -> list[str]:
    """Clear the state in ``git_dir`` as git checkout does after moving HEAD; git's lines
    to say (a cherry-pick cancelled, an autostash stored)."""
    try:  # one listing, not an unlink per name (each a round trip on a network mount)
        present = set(os.listdir(git_dir))
    except OSError:
        return []
    said: list[str] = []
    picked = False
    for name, warning in _PICKS:
        if name in present and _unlink(git_dir / name):
            said.append(warning)
            picked = True
    if picked and _last_pick(git_dir):
        import shutil  # (not imported ahead: a cherry-pick's state is rare; ~3 ms of a start)

        shutil.rmtree(git_dir / "sequencer", ignore_errors=True)
    for name in _MERGE_STATE:
        if name in present:
            _unlink(git_dir / name)
    if "MERGE_AUTOSTASH" in present:
        said += _store_autostash(git, git_dir / "MERGE_AUTOSTASH")
    return said


def _last_pick(git_dir: Path) -> bool:
    """sequencer.c have_finished_the_last_pick(): the todo list holds one line at most."""
    try:
        todo = (git_dir / "sequencer" / "todo").read_bytes()
    except OSError:
        return False
    _, _, rest = todo.partition(b"\n")
    return not rest


def _store_autostash(git: Git, path: Path) -> list[str]:
    """A merge's autostash kept as a stash entry (branch.c save_autostash())."""
    try:
        oid = decode(path.read_bytes()).strip()
    except OSError:
        return []
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    if not oid:
        return []
    proc = git.run("stash", "store", "-m", "autostash", "-q", oid, ok_codes=(0, 1, 128))
    if proc.returncode != 0:
        return [f"error: cannot store {oid}"]
    return list(_STASHED)
