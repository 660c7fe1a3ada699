"""Plans written by pcheckout's engine (``write/``): the files in parallel, then the
index from the writers' stat data.

* a fresh checkout or a resume: the selected entries (a sparse cone; a partial clone's
  missing blobs fetched in batches meanwhile: ``write/partial.py``), each completed one
  recorded in the journal; the index with the skip-worktree bit for what is outside;
* a switch: its missing blobs fetched first (a failed fetch leaves the tree as it was),
  its deletes (in parallel) and the directories they leave empty, its conversion
  planned now (a changed .gitattributes may have been among the blobs fetched), then
  the entries it writes; the index keeps the stat data of the entries it kept;
* an export: the directories git archive writes empty, the export-subst files' final
  bytes, then every entry; no index.
"""

from __future__ import annotations

import dataclasses
import os

from pcheckout.apply import collided, submodules
from pcheckout.apply.exported import filters_git, substituted
from pcheckout.apply.job import Job, Written
from pcheckout.context import Context
from pcheckout.git import convert, lfs, lfshooks, lfsstage
from pcheckout.git.promisor import Fetched
from pcheckout.git.promisor import fetch as fetch_blobs
from pcheckout.write import partial
from pcheckout.write.engine import Outcome
from pcheckout.write.indexout import Outside, settle, write_fresh_index, write_switch_index
from pcheckout.write.remove import delete_parallel, remove_empty_dirs, rmdir_warning
from pcheckout.write.worktree import WriteRequest, merge_outcomes, write_tree

__all__ = ["write"]


def write(job: Job) -> Written:
    """Carry out ``job.plan`` by pcheckout's engine."""
    kind = job.plan.kind
    if kind == "export":
        return _export(job)
    if kind == "switch":
        return _switch(job)
    return _fresh(job)


def _fresh(job: Job) -> Written:
    """A fresh checkout's or a resume's entries (each recorded in the journal once
    complete), then the index from their stat data (committed through the lock)."""
    ctx, plan = job.ctx, job.plan
    assert plan.conversion is not None
    sel = plan.selection if plan.selection is not None else partial.select(ctx, plan.entries, None)
    lfs_fetch = None
    if plan.collisions is None:  # fetched while the rest is written
        lfs_fetch = _start_lfs_fetch(job, plan.conversion)
    else:  # (rounds of their own: fetched first)
        _fetch_lfs(ctx, plan.conversion, plan.commit)
    request = WriteRequest(
        plan.tree,
        plan.entries,
        plan.root,
        plan.workers,
        conversion=plan.conversion,
        resume=plan.kind == "resume",
        previous=plan.previous,
        journal=job.journal,
        stat_threads=plan.workers.workers if plan.fs.latency_bound else 1,
        catfiles=job.warm.catfiles if job.warm is not None else None,
        loose=job.warm.loose if job.warm is not None else None,
        lfs_read_ahead=plan.workers.workers if plan.fs.latency_bound else 0,
    )
    latency_bound = bool(plan.fs.latency_bound)
    hooks = _start_lfs_hooks(ctx, plan.conversion, lfs_fetch)
    try:
        if plan.collisions is not None:  # paths that fold together, on a folding destination
            outcome, fetched = collided.write_rounds(
                ctx, request, sel, plan.collisions, latency_bound
            )
        elif lfs_fetch is not None:
            outcome, fetched = _write_while_lfs_fetches(ctx, request, sel, lfs_fetch, latency_bound)
            lfs_fetch.keep(plan.workers.workers)  # (before the index records the checkout)
        else:  # (partial.write_selected looked up when called: tests wrap it)
            outcome, fetched = partial.write_selected(
                ctx, request, sel, latency_bound=latency_bound
            )
    except BaseException:
        if hooks is not None:
            hooks.kill()
        raise
    if job.journal is not None:
        job.journal.close()
    if hooks is not None:
        hooks.wait()
    failed = submodules.move(ctx, plan.root, plan.submodules)
    settle(plan.fs, outcome)
    write_fresh_index(
        ctx,
        plan.entries,
        outcome,
        tree=plan.tree,
        outside=Outside(sel.skip_worktree, sel.sparsity),
        lock=job.lock,
    )
    collided.say(ctx, plan)
    return Written(
        outcome.files - outcome.kept,
        outcome.bytes,
        kept=outcome.kept,
        adapt_summary=outcome.adapt_summary,
        processes=outcome.processes,
        fetched=fetched,
        failed=tuple(failed),
        conversion=plan.conversion,  # (its LFS counts after the fetch)
    )


