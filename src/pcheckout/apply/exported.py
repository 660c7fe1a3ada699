"""What an export needs besides the blobs: the git whose filters read the attributes
git archive would, the export-subst files' final bytes (archive.c:
``object_file_to_archive``), and, whichever writer wrote it, the members' times as
``tar -x`` sets them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from pcheckout.context import Context
from pcheckout.decide.plan import Plan
from pcheckout.fs import untar
from pcheckout.git import archive, attributes
from pcheckout.git.catfile import CatFile, Spawn
from pcheckout.git.runner import GIT_ATTR_SOURCE, Git
from pcheckout.git.tree import Entry

__all__ = ["filters_git", "finish_members", "substituted"]


def filters_git(ctx: Context, plan: Plan) -> tuple[Git, bool]:
    """The git that runs ``cat-file --filters`` for paths git converts, reading the
    attributes git archive would (and whether write_tree should point it at the tree).

    With --worktree-attributes: the repository's own work tree.  git >= 2.41:
    ``--attr-source=TREE`` (write_tree adds it).  Older gits read attributes only from
    a work tree (cat-file never loads an index): a private one holding nothing but the
    tree's .gitattributes, as stored."""
    assert plan.export is not None
    git, repo = ctx.git, ctx.repo
    worktree = plan.export.worktree_attributes
    attrs = plan.export.attributes
    top = repo.work_tree if repo.work_tree is not None else repo.git_dir
    if worktree or attrs is None or git.has(GIT_ATTR_SOURCE):
        runner = Git(top, debug=git.debug, env=dict(ctx.environ), version=git.version)
        return runner, not worktree
    work = os.path.join(attrs.scratch, "work")
    os.makedirs(work, exist_ok=True)
    _materialize_attributes(git, plan.tree_entries or (), os.fsencode(work), ctx.spawn)
    env = {
        **ctx.environ,
        "GIT_DIR": str(repo.git_dir),
        "GIT_WORK_TREE": work,
        "GIT_INDEX_FILE": os.path.join(attrs.scratch, "no-index"),
    }
    return Git(Path(work), debug=git.debug, env=env, version=git.version), False


def _materialize_attributes(
    git: Git, entries: Sequence[Entry], root: bytes, spawn: Spawn | None
) -> None:
    """The tree's regular .gitattributes files under ``root``, as stored."""
    todo = [e for e in entries if attributes.is_gitattributes(e.path) and attributes.convertible(e)]
    if not todo:
        return
    plain = CatFile(git, spawn=spawn, name="cat-file (attributes)")
    try:
        for e in todo:
            plain.send(plain.request_line(e.oid))
            _kind, size = plain.read_header(e.oid)
            path = root + b"/" + e.path
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(plain.read_small(size))
    finally:
        plain.close()


def substituted(ctx: Context, filters: Git, plan: Plan) -> dict[int, bytes]:
    """The final bytes of each export-subst file: converted as checkout converts it, then
    every ``$Format:...$`` expanded (none without a commit, as in git archive)."""
    assert plan.export is not None and plan.conversion is not None
    if plan.commit is None or not plan.export.subst:
        return {}
    subst = archive.Substituter(ctx.git, plan.commit)
    out: dict[int, bytes] = {}
    plain = CatFile(ctx.git, spawn=ctx.spawn, name="cat-file (export-subst)")
    try:
        for k in plan.export.subst:
            e = plan.entries[k]
            plain.send(plain.request_line(e.oid))
            _kind, size = plain.read_header(e.oid)
            data = plain.read_small(size)
            conv = plan.conversion.per_entry[k]
            if conv is not None and conv.by_git:
                data = filters.out("cat-file", "--filters", f"--path={os.fsdecode(e.path)}", e.oid)
            elif conv is not None:
                data = conv.apply(data, e.oid)
            out[k] = subst(data)
    finally:
        plain.close()
    return out


def finish_members(plan: Plan) -> None:
    """Every member's mtime, as ``tar -x`` sets it from git archive's: the entries
    written, the directories holding them and those written empty (the destination
    itself is no member); the directories that were already there get a member's mode."""
    assert plan.export is not None
    root = os.fsencode(plan.root)
    untar.set_modes(root, plan.export.existing_dirs, 0o777 & ~plan.export.umask)
    dirs = archive.directories(plan.entries)
    paths = [e.path for e in plan.entries] + dirs + plan.export.empty_dirs
    workers = plan.workers.workers if plan.fs.latency_bound else 1
    untar.set_times(root, paths, plan.export.mtime, workers, plan.min_share)
