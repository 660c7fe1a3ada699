"""Decide an export: REV's tree alone into a directory, as ``git archive REV | tar -x``.

In order: open the repository, read config, resolve REV to a tree (and its commit) and
list it; refuse unsafe trees and a destination that is not empty (unless an interrupted
export left its marker there: the re-run finishes it, removing what earlier runs of other
trees wrote); with attributes from
the exported tree (``git/attributes.py``; the work tree's with ``--worktree-attributes``)
leave out what ``export-ignore`` drops, decide each path's conversion and find the
``export-subst`` files (``git/archive.py``); plan the writers.  A partial clone's
missing ``.gitattributes`` blobs alone are fetched (the lookups read them).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import NamedTuple

from pcheckout.context import Context, Reporter
from pcheckout.decide.leftovers import left_behind
from pcheckout.decide.plan import Counts, Export, Plan
from pcheckout.decide.worktree import Look, Threads
from pcheckout.errors import DestinationError, WorktreeNotEmptyError, quote_paths
from pcheckout.fs import untar
from pcheckout.fs.listing import occupants
from pcheckout.git import archive, attributes, convert
from pcheckout.git.config import read_config
from pcheckout.git.objects import batch_check, resolve
from pcheckout.git.pathsafety import check_entries
from pcheckout.git.promisor import missing_objects, promisor_remotes
from pcheckout.git.runner import Git, Repo, discover
from pcheckout.git.tree import MODE_GITLINK, Entry, list_tree
from pcheckout.options import ExportOptions
from pcheckout.plan.planner import Asked, plan_for
from pcheckout.write import journal
from pcheckout.write.partial import select

__all__ = ["EXPORT_MARKER", "decide"]

#: Left in an export's destination while it is written (a journal's header naming the
#: tree, ``write/journal.py``): a re-run that finds it finishes the export.
EXPORT_MARKER = ".pcheckout-export-in-progress"


def decide(opts: ExportOptions, ui: Reporter) -> tuple[Context, Plan]:
    """The repository's context and the plan of the export ``opts`` asks for.  The plan
    holds the tree's attributes (``plan.export.attributes``): the caller closes them."""
    git = Git(opts.repository, debug=ui.debug)
    repo = discover(git)
    # git archive writes a symlink as one whatever core.symlinks says
    config = {**read_config(git), "core.symlinks": "true"}
    ctx = Context(git, repo, config, ui, opts.environ, opts.spawn)
    began = int(time.time())  # a tree's members' mtime (archive.c: time(NULL))
    tree, commit = _resolve(git, opts.rev)
    tree = _below_cwd(git, repo, tree)
    remotes = promisor_remotes(config)
    # A partial clone lacks blobs: ls-tree -l would fetch each one for its size.
    all_entries = list_tree(git, tree, sizes=opts.dry_run and not remotes)
    check_entries(all_entries, config)
    dest = Path(os.path.abspath(opts.destination))
    previous = _check_destination(dest)
    sources = attributes.conversion_sources(all_entries, config, repo.common_dir, opts.environ)
    if opts.worktree_attributes and repo.work_tree is not None:
        sources.append("--worktree-attributes")
    looked = _before_lookup(ctx, opts, all_entries, bool(sources), remotes)
    attrs = (
        attributes.TreeAttributes(git, repo, tree, all_entries, worktree=opts.worktree_attributes)
        if sources
        else None
    )
    try:
        arch = _select(attrs, all_entries, sources, config, commit is not None, set(looked.absent))
        mtime = began if commit is None or opts.dry_run else archive.commit_time(git, commit)
        decided = _Decided(tree, commit, dest, all_entries, arch, attrs, previous, mtime)
        decided = decided._replace(existing=_in_the_way(git, decided))
        return ctx, _plan(ctx, opts, decided, looked)
    except BaseException:
        if attrs is not None:
            attrs.close()
        raise


class _Looked(NamedTuple):
    """What was done about a partial clone's .gitattributes before the lookups."""

    absent: dict[bytes, str]  # a dry run: directory -> its missing .gitattributes blob
    fetched: list[str]  # .gitattributes blobs fetched before the lookups


def _before_lookup(
    ctx: Context, opts: ExportOptions, entries: list[Entry], sources: bool, remotes: list[str]
) -> _Looked:
    """A partial clone's missing .gitattributes: fetched before the lookups read them; a
    dry run fetches nothing, and what is below a missing one is not looked up."""
    if not sources or opts.worktree_attributes:
        return _Looked({}, [])
    if not opts.dry_run:
        return _Looked({}, attributes.fetch_attributes(ctx.git, entries, remotes))
    files = attributes.attribute_files(entries)
    gone = set(missing_objects(ctx.git, [entries[i].oid for i in files])) if remotes else ()
    absent = {
        os.path.dirname(entries[i].path): entries[i].oid for i in files if entries[i].oid in gone
    }
    return _Looked(absent, [])


