"""Write a tree alone into a directory: ``export(options, reporter)``.

No .git, no index, no HEAD: like ``git archive REV | tar -x``.  In order:

1. open the repository, read config, resolve REV to a tree and list it;
2. refuse unsafe trees and a destination that is not empty;
3. detect the filesystem and plan the writers (``--dry-run`` stops here);
4. write every entry in parallel (``write/worktree.py``); a partial clone's
   missing blobs are fetched in batches meanwhile (``write/partial.py``); or git writes
   them where the plan chose git's writer (``write/gitwriter.py``).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from pcheckout.context import Context, NullReporter, Reporter
from pcheckout.errors import DestinationError, WorktreeNotEmptyError, quote_paths
from pcheckout.git import attributes
from pcheckout.git.config import read_config
from pcheckout.git.objects import resolve
from pcheckout.git.pathsafety import check_entries
from pcheckout.git.promisor import promisor_remotes
from pcheckout.git.runner import Git, discover
from pcheckout.git.tree import list_tree
from pcheckout.options import ExportOptions, Result
from pcheckout.plan.planner import plan_for
from pcheckout.write.gitwriter import export_by_git
from pcheckout.write.partial import select, write_selected
from pcheckout.write.worktree import WriteRequest, occupants

__all__ = ["ExportOptions", "export"]


def export(opts: ExportOptions, ui: Reporter | None = None) -> Result:
    ui = ui or NullReporter()
    git = Git(opts.repository, debug=ui.debug)
    repo = discover(git)
    config = read_config(git)
    tree = resolve(git, opts.rev, "tree")
    # A partial clone lacks blobs: ls-tree -l would fetch each one for its size.
    entries = list_tree(git, tree, sizes=opts.dry_run and not promisor_remotes(config))
    check_entries(entries, config)
    dest = Path(os.path.abspath(opts.destination))
    _check_destination(dest)
    nbytes = sum(max(e.size, 0) for e in entries)
    fs, plan = plan_for(
        dest, entries=len(entries), nbytes=nbytes, workers=opts.workers,
        environ=opts.environ, config=config, adapt=opts.adapt, writer=opts.writer,
        git_version=git.version,
    )
    conversion = attributes.conversion_reasons(entries, config, repo.common_dir)
    sel = select(Context(git, repo, config, ui, opts.environ, opts.spawn), entries, None)
    result = Result(
        "export", len(entries), nbytes, plan, fs, dry_run=opts.dry_run, conversion=conversion,
        fetch_blobs=len(sel.missing),
    )
    if opts.dry_run:
        return result
    dest.mkdir(parents=True, exist_ok=True)
    if plan.writer == "git":
        t0 = time.monotonic()
        done = export_by_git(git, repo.git_dir, tree, dest, plan, ui, opts.environ)
        result.seconds = time.monotonic() - t0
        result.bytes = -1  # not counted: git does not say
        result.written = done.updated if done.updated >= 0 else len(entries)
        return result
    # Attributes are looked up in the work tree: point git at the destination
    # and run it from there (from outside, git finds no attributes at all).
    # No index: attributes must come from the exported tree alone, never from
    # the source repository's index (git < 2.40 falls back to it).
    with tempfile.TemporaryDirectory(prefix="pcheckout-export-") as scratch:
        git_w = Git(
            dest,
            debug=ui.debug,
            env={
                **opts.environ,
                "GIT_DIR": str(repo.git_dir),
                "GIT_WORK_TREE": str(dest),
                "GIT_INDEX_FILE": os.path.join(scratch, "no-index"),
            },
            version=git.version,
        )
        ctx = Context(git_w, repo, config, ui, opts.environ, opts.spawn)
        t0 = time.monotonic()
        outcome, fetched = write_selected(
            ctx, WriteRequest(tree, entries, dest, plan, conversion=bool(conversion)), sel,
            latency_bound=bool(fs.latency_bound),
        )  # fmt: skip
        result.fetched_bytes, result.fetches = fetched.bytes, fetched.fetches
    result.seconds = time.monotonic() - t0
    result.bytes = outcome.bytes
    result.written = outcome.files
    result.adapt_summary = outcome.adapt_summary
    result.processes = outcome.processes
    return result


def _check_destination(dest: Path) -> None:
    if dest.exists():
        if not dest.is_dir():
            raise DestinationError(f"destination {dest} exists and is not a directory")
        occupied = occupants(dest, ignore_git=False)
        if occupied:
            raise WorktreeNotEmptyError(
                f"destination {dest} is not empty: " + quote_paths(occupied)
            )