def _start_lfs_hooks(
    ctx: Context, conversion: convert.ConversionPlan, fetch: lfs.Fetch | None
) -> lfshooks.HookInstall | None:
    """:func:`_lfs_hooks` for a fresh checkout, started beside its writes: where LFS files
    will be written without git-lfs (from the local store, there already or ``fetch``ed)."""
    lfs_plan = conversion.lfs
    if lfs_plan is None or not (lfs_plan.local or lfs_plan.plain or fetch is not None):
        return None
    return lfshooks.HookInstall(ctx.git, ctx.repo, ctx.config)


def _lfs_hooks(ctx: Context, conversion: convert.ConversionPlan) -> None:
    """git-lfs's hooks where one is missing, as git-lfs's filter installs them when it
    starts, where LFS files were written without it."""
    hooks = _start_lfs_hooks(ctx, conversion, None)
    if hooks is not None:
        hooks.wait()


def _fetch_lfs(ctx: Context, conversion: convert.ConversionPlan, commit: str | None) -> None:
    """The Git LFS objects the checkout misses, fetched in one ``git lfs fetch`` before
    anything is written (a failure writes nothing), then written from the local store
    like the others (``git/lfs.py``).  Without a commit or a remote, git-lfs's filter
    fetches them, one file at a time, as before."""
    plan = conversion.lfs
    if plan is None or not plan.missing or commit is None or plan.refusal is not None:
        return
    remote = lfs.lfs_remote(ctx.config)
    if remote is None:
        return
    conversion.smudge_here(lfs.fetch_missing(ctx.git, plan, commit, remote))


def _start_lfs_fetch(job: Job, conversion: convert.ConversionPlan) -> lfs.Fetch | None:
    """The Git LFS objects the checkout misses, fetched on background threads while
    everything else is written (``git/lfs.py`` Fetch), into a local stage first where the
    repository is on a latency-bound mount (``git/lfsstage.py``); None where there is
    nothing to fetch here (without a commit or a remote git-lfs's filter fetches them, one
    file at a time, as before)."""
    ctx, entries, commit = job.ctx, job.plan.entries, job.plan.commit
    latency_bound = bool(job.plan.fs.latency_bound)
    plan = conversion.lfs
    if plan is None or not plan.missing or commit is None or plan.refusal is not None:
        return None
    remote = lfs.lfs_remote(ctx.config)
    if remote is None:
        return None
    paths = {i: entries[i].path for i in plan.missing}
    stage = None
    if latency_bound and plan.objects is not None:  # (see git/lfsstage.py)
        env = ctx.git.env if ctx.git.env is not None else ctx.environ
        stage = lfsstage.make(ctx.repo.git_dir, env, plan.missing_bytes)
    return lfs.Fetch(ctx.git, plan, lfs.Wanted(paths, commit, remote), stage).start()


def _write_while_lfs_fetches(
    ctx: Context,
    request: WriteRequest,
    sel: partial.Selection,
    fetch: lfs.Fetch,
    latency_bound: bool,
) -> tuple[Outcome, Fetched]:
    """Everything but the entries whose LFS object is being fetched, then, round after
    round, those whose fetch ended meanwhile (written from the local store like the
    others), and last any a fetch did not bring (git-lfs's filter decides).  A failed
    fetch raises after the round being written: no index records the checkout (a run of
    the same command after the server is back finishes it)."""
    conversion = request.conversion
    waiting = set(fetch.plan.missing)
    first = dataclasses.replace(sel, wanted=[i for i in sel.wanted if i not in waiting])
    # (a resume's later rounds replace what the interrupted run left of their files)
    again = dataclasses.replace(
        request, resume=False, overwrite=request.overwrite or request.resume, catfiles=None
    )
    wanted = set(sel.wanted)
    stats: list[bytes | None] = [None] * len(request.entries)
    outcomes: list[Outcome] = []

    def write(req: WriteRequest, part: partial.Selection) -> Fetched:
        out, fetched = partial.write_selected(ctx, req, part, latency_bound=latency_bound)
        outcomes.append(out)
        for i, st in enumerate(out.stats):
            if st is not None:
                stats[i] = st
        return fetched

    try:
        fetched = write(request, first)
        finished = False
        while not finished:
            got, finished = fetch.landed()
            conversion.smudge_here(got)
            rest = sorted(i for i in got if i in wanted)
            if rest:
                write(again, partial.Selection(rest, sel.skip_worktree))
                waiting.difference_update(rest)
    except BaseException:
        fetch.kill()
        raise
    conversion.smudge_here(fetch.wait())  # (all ended: what a list brought beyond its own)
    rest = sorted(i for i in waiting if i in wanted)
    if rest:
        write(again, partial.Selection(rest, sel.skip_worktree))
    return merge_outcomes(stats, outcomes), fetched