class _Decided(NamedTuple):
    """What the export writes, before the writers are planned."""

    tree: str
    commit: str | None
    dest: Path
    all_entries: list[Entry]  # the whole tree
    arch: _Selection  # what of it an archive holds, and how each entry converts
    attrs: attributes.TreeAttributes | None
    previous: journal.Previous | None  # an interrupted export's marker, if it left one
    mtime: int  # every member's (git archive's): the commit's date, or when a tree began
    existing: list[bytes] = []  # its directories the destination already holds


def _plan(ctx: Context, opts: ExportOptions, d: _Decided, looked: _Looked) -> Plan:
    entries = d.arch.entries
    nbytes = sum(max(e.size, 0) for e in entries)
    asked = Asked(opts.workers, opts.writer, opts.adapt, opts.environ, ctx.config, ctx.git.version)
    fs, workers = plan_for(d.dest, asked, entries=len(entries), nbytes=nbytes)
    fetching = select(ctx, entries, None)
    subst = len(d.arch.subst) if d.commit is not None else 0
    counts = Counts(
        len(entries),
        nbytes,
        fetch_blobs=len(fetching.missing | set(looked.absent.values())) + len(looked.fetched),
        export_ignored=len(d.all_entries) - len(entries),
        export_subst=subst,
    )
    export = Export(
        d.arch.subst,
        d.arch.empty_dirs,
        d.attrs,
        opts.worktree_attributes,
        # (an interrupted export is finished by the engine: it writes over what is there)
        git_can_write=len(entries) == len(d.all_entries) and not subst and d.previous is None,
        umask=untar.extract_umask(archive.tar_umask(ctx.config, untar.process_umask())),
        mtime=d.mtime,
        existing_dirs=d.existing,
    )
    return Plan(
        "export",
        d.dest,
        d.tree,
        entries,
        workers,
        fs,
        counts,
        dry_run=opts.dry_run,
        selection=fetching,
        conversion=d.arch.conversion,
        commit=d.commit,
        tree_entries=d.all_entries,
        export=export,
        delete=[] if opts.dry_run else _left_by_earlier_runs(ctx, d, d.previous, workers.workers),
        previous=d.previous,
        earlier=d.previous.trees if d.previous is not None else (),
    )


def _resolve(git: Git, rev: str) -> tuple[str, str | None]:
    """REV's tree, and its commit when it names one (a tree has none: nothing is
    substituted, as in git archive), as archive.c ``parse_treeish_arg`` finds them,
    with its words where it dies; one git process where REV has no ``:`` path."""
    if not rev or rev.startswith("-") or "\n" in rev:
        return resolve(git, rev, "tree"), None
    found = batch_check(git, [rev, f"{rev}^{{tree}}", f"{rev}^{{commit}}"])
    if found[0] is None:
        raise archive.ArchiveError(f"not a valid object name: {rev}")
    oid, kind = found[0]
    if kind == "tree":
        return oid, None
    if ":" in rev:  # (REV^{tree} would name the path "PATH^{tree}")
        found = [found[0], *batch_check(git, [f"{oid}^{{tree}}", f"{oid}^{{commit}}"])]
    if found[1] is None:
        raise archive.ArchiveError(f"not a tree object: {oid}")
    return found[1][0], found[2][0] if found[2] is not None else None


def _below_cwd(git: Git, repo: Repo, tree: str) -> str:
    """Run in a subdirectory of the work tree, git archive writes that directory's
    subtree alone, its paths (and attributes) from there (archive.c
    ``parse_treeish_arg``); the commit stays REV's."""
    if repo.work_tree is None:
        return tree
    here, top = os.path.realpath(git.cwd), os.path.realpath(repo.work_tree)
    inside = os.path.realpath(repo.git_dir)
    if here == top or not here.startswith(top + os.sep) or here.startswith(inside + os.sep):
        return tree
    prefix = os.path.relpath(here, top)
    if "\n" in prefix:
        raise archive.ArchiveError("current working directory is untracked")
    (found,) = batch_check(git, [f"{tree}:{prefix}"])
    if found is None or found[1] != "tree":
        raise archive.ArchiveError("current working directory is untracked")
    return found[0]


class _Selection(NamedTuple):
    """What an archive of the tree holds and how each entry is converted."""

    entries: list[Entry]
    conversion: convert.ConversionPlan
    subst: list[int]  # indexes (into entries) of export-subst regular files, in tree order
    empty_dirs: list[bytes]  # directories git archive writes although nothing kept is in them


