"""Check a commit out into a working tree: ``checkout(options, reporter)``.

It never reads ``sys.argv`` or prints.  A fresh checkout, in order:

1. open the repository: config and REV resolved side by side (``_open``);
2. list the target tree, refuse unsafe trees and occupied destinations
   (a populated tree with an index is a switch: ``switch.py``);
3. select what is written: a sparse checkout's cone, and which of its blobs a
   partial clone still lacks (``write/partial.py``);
4. detect the filesystem and plan the writers (``plan/planner.py``) for what
   is written; ``--dry-run`` stops here;
5. mark the run as in progress, so an interrupted one resumes: the marker is
   a journal of the entries completed (``write/journal.py``);
6. write the selected entries in parallel (``write/worktree.py``), converting only
   the paths whose attributes call for it (``git/attributes.py``), fetching missing
   blobs in batches meanwhile; or, where the plan chose
   git's writer, let git write them and the index (``write/gitwriter.py``);
7. write the index from the writers' stat data, entries outside the cone with
   the skip-worktree bit (``write/indexout.py``);
8. move HEAD as ``git checkout REV`` would (``git/refs.py``).

``index.lock`` is held from step 1 (before the work tree is even looked at)
until the index is renamed into place in step 7, for a checkout, a resume and
a switch alike (``git/lock.py``): a second run fails at once with git's message.
git's writer writes a scratch index (``GIT_INDEX_FILE``) that is then renamed
into place through the lock.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pcheckout.context import Context, NullReporter, Reporter, both, concurrently
from pcheckout.errors import (
    DestinationError,
    GitError,
    Interrupted,
    WorktreeNotEmptyError,
    quote_paths,
)
from pcheckout.fs.listing import occupants
from pcheckout.git.config import config_bool, read_config
from pcheckout.git.indexsize import written_bytes
from pcheckout.git.lock import IndexLock, scratch_index
from pcheckout.git.pathsafety import check_entries, entries_look_safe, tree_names_look_safe
from pcheckout.git.promisor import local_objects, promisor_remotes
from pcheckout.git.refs import Target, resolve_target, update_head
from pcheckout.git.runner import MIN_GIT, Git, discover, git_version
from pcheckout.git.tree import (
    Entry,
    RootedListing,
    TreeChanges,
    list_paths,
    list_rooted,
    list_tree,
    tree_changes,
)
from pcheckout.options import CheckoutOptions, ExportOptions, Result
from pcheckout.plan.policy import PARALLEL_THRESHOLD, WorkerPlan
from pcheckout.write import gitwriter, journal
from pcheckout.write.gitwriter import Reporting, write_by_git

if TYPE_CHECKING:
    from pcheckout.fs.detect import FsInfo
    from pcheckout.git import attributes
    from pcheckout.git.catfile import Prestarted
    from pcheckout.git.sparse import Sparsity
    from pcheckout.write.partial import Selection

__all__ = ["IN_PROGRESS", "CheckoutOptions", "ExportOptions", "Result", "checkout"]

#: Marker left in the git dir while a checkout is writing; a re-run that finds
#: it resumes (verifies what is there, writes the rest) instead of refusing.
IN_PROGRESS = "pcheckout-in-progress"


class _State(NamedTuple):
    """What the destination holds before anything is written."""

    occupied: list[bytes]  # names in the work tree besides .git
    previous: journal.Previous | None  # an interrupted checkout's marker, if any
    switching: bool  # populated, with an index: an incremental switch
    listed: list[Entry] | None = None  # the target's entries, if listed beside round 1
    patterns: _Patterns | None = None  # the sparse pattern file, if read beside round 1

    @property
    def resume(self) -> bool:
        return bool(self.occupied) and self.previous is not None


def checkout(opts: CheckoutOptions, ui: Reporter | None = None) -> Result:
    ahead = _Ahead(opts)
    try:
        ctx, target, state, lock = _open(opts, ui or NullReporter())
        try:
            return _checkout(ctx, opts, target, state, lock, ahead)
        finally:
            if lock is not None:
                lock.rollback()  # unless committed with the index: then nothing is left
    finally:
        ahead.close()


def _checkout(
    ctx: Context,
    opts: CheckoutOptions,
    target: Target,
    state: _State,
    lock: IndexLock | None,
    ahead: _Ahead,
) -> Result:
    # A partial clone lacks blobs: ls-tree -l would fetch each one for its size; which
    # are local is listed beside the tree (each git process costs round trips on a mount).
    partial = bool(promisor_remotes(ctx.config))
    sizes = opts.dry_run and not partial
    if state.switching:
        # Who writes is known from the filesystem alone; git's writer (without --force) is
        # git's whole checkout: its two-way merge, its local-change protection and messages,
        # so neither tree is listed entry by entry for it (40k entries: ~60 ms each).
        fs, first = _plan_switch(ctx, opts, PARALLEL_THRESHOLD, ahead.finish(_work_tree(ctx)))
        if first.writer == "git" and not opts.force and not opts.dry_run:
            assert lock is not None  # taken by _open for every run that writes
            return _switch_by_git(ctx, opts, target, fs, lock)
    # A sparse checkout's pattern file is read beside the listing too (open, read and
    # close are ~4 round trips on a mount), or was beside round 1 with it.
    fresh = not state.switching
    sparse = fresh and config_bool(ctx.config.get("core.sparsecheckout"), False)
    (entries, head_entries), (have, sparsity) = both(
        lambda: _list(ctx, target, state, sizes),
        lambda: _beside_listing(ctx, partial and fresh, sparse, state.patterns),
    )
    check_entries(entries, ctx.config)
    if state.switching:
        return _switch(ctx, opts, target, entries, head_entries, fs, lock)
    root = _work_tree(ctx)
    if state.occupied and not state.resume:
        raise WorktreeNotEmptyError(
            f"working tree {root} is not empty and has no index: " + quote_paths(state.occupied)
        )
    sel = _select(ctx, entries, have, sparsity)
    wanted = range(len(entries)) if sel is None else sel.wanted
    # Sizes are listed for a dry run only (ls-tree -l reads every blob's header): otherwise
    # every size is -1 and the sum, 8 ms of Python at 40k entries, would be 0 anyway.
    nbytes = sum(max(entries[i].size, 0) for i in wanted) if sizes else 0
    from pcheckout.plan.planner import plan_for  # (imported beside round 1: _Ahead)

    fs, plan = plan_for(
        root,
        entries=len(wanted),
        nbytes=nbytes,
        workers=opts.workers,
        environ=opts.environ,
        config=ctx.config,
        adapt=opts.adapt,
        writer=opts.writer,
        git_version=ctx.git.version,
        processes=opts.processes,
        fs=ahead.finish(root),
    )
    catfiles = _prestart(ctx, plan, opts.dry_run, sel)
    try:
        return _plan_and_write(ctx, opts, target, state, entries, sel, plan, fs, nbytes,
                               lock, catfiles)  # fmt: skip
    finally:
        if catfiles is not None:
            catfiles.close()


#: The modules every checkout imports after round 1 (the planner with the detection, the
#: attributes): ~30 ms of imports on this VM, paid beside round 1 (``_Ahead``).
PLAN_MODULES = ("pcheckout.plan.planner", "pcheckout.git.attributes")

#: The modules pcheckout's engine path imports (and theirs): ~30 ms more, paid beside
#: round 1 only where the engine will write.
ENGINE_MODULES = (
    "pcheckout.write.partial",
    "pcheckout.write.indexout",
    "pcheckout.git.sparse",
    "pcheckout.git.catfile",
)


class _Ahead:
    """What a run does in a thread while round 1's git processes run (each spends tens of
    round trips on a network mount before it answers: round 1 took ~90-130 ms on the 1 ms
    latency mount): detect the destination's filesystem, import the modules every run
    needs next, and where the filesystem is latency-bound (so pcheckout's engine will
    write) the engine's, which the main thread then finds loaded.  Where git's writer runs
    (a local disk, tmpfs) the engine's are not imported: CPU spent before git's writer
    starts.  The package's imports run one way (no cycle), so importing from two threads
    cannot deadlock.

    The thread ends only when the main thread takes the filesystem (:meth:`finish`, once
    round 1 is over, before anything is written: forked writers need the process's other
    threads gone) or at :meth:`close`, if the run fails before: on Python 3.10 a thread's
    end is ``pthread_exit``, for which glibc may first load ``libgcc_s``, and with the
    open-file limit used up by round 1's pipes that aborts the process (SIGABRT after the
    error line: ``test_open_file_limit_too_low_for_one_worker`` failed 3 of 5 runs on 3.10
    while the thread ended on its own)."""

    def __init__(self, opts: CheckoutOptions) -> None:
        self._path = os.path.abspath(opts.directory)
        self._imports = not opts.dry_run and opts.writer != "git"
        self._fs: FsInfo | None = None
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pcheckout-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._work()
        finally:
            self._closed.wait()

    def _work(self) -> None:
        try:
            from pcheckout.fs.detect import detect

            self._fs = detect(self._path)
        except Exception:  # noqa: BLE001 - the main thread detects again, and reports
            return
        names: tuple[str, ...] = PLAN_MODULES
        if self._imports and self._fs.latency_bound:
            names += ENGINE_MODULES
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the main thread's import reports it
                return

    def close(self) -> None:
        """Let the thread end (its work done first), and wait for it."""
        self._closed.set()
        self._thread.join()

    def finish(self, root: Path) -> FsInfo | None:
        """The filesystem of ``root`` if it is the directory detected (None: detect it),
        once the thread's work is done and the thread has ended."""
        self.close()
        return self._fs if self._path == str(root) else None


