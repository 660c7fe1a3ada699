"""Write a tree alone into a directory: ``export(options, reporter)``.

No .git, no index, no HEAD: like ``git archive REV | tar -x``.  In order:

1. open the repository, read config, resolve REV to a tree (and its commit) and list it;
2. refuse unsafe trees and a destination that is not empty;
3. with attributes from the exported tree (``git/attributes.py``; the work tree's with
   ``--worktree-attributes``): leave out what ``export-ignore`` drops, decide each
   path's conversion, find the ``export-subst`` files (``git/archive.py``);
4. detect the filesystem and plan the writers (``--dry-run`` stops here);
5. expand the ``export-subst`` files' placeholders, then write every entry in
   parallel (``write/worktree.py``); a partial clone's missing blobs are fetched in
   batches meanwhile (``write/partial.py``); or git writes them where the plan chose
   git's writer and neither export-ignore nor export-subst changes anything
   (``write/gitwriter.py``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from pcheckout.context import Context, NullReporter, Reporter
from pcheckout.errors import DestinationError, WorktreeNotEmptyError, quote_paths
from pcheckout.fs.listing import occupants
from pcheckout.git import archive, attributes
from pcheckout.git.catfile import CatFile, Spawn
from pcheckout.git.config import read_config
from pcheckout.git.objects import batch_check, resolve
from pcheckout.git.pathsafety import check_entries
from pcheckout.git.promisor import missing_objects, promisor_remotes
from pcheckout.git.runner import GIT_ATTR_SOURCE, Git, Repo, discover
from pcheckout.git.tree import Entry, list_tree
from pcheckout.options import ExportOptions, Result
from pcheckout.plan.planner import plan_for
from pcheckout.write.gitwriter import export_by_git
from pcheckout.write.partial import select, write_selected
from pcheckout.write.worktree import WriteRequest

__all__ = ["ExportOptions", "export"]


def export(opts: ExportOptions, ui: Reporter | None = None) -> Result:
    ui = ui or NullReporter()
    git = Git(opts.repository, debug=ui.debug)
    repo = discover(git)
    config = read_config(git)
    tree, commit = _resolve(git, opts.rev)
    remotes = promisor_remotes(config)
    # A partial clone lacks blobs: ls-tree -l would fetch each one for its size.
    all_entries = list_tree(git, tree, sizes=opts.dry_run and not remotes)
    check_entries(all_entries, config)
    dest = Path(os.path.abspath(opts.destination))
    _check_destination(dest)
    sources = attributes.conversion_sources(all_entries, config, repo.common_dir, opts.environ)
    if opts.worktree_attributes and repo.work_tree is not None:
        sources.append("--worktree-attributes")
    absent: dict[bytes, str] = {}  # a dry run: directory -> its missing .gitattributes blob
    attrs_fetched: list[str] = []  # .gitattributes blobs fetched before the lookups
    if sources and not opts.worktree_attributes:
        if opts.dry_run:  # fetches nothing: what is below a missing one is not looked up
            files = attributes.attribute_files(all_entries)
            gone = set(missing_objects(git, [all_entries[i].oid for i in files])) if remotes else ()
            absent = {
                os.path.dirname(all_entries[i].path): all_entries[i].oid
                for i in files
                if all_entries[i].oid in gone
            }
        else:
            attrs_fetched = attributes.fetch_attributes(git, all_entries, remotes)
    attrs = (
        attributes.TreeAttributes(git, repo, tree, all_entries, worktree=opts.worktree_attributes)
        if sources
        else None
    )
    try:
        arch = _select(attrs, all_entries, sources, config, commit is not None, set(absent))
        entries = arch.entries
        nbytes = sum(max(e.size, 0) for e in entries)
        fs, plan = plan_for(
            dest,
            entries=len(entries),
            nbytes=nbytes,
            workers=opts.workers,
            environ=opts.environ,
            config=config,
            adapt=opts.adapt,
            writer=opts.writer,
            git_version=git.version,
        )
        fetching = select(Context(git, repo, config, ui, opts.environ, opts.spawn), entries, None)
        result = Result(
            "export",
            len(entries),
            nbytes,
            plan,
            fs,
            dry_run=opts.dry_run,
            fetch_blobs=len(fetching.missing | set(absent.values())) + len(attrs_fetched),
        )
        result.add_conversion(arch.conversion)
        result.export_ignored = len(all_entries) - len(entries)
        result.export_subst = len(arch.subst) if commit is not None else 0
        if opts.dry_run:
            return result
        dest.mkdir(parents=True, exist_ok=True)
        if plan.writer == "git" and len(entries) == len(all_entries) and not result.export_subst:
            # git's writer knows nothing of export-ignore and export-subst: only where
            # neither changes anything.
            t0 = time.monotonic()
            done = export_by_git(git, repo.git_dir, tree, dest, plan, ui, opts.environ,
                                 repo.object_format)  # fmt: skip
            result.seconds = time.monotonic() - t0
            result.bytes = done.bytes  # from the index git wrote; -1: unknown
            result.written = done.updated if done.updated >= 0 else len(entries)
            return result
        for d in arch.empty_dirs:
            os.makedirs(os.path.join(os.fsencode(dest), d), exist_ok=True)
        filters_git, tree_attributes = _filters_git(git, repo, opts, attrs, all_entries)
        contents: dict[int, bytes] = {}
        if commit is not None and arch.subst:
            contents = _substituted(git, filters_git, entries, arch, commit, opts.spawn)
        ctx = Context(filters_git, repo, config, ui, opts.environ, opts.spawn)
        t0 = time.monotonic()
        outcome, fetched = write_selected(
            ctx,
            WriteRequest(
                tree,
                entries,
                dest,
                plan,
                conversion=arch.conversion,
                contents=contents,
                tree_attributes=tree_attributes,
            ),
            fetching,
            latency_bound=bool(fs.latency_bound),
        )
        result.fetched_bytes, result.fetches = fetched.bytes, fetched.fetches
    finally:
        if attrs is not None:
            attrs.close()
    result.seconds = time.monotonic() - t0
    result.bytes = outcome.bytes
    result.written = outcome.files
    result.adapt_summary = outcome.adapt_summary
    result.processes = outcome.processes
    return result


def _resolve(git: Git, rev: str) -> tuple[str, str | None]:
    """REV's tree, and its commit when it names one (a tree has none: nothing is
    substituted, as in git archive); one git process."""
    if not rev or rev.startswith("-") or "\n" in rev:
        return resolve(git, rev, "tree"), None
    found = batch_check(git, [f"{rev}^{{tree}}", f"{rev}^{{commit}}"])
    if found[0] is None:
        return resolve(git, rev, "tree"), None  # raises git's own "unknown revision"
    return found[0][0], found[1][0] if found[1] is not None else None


@dataclass
class _Selection:
    """What an archive of the tree holds and how each entry is converted."""

    entries: list[Entry]
    conversion: attributes.ConversionPlan
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
        return _Selection(
            entries, attributes.ConversionPlan(sources, [None] * len(entries)), [], []
        )
    dirs = archive.directories(entries)
    names = attributes.CONVERT_ATTRS + attributes.ARCHIVE_ATTRS
    paths = [e.path for e in entries] + [d + b"/" for d in dirs]
    if unknown_dirs:
        blank: tuple[attributes.AttrValue, ...] = (None,) * len(names)
        known = [k for k, p in enumerate(paths) if not _below(p, unknown_dirs)]
        found = attrs.lookup([paths[k] for k in known], names)
        rows = [blank] * len(paths)
        for k, row in zip(known, found, strict=True):
            rows[k] = row
        unknown = sum(
            1 for k in range(len(entries))
            if attributes.convertible(entries[k]) and _below(paths[k], unknown_dirs)
        )  # fmt: skip
    else:
        rows = attrs.lookup(paths, names)
        unknown = 0
    n_conv = len(attributes.CONVERT_ATTRS)
    dropped = archive.ignored_dirs(dirs, [r[n_conv] is True for r in rows[len(entries) :]])
    keep = archive.kept(entries, [r[n_conv] is True for r in rows[: len(entries)]], dropped)
    out = [entries[i] for i in keep]
    conv_rows = {
        k: rows[i][:n_conv] for k, i in enumerate(keep) if attributes.convertible(entries[i])
    }
    settings = attributes.Settings.from_config(config)
    plan = attributes.build_plan(sources, len(out), conv_rows, settings)
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


def _filters_git(
    git: Git,
    repo: Repo,
    opts: ExportOptions,
    attrs: attributes.TreeAttributes | None,
    entries: list[Entry],
) -> tuple[Git, bool]:
    """The git that runs ``cat-file --filters`` for paths git converts, reading the
    attributes git archive would (and whether write_tree should point it at the tree).

    With --worktree-attributes: the repository's own work tree.  git >= 2.41:
    ``--attr-source=TREE`` (write_tree adds it).  Older gits read attributes only from
    a work tree (cat-file never loads an index): a private one holding nothing but the
    tree's .gitattributes, as stored."""
    top = repo.work_tree if repo.work_tree is not None else repo.git_dir
    if opts.worktree_attributes or attrs is None or git.has(GIT_ATTR_SOURCE):
        return Git(top, debug=git.debug, env=opts.environ, version=git.version), (
            not opts.worktree_attributes
        )
    scratch = attrs.scratch
    work = os.path.join(scratch, "work")
    os.makedirs(work, exist_ok=True)
    _materialize_attributes(git, entries, os.fsencode(work), opts.spawn)
    env = {
        **opts.environ,
        "GIT_DIR": str(repo.git_dir),
        "GIT_WORK_TREE": work,
        "GIT_INDEX_FILE": os.path.join(scratch, "no-index"),
    }
    return Git(Path(work), debug=git.debug, env=env, version=git.version), False