def _select(
    attrs: attributes.TreeAttributes | None,
    entries: list[Entry],
    sources: list[str],
    config: dict[str, str],
    has_commit: bool,
    unknown_dirs: set[bytes] | None = None,
) -> _Selection:
    """export-ignore drops entries and subtrees; conversion and export-subst per entry
    (archive.c: write_archive_entry, queue_or_write_archive_entry).  One check-attr.
    ``unknown_dirs``: directories whose .gitattributes is missing (a dry run in a partial
    clone): paths below them are not looked up (kept, conversion unknown)."""
    if attrs is None:
        return _Selection(entries, convert.ConversionPlan(sources, [None] * len(entries)), [], [])
    dirs = archive.directories(entries)
    names = convert.CONVERT_ATTRS + attributes.ARCHIVE_ATTRS
    paths = [e.path for e in entries] + [d + b"/" for d in dirs]
    if unknown_dirs:
        blank: tuple[attributes.AttrValue, ...] = (None,) * len(names)
        known = [k for k, p in enumerate(paths) if not _below(p, unknown_dirs)]
        found = attrs.lookup([paths[k] for k in known], names)
        rows = [blank] * len(paths)
        for k, row in zip(known, found, strict=True):
            rows[k] = row
        unknown = sum(
            1
            for k in range(len(entries))
            if attributes.convertible(entries[k]) and _below(paths[k], unknown_dirs)
        )
    else:
        rows = attrs.lookup(paths, names)
        unknown = 0
    n_conv = len(convert.CONVERT_ATTRS)
    dropped = archive.ignored_dirs(dirs, [r[n_conv] is True for r in rows[len(entries) :]])
    keep = archive.kept(entries, [r[n_conv] is True for r in rows[: len(entries)]], dropped)
    out = [entries[i] for i in keep]
    conv_rows = {
        k: rows[i][:n_conv] for k, i in enumerate(keep) if attributes.convertible(entries[i])
    }
    settings = convert.Settings.from_config(config)
    plan = convert.build_plan(sources, len(out), conv_rows.items(), settings)
    plan.unknown = unknown
    subst = [
        k
        for k, i in enumerate(keep)
        if has_commit and archive.substitutable(entries[i]) and rows[i][n_conv + 1] is True
    ]
    return _Selection(out, plan, subst, archive.empty_dirs(entries, keep, dropped))


def _below(path: bytes, dirs: set[bytes]) -> bool:
    """Whether looking up ``path`` ("d/" for a directory) reads a .gitattributes of one
    of ``dirs`` (its own directory's or an ancestor's; b"" is the top)."""
    d = os.path.dirname(path.rstrip(b"/")) if not path.endswith(b"/") else path.rstrip(b"/")
    while True:
        if d in dirs:
            return True
        if not d:
            return False
        d = os.path.dirname(d)


def _check_destination(dest: Path) -> journal.Previous | None:
    """Refuse a destination that is not a directory; what an interrupted export's marker
    says, if one left it there (the re-run finishes it)."""
    if not dest.exists():
        return None
    if not dest.is_dir():
        raise DestinationError(f"destination {dest} exists and is not a directory")
    marker = dest / EXPORT_MARKER
    if marker.exists():
        previous = journal.read(marker)
        if previous is not None and previous.kind == "export":
            return previous
        raise WorktreeNotEmptyError(f"destination {dest} holds {EXPORT_MARKER} (not pcheckout's)")
    return None


def _in_the_way(git: Git, d: _Decided) -> list[bytes]:
    """The directories of the export that ``d.dest`` already holds (tar -x keeps them);
    refuse where it holds anything else at a path the export writes, which tar -x would
    replace: pcheckout never writes over a file it did not write.  What an interrupted
    export of another tree may have written there is its own, to be replaced."""
    if not d.dest.is_dir() or not occupants(d.dest, ignore_git=False):
        return []
    entries = d.arch.entries
    files = {e.path for e in entries if e.mode != MODE_GITLINK}
    dirs = (
        set(archive.directories(entries))
        | set(d.arch.empty_dirs)
        | {e.path for e in entries if e.mode == MODE_GITLINK}
    )
    found = untar.overlap(os.fsencode(d.dest), files, dirs)
    theirs: set[bytes] = set()
    for tree in d.previous.trees if d.previous is not None else ():
        if tree != d.tree:
            earlier = list_tree(git, tree)
            theirs.update(e.path for e in earlier)
            theirs.update(archive.directories(earlier))
    if d.previous is not None and d.tree in d.previous.trees:
        theirs.update(files)  # (the interrupted run of this tree wrote them)
    in_the_way = [p for p in found.in_the_way if p not in theirs]
    if in_the_way:
        raise WorktreeNotEmptyError(
            f"destination {d.dest} already holds what the export writes: "
            + quote_paths(in_the_way)
            + " (tar -x would replace them; pcheckout writes over no file it did not write)"
        )
    return found.directories


def _left_by_earlier_runs(
    ctx: Context, d: _Decided, previous: journal.Previous | None, threads: int
) -> list[bytes]:
    """The files interrupted exports of other trees left that this export lacks: their
    own (as their tree has them, or cut short) go; one changed since stays."""
    if previous is None or all(t == d.tree for t in previous.trees):
        return []
    # git hashes and smudges the destination's files as a work tree of the repository
    env = {**(ctx.git.env or os.environ), "GIT_DIR": str(ctx.repo.git_dir)}
    env["GIT_WORK_TREE"] = str(d.dest)
    git = ctx.git.replace(cwd=d.dest, env=env)
    scratch = d.dest / EXPORT_MARKER  # (no index: nothing is racily clean)
    look = Look(git, os.fsencode(d.dest), scratch, ctx.repo.object_format, Threads(threads))
    return left_behind(look, previous.trees, d.tree, d.arch.entries)