def _prestart(
    ctx: Context, plan: WorkerPlan, dry_run: bool, sel: Selection | None
) -> Prestarted | None:
    """The writers' plain cat-files, started while the run checks conversions and, for a
    resume, what it keeps (``git/catfile.py`` Prestarted); only for writer threads
    (forked writers start their own, and a fork must not copy these pipes) that run
    this git as it is (a partial clone's writers of blobs still to fetch run another)."""
    if dry_run or plan.writer == "git" or plan.processes or plan.workers < 1:
        return None
    if sel is not None and sel.missing:
        return None
    from pcheckout.git.catfile import Prestarted
    from pcheckout.write.engine import fd_budget

    # (no more than the open-file limit lets the writers have: the rest is the run's)
    return Prestarted(ctx.git, min(plan.workers, fd_budget()), spawn=ctx.spawn)


def _plan_and_write(
    ctx: Context,
    opts: CheckoutOptions,
    target: Target,
    state: _State,
    entries: list[Entry],
    sel: Selection | None,
    plan: WorkerPlan,
    fs: FsInfo,
    nbytes: int,
    lock: IndexLock | None,
    catfiles: Prestarted | None,
) -> Result:
    """Steps 4 (its conversions) to 8."""
    wanted = len(entries) if sel is None else len(sel.wanted)
    conversion = _plan_conversion(ctx, target, entries, sel, plan, opts.dry_run)
    result = Result(
        "resume" if state.resume else "checkout",
        wanted,
        nbytes,
        plan,
        fs,
        dry_run=opts.dry_run,
    )
    if sel is not None:
        result.skip_worktree = sel.outside
        result.fetch_blobs = len(sel.missing) + sel.fetched_first
        result.warnings = sel.warnings
    result.add_conversion(conversion)
    if opts.dry_run:
        return result
    assert lock is not None  # taken by _open for every run that writes

    marker = ctx.repo.git_dir / IN_PROGRESS
    previous = state.previous if state.resume else None
    # Step 5: before anything is written (EROFS or ENOSPC name the marker).
    jr = journal.Journal.start(marker, target.commit, target.tree, conversion.any,
                               previous=previous)  # fmt: skip
    t0 = time.monotonic()
    try:
        if plan.writer == "git":
            return _write_by_git(ctx, opts, target, plan, result, t0, jr, lock)
        return _write_by_engine(ctx, opts, target, state, entries, sel, conversion, plan, fs,
                                result, t0, jr, lock, catfiles)  # fmt: skip
    finally:
        jr.close()