def _switch(job: Job) -> Written:
    """A switch: fetch, delete, write, then the index beside the kept entries."""
    ctx, plan = job.ctx, job.plan
    assert plan.selection is not None and plan.kept is not None
    sel = plan.selection
    fetched = Fetched()
    if sel.missing:  # before anything changes: a failed fetch leaves the tree as it was
        fetched = fetch_blobs(ctx.git, sel.remotes, sorted(sel.missing))
    root_b = os.fsencode(plan.root)
    failed = submodules.remove(ctx, plan.root, plan.submodules)
    left = delete_parallel(root_b, plan.delete, max(1, plan.workers.workers), plan.min_share)
    if left:  # a gitlink leaving the tree whose directory holds anything: git warns
        staying = {e.path for e in plan.entries}  # (a gitlink moved is written again)
        for path, exc in left:
            if path not in staying:
                ctx.ui.git_message(rmdir_warning(path, exc))
    remove_empty_dirs(root_b, set(plan.delete), plan.entries)
    conversion = convert.plan_conversion(
        ctx, plan.tree, plan.entries, tree_entries=plan.tree_entries
    )
    lfs_fetch = _start_lfs_fetch(job, conversion)
    if lfs_fetch is not None:  # the changed LFS files' missing objects, in a few batches
        try:
            conversion.smudge_here(lfs_fetch.wait())
        except BaseException:
            lfs_fetch.kill()
            raise
    request = WriteRequest(
        plan.tree,
        plan.entries,
        plan.root,
        plan.workers,
        conversion=conversion,
        lfs_read_ahead=plan.workers.workers if plan.fs.latency_bound else 0,
    )
    try:
        if plan.collisions is not None:  # paths that fold together, on a destination that folds
            done = dataclasses.replace(sel, missing=set())  # (fetched above)
            bound = bool(plan.fs.latency_bound)
            outcome, _ = collided.write_rounds(ctx, request, done, plan.collisions, bound)
        else:
            outcome = write_tree(ctx, request)
    except BaseException:
        if lfs_fetch is not None:
            lfs_fetch.close()  # (its stage, with the objects it fetched)
        raise
    if lfs_fetch is not None:
        lfs_fetch.keep(plan.workers.workers)  # (before the index records the switch)
    _lfs_hooks(ctx, conversion)
    failed += submodules.move(ctx, plan.root, plan.submodules)
    settle(plan.fs, outcome)
    write_switch_index(ctx, plan.entries, outcome, plan.kept, tree=plan.tree, lock=job.lock)
    return Written(
        len(plan.entries),
        outcome.bytes,
        adapt_summary=outcome.adapt_summary,
        processes=outcome.processes,
        fetched=fetched,
        conversion=conversion,
        failed=tuple(failed),
    )


def _export(job: Job) -> Written:
    """An export's entries, with what git archive writes besides them."""
    ctx, plan = job.ctx, job.plan
    assert plan.export is not None and plan.conversion is not None
    assert plan.selection is not None
    root_b = os.fsencode(plan.root)
    for d in plan.export.empty_dirs:
        os.makedirs(os.path.join(root_b, d), exist_ok=True)
    filters, tree_attributes = filters_git(ctx, plan)
    contents = substituted(ctx, filters, plan)
    request = WriteRequest(
        plan.tree,
        plan.entries,
        plan.root,
        plan.workers,
        conversion=plan.conversion,
        contents=contents,
        tree_attributes=tree_attributes,
        overwrite=plan.previous is not None,  # an interrupted export's files are replaced
    )
    outcome, fetched = partial.write_selected(
        ctx._replace(git=filters),
        request,
        plan.selection,
        latency_bound=bool(plan.fs.latency_bound),
    )
    return Written(
        outcome.files,
        outcome.bytes,
        adapt_summary=outcome.adapt_summary,
        processes=outcome.processes,
        fetched=fetched,
    )