def _materialize_attributes(
    git: Git, entries: list[Entry], root: bytes, spawn: Spawn | None
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


def _substituted(
    git: Git,
    filters_git: Git,
    entries: list[Entry],
    sel: _Selection,
    commit: str,
    spawn: Spawn | None,
) -> dict[int, bytes]:
    """The final bytes of each export-subst file: converted as checkout converts it,
    then every ``$Format:...$`` expanded (archive.c: object_file_to_archive)."""
    subst = archive.Substituter(git, commit)
    out: dict[int, bytes] = {}
    plain = CatFile(git, spawn=spawn, name="cat-file (export-subst)")
    try:
        for k in sel.subst:
            e = entries[k]
            plain.send(plain.request_line(e.oid))
            _kind, size = plain.read_header(e.oid)
            data = plain.read_small(size)
            conv = sel.conversion.per_entry[k]
            if conv is not None and conv.by_git:
                data = filters_git.out(
                    "cat-file", "--filters", f"--path={os.fsdecode(e.path)}", e.oid
                )
            elif conv is not None:
                data = conv.apply(data, e.oid)
            out[k] = subst(data)
    finally:
        plain.close()
    return out


def _check_destination(dest: Path) -> None:
    if dest.exists():
        if not dest.is_dir():
            raise DestinationError(f"destination {dest} exists and is not a directory")
        occupied = occupants(dest, ignore_git=False)
        if occupied:
            raise WorktreeNotEmptyError(
                f"destination {dest} is not empty: " + quote_paths(occupied)
            )