def _switch(
    ctx: Context,
    opts: CheckoutOptions,
    target: Target,
    entries: list[Entry],
    head_entries: list[Entry],
    fs: FsInfo,
    lock: IndexLock | None,
) -> Result:
    """A populated work tree with an index, switched by pcheckout's two-way merge and
    engine (``switch.py``)."""
    # Imported here, as are the engine's modules below: where git's writer runs they are
    # never used, and importing them cost ~25 ms of CPU before git's writer could start
    # (docs/benchmarks.md, start-up).
    from pcheckout import switch

    return switch.switch(ctx, opts, target, entries, head_entries, fs=fs, lock=lock)


def _plan_switch(
    ctx: Context, opts: CheckoutOptions, entries: int, fs: FsInfo | None = None
) -> tuple[FsInfo, WorkerPlan]:
    """A switch's plan for ``entries`` (it never adapts; its byte count is not known)."""
    from pcheckout.plan.planner import plan_for  # (imported beside round 1: _Ahead)

    return plan_for(
        _work_tree(ctx),
        entries=entries,
        nbytes=0,
        workers=opts.workers,
        environ=opts.environ,
        config=ctx.config,
        adapt=False,
        writer=opts.writer,
        git_version=ctx.git.version,
        fs=fs,
    )


def _plan_conversion(
    ctx: Context,
    target: Target,
    entries: list[Entry],
    sel: Selection | None,
    plan: WorkerPlan,
    dry_run: bool,
) -> attributes.ConversionPlan:
    """Which paths convert, and how (``git/attributes.py``)."""
    from pcheckout.git import attributes  # (imported beside round 1: _Ahead)

    if plan.writer == "git" and not dry_run:
        # git converts as it writes: only where attributes could come from is reported
        # (the per-path lookup is a check-attr process over every path, for the engine).
        sources = attributes.conversion_sources(entries, ctx.config, ctx.repo.common_dir,
                                                ctx.environ)  # fmt: skip
        return attributes.ConversionPlan(sources, [])
    only = None if sel is None else sel.wanted
    unknown = 0
    if sel is not None and dry_run:
        # A dry run fetches nothing: paths below a missing .gitattributes are not looked
        # up (check-attr would fetch it), and the blob counts among those a run fetches.
        only, absent = attributes.known_attributes(ctx.git, entries, sel.wanted, sel.remotes,
                                                   sel.missing)  # fmt: skip
        unknown = len(sel.wanted) - len(only)
        sel.missing.update(absent)
    elif sel is not None:
        _fetch_attributes(ctx, entries, sel)
    conversion = attributes.plan_conversion(
        ctx.git, ctx.repo, ctx.config, target.tree, entries, environ=ctx.environ, only=only
    )
    conversion.unknown = unknown
    return conversion


def _write_by_git(
    ctx: Context,
    opts: CheckoutOptions,
    target: Target,
    plan: WorkerPlan,
    result: Result,
    t0: float,
    jr: journal.Journal,
    lock: IndexLock,
) -> Result:
    """Steps 6-8 with git's writer: git writes the files and a scratch index, renamed
    over the index through ``lock`` (ours); HEAD moves as with the engine."""
    jr.close()  # git records nothing in it: a resume by git's writer overwrites
    with scratch_index(lock, copy=True) as scratch:
        git = dataclasses.replace(ctx.git, env=scratch.env(ctx.git.env))
        done = write_by_git(ctx._replace(git=git), target.tree, plan)
        # git does not say what it wrote; its index holds every file's size (-1: unknown).
        result.bytes = written_bytes(scratch.path, ctx.repo.object_format)
        lock.commit_from(scratch.path)
    result.head = update_head(ctx.git, ctx.repo, ctx.config, opts.rev, target)
    journal.remove(ctx.repo.git_dir / IN_PROGRESS)
    result.seconds = time.monotonic() - t0
    result.written = done.updated if done.updated >= 0 else result.files
    return result


def _write_by_engine(
    ctx: Context,
    opts: CheckoutOptions,
    target: Target,
    state: _State,
    entries: list[Entry],
    sel: Selection | None,
    conversion: attributes.ConversionPlan,
    plan: WorkerPlan,
    fs: FsInfo,
    result: Result,
    t0: float,
    jr: journal.Journal,
    lock: IndexLock,
    catfiles: Prestarted | None,
) -> Result:
    """Steps 6-8 with pcheckout's engine: the entries (each recorded in ``jr`` once
    complete), the index from their stat data (committed through ``lock``), HEAD."""
    # The engine's modules: imported only where they write (see the switch import above).
    from pcheckout.write.indexout import settles_index, write_fresh_index
    from pcheckout.write.partial import select, write_selected
    from pcheckout.write.worktree import WriteRequest

    root = _work_tree(ctx)
    if sel is None:
        sel = select(ctx, entries, None)
    outcome, fetched = write_selected(
        ctx,
        WriteRequest(
            target.tree,
            entries,
            root,
            plan,
            conversion=conversion,
            resume=state.resume,
            previous=state.previous if state.resume else None,
            journal=jr,
            stat_threads=plan.workers if fs.latency_bound else 1,
            catfiles=catfiles,
        ),
        sel,
        latency_bound=bool(fs.latency_bound),
    )
    jr.close()
    write_fresh_index(
        ctx, entries, outcome, settle=settles_index(fs), skip_worktree=sel.skip_worktree, lock=lock
    )
    result.head = update_head(ctx.git, ctx.repo, ctx.config, opts.rev, target)
    journal.remove(ctx.repo.git_dir / IN_PROGRESS)

    result.seconds = time.monotonic() - t0
    result.bytes = outcome.bytes
    result.written = outcome.files - outcome.kept
    result.kept = outcome.kept
    result.adapt_summary = outcome.adapt_summary
    result.processes = outcome.processes
    result.fetched_bytes, result.fetches = fetched.bytes, fetched.fetches
    return result


def _switch_by_git(
    ctx: Context, opts: CheckoutOptions, target: Target, fs: FsInfo, lock: IndexLock
) -> Result:
    """The switch done by ``git checkout REV``: git refuses (its message, nothing changed) or
    moves the work tree, the index (a scratch copy, renamed over the index through ``lock``)
    and HEAD.  What it writes and deletes is the two trees' ``diff-tree``, listed beside the
    target's paths before git runs: the written paths are checked one by one and the whole
    tree's names for collisions (``git/pathsafety.py``), and the count is planned from what
    changes.  A tree of 40k entries is then not parsed entry by entry (~60 ms).  The bytes
    come from the sizes in the index git wrote."""
    head_tree = target.head_tree
    if head_tree is None:  # an unborn branch with files and an index: all of it is written
        entries = list_tree(ctx.git, target.tree)
        check_entries(entries, ctx.config)
        changes = TreeChanges([e.path for e in entries], [e.mode for e in entries], [])
    else:
        # The names are checked while diff-tree still runs (it reads both trees).
        names_ok, changes = both(
            lambda: tree_names_look_safe(list_paths(ctx.git, target.tree)),
            lambda: tree_changes(ctx.git, head_tree, target.tree),
        )
        writes = list(zip(changes.written, changes.modes, strict=True))
        if not (names_ok and entries_look_safe(writes, ctx.config)):
            check_entries(list_tree(ctx.git, target.tree), ctx.config)  # names the offence
    # Planned from what changes: a switch of 50 files does not need a tree's worth of workers.
    fs, plan = _plan_switch(ctx, opts, len(changes.written) + len(changes.deleted), fs)
    report = Reporting(ctx.ui, plan.workers)
    t0 = time.monotonic()
    try:
        with scratch_index(lock, copy=True) as scratch:
            by_git = dataclasses.replace(ctx.git, env=scratch.env(ctx.git.env))
            gitwriter.switch(by_git, opts.rev, workers=plan.workers,
                             threshold=PARALLEL_THRESHOLD, progress=report)  # fmt: skip
            # The old index is still in place until the commit.
            sparse = config_bool(ctx.config.get("core.sparsecheckout"), False)
            written, deleted, nbytes = gitwriter.switch_counts(
                changes, scratch.path, lock.index, ctx.repo.object_format, sparse
            )
            lock.commit_from(scratch.path)
    except KeyboardInterrupt:
        raise Interrupted(2, "git's checkout stopped; run the same command again") from None
    finally:
        report.finish()
    seconds = time.monotonic() - t0
    result = Result("switch", written, nbytes, plan, fs, seconds=seconds, written=written,
                    deleted=deleted)  # fmt: skip
    result.head = target.branch or (opts.rev if opts.rev == "HEAD" else f"detached at {opts.rev}")
    return result


def _select(
    ctx: Context, entries: list[Entry], have: set[str] | None, sparsity: Sparsity | None
) -> Selection | None:
    """Step 3: what is written.  None: everything, and every blob is here (no sparse
    checkout, no promisor remote); only then are git.sparse and write.partial (with the
    engine they import) not imported at all (see the switch import above).  ``have``: a
    partial clone's local objects, ``sparsity`` the sparse-checkout rules (``_sparsity``),
    both read beside the tree's listing."""
    sparse = config_bool(ctx.config.get("core.sparsecheckout"), False)
    if not sparse and not promisor_remotes(ctx.config):
        return None
    from pcheckout.write.partial import select

    return select(ctx, entries, sparsity, have=have)


def _beside_listing(
    ctx: Context, partial: bool, sparse: bool, patterns: _Patterns | None
) -> tuple[set[str] | None, Sparsity | None]:
    """What a fresh checkout reads while the tree is listed: a partial clone's local
    objects and a sparse checkout's rules (each only if asked for)."""
    if partial and sparse and patterns is None:
        return both(lambda: local_objects(ctx.git), lambda: _sparsity(ctx, None))
    have = local_objects(ctx.git) if partial else None
    return have, _sparsity(ctx, patterns) if sparse else None


def _sparsity(ctx: Context, patterns: _Patterns | None) -> Sparsity | None:
    """The worktree's sparse-checkout rules (None: no pattern file, a full checkout);
    ``patterns``: the pattern file as round 1 read it, if it did."""
    from pcheckout.git import sparse

    if patterns is not None:
        return sparse.from_patterns(ctx.config, patterns.data)
    return sparse.load(ctx.git, ctx.config, ctx.repo.git_dir)


def _fetch_attributes(ctx: Context, entries: list[Entry], sel: Selection) -> None:
    """check-attr must find the tree's .gitattributes local (a partial clone)."""
    from pcheckout.git import attributes

    fetched = attributes.fetch_attributes(ctx.git, entries, sel.remotes, only=sel.wanted)
    sel.missing.difference_update(fetched)
    sel.fetched_first = len(fetched)


def _open(opts: CheckoutOptions, ui: Reporter) -> tuple[Context, Target, _State, IndexLock | None]:
    """Step 1: the repository, its config and the target; then its index lock (a run
    that writes takes it before it looks at the work tree) and what the work tree holds."""
    # Independent git processes run side by side: on a network mount each one spends tens
    # of round trips finding the repository before it answers, and on tmpfs each round of
    # processes is ~2 ms before git's writer can start.  None of these four needs the
    # version (the runner is given the oldest supported one until it is known); their
    # errors count in this order: no git, no repository, then config and REV.
    git = Git(opts.directory, debug=ui.debug, version=(*MIN_GIT, 0))
    (version, repo), ((config, target), early) = both(
        lambda: both(lambda: git_version(git.exe), lambda: discover(git)),
        lambda: both(
            lambda: both(lambda: read_config(git), lambda: resolve_target(git, opts.rev)),
            lambda: _early(git, opts),
        ),
    )
    git.version = version
    listed = None
    patterns = None
    if early is not None:
        if early.listing.tree_id(repo.object_format) == target.tree:
            listed = early.listing.entries
        else:
            ui.debug(f"{opts.rev} was listed as another tree than {target.tree}: listed again")
        if Path(early.git_dir).resolve() == repo.git_dir:
            patterns = _Patterns(early.patterns)
    if repo.work_tree is None:
        raise DestinationError(
            f"{opts.directory} is a bare repository; use 'pcheckout export' to write a tree"
        )
    lock = None if opts.dry_run else IndexLock.acquire(repo.index_path)
    try:
        if lock is not None and lock.took_over:
            ui.debug(f"took over {lock.path.decode(errors='replace')} of a pcheckout that died")
        occupied = occupants(repo.work_tree)
        previous = journal.read(repo.git_dir / IN_PROGRESS) if occupied else None
    except BaseException:
        if lock is not None:
            lock.rollback()
        raise
    switching = bool(occupied) and previous is None and repo.index_path.exists()
    ctx = Context(git, repo, config, ui, opts.environ, opts.spawn)
    return ctx, target, _State(occupied, previous, switching, listed, patterns), lock


class _Early(NamedTuple):
    """What round 1 read beside the config and REV's resolution (``_early``)."""

    listing: RootedListing
    git_dir: str  # the git dir guessed: DIRECTORY/.git (used if discover agrees)
    patterns: bytes | None  # its info/sparse-checkout; None: no such file


class _Patterns(NamedTuple):
    """The sparse-checkout pattern file as read in round 1 (None: there is none)."""

    data: bytes | None


def _early(git: Git, opts: CheckoutOptions) -> _Early | None:
    """The target's listing and the sparse-checkout pattern file, read beside round 1
    (each git process is tens of round trips on a network mount before it answers:
    ``ls-tree -r`` took 57-71 ms on the 1 ms latency mount) where the destination looks
    like a fresh checkout or a resume: ``.git`` alone, or beside an interrupted run's
    journal.  A switch lists nothing entry by entry when git's writer runs it, so it is
    not guessed at.  None where not tried or the listing failed (the same error then
    comes from the ordinary path)."""
    rev = opts.rev
    if opts.dry_run or not rev or rev.startswith("-") or "\n" in rev:
        return None
    git_dir = os.path.join(opts.directory, ".git")
    try:
        names = os.listdir(opts.directory)
        if ".git" not in names or (
            len(names) > 1 and not os.path.exists(os.path.join(git_dir, IN_PROGRESS))
        ):
            return None
        listing = list_rooted(git, rev)
    except (GitError, OSError):
        return None
    try:
        with open(os.path.join(git_dir, "info", "sparse-checkout"), "rb") as f:
            patterns: bytes | None = f.read()
    except OSError:
        patterns = None
    return _Early(listing, git_dir, patterns)


def _list(
    ctx: Context, target: Target, state: _State, sizes: bool
) -> tuple[list[Entry], list[Entry]]:
    """Step 2: the target's entries, and HEAD's beside them when switching.
    Sizes cost git a header read per blob; only the dry run reports them."""
    if state.listed is not None and not state.switching and not sizes:
        return state.listed, []  # listed beside round 1 (_early)
    calls = [lambda: list_tree(ctx.git, target.tree, sizes=sizes)]
    head_tree = target.head_tree
    if state.switching and head_tree is not None:
        calls.append(lambda: list_tree(ctx.git, head_tree, sizes=False))
    entries, *head = concurrently(*calls)
    return entries, head[0] if head else []


def _work_tree(ctx: Context) -> Path:
    assert ctx.repo.work_tree is not None  # _open refused bare repositories
    return ctx.repo.work_tree
