"""Opening a checkout's run: the repository, REV, the lock and what the destination holds.

Round 1 asks git its independent questions side by side (on a network mount each git
process spends tens of round trips finding the repository before it answers): the
version, the repository, the config, REV's resolution and, where the destination looks
like a fresh checkout or a resume, the target's listing and the sparse pattern file
(``_early``).  The CLI started these processes as soon as it read the command line
(``git/round1.py``); round 1 takes them, and stops what it did not ask for.  A thread
beside it (``Ahead``) detects the destination's filesystem and imports what the run
needs next.  Then ``index.lock`` is taken, before the work tree is
looked at (``git/lock.py``), and the destination is listed under it.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pcheckout.context import Context, Reporter, both
from pcheckout.errors import GitError, NotARepositoryError, RevisionRefusedError
from pcheckout.fs.casefold import without_probes
from pcheckout.fs.listing import occupants
from pcheckout.git import round1
from pcheckout.git.config import read_config
from pcheckout.git.lock import IndexLock
from pcheckout.git.refs import Target, prior_checkout, resolve_target, symbolic_head
from pcheckout.git.runner import MIN_GIT, Git, Repo, discover, git_version
from pcheckout.git.tree import RootedListing, TreeChanges, list_rooted, tree_changes
from pcheckout.git.worktrees import checked_out_elsewhere
from pcheckout.options import CheckoutOptions
from pcheckout.write import journal

if TYPE_CHECKING:
    from pcheckout.fs.detect import FsInfo

__all__ = ["IN_PROGRESS", "Ahead", "Found", "Run", "open_checkout"]

#: Marker left in the git dir while a checkout is writing; a re-run that finds
#: it resumes (verifies what is there, writes the rest) instead of refusing.
IN_PROGRESS = round1.IN_PROGRESS

#: The modules every checkout imports after round 1 (the planner with the detection, the
#: attributes): ~30 ms of imports on the dev VM, paid beside round 1 (``Ahead``).
PLAN_MODULES = ("pcheckout.plan.planner", "pcheckout.git.convert")

#: The modules pcheckout's engine path imports (and theirs): ~30 ms more, paid beside
#: round 1 only where the engine will write.
ENGINE_MODULES = (
    "pcheckout.write.partial",
    "pcheckout.write.indexout",
    "pcheckout.git.sparse",
    "pcheckout.git.catfile",
)


class Patterns(NamedTuple):
    """The sparse-checkout pattern file as read in round 1 (None: there is none)."""

    data: bytes | None


class Found(NamedTuple):
    """What the destination holds before anything is written."""

    occupied: list[bytes]  # names in the work tree besides .git
    previous: journal.Previous | None  # an interrupted checkout's or switch's journal, if any
    switching: bool  # populated, with an index: an incremental switch
    listed: RootedListing | None = None  # the target's entries, if listed beside round 1
    patterns: Patterns | None = None  # the sparse pattern file, if read beside round 1
    #: a switch's changes (HEAD's tree to REV's), if listed beside round 1 (``_resolve``)
    changes: TreeChanges | None = None

    @property
    def resume(self) -> bool:
        """An interrupted fresh checkout is finished (of this tree or another)."""
        return bool(self.occupied) and self.previous is not None and not self.switching

    @property
    def interrupted(self) -> journal.Previous | None:
        """The journal of an interrupted switch this switch finishes (None: there is none)."""
        return self.previous if self.switching else None


class Run(NamedTuple):
    """An opened checkout: its context, where REV goes, what is there, and the lock
    (None: a dry run, which takes none)."""

    ctx: Context
    opts: CheckoutOptions
    target: Target
    found: Found
    lock: IndexLock | None
    ahead: Ahead

    @property
    def root(self) -> Path:
        work_tree = self.ctx.repo.work_tree
        assert work_tree is not None  # open_checkout refused bare repositories
        return work_tree


class Ahead:
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
        self._detected = threading.Event()
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
        finally:
            self._detected.set()
        names: tuple[str, ...] = PLAN_MODULES
        if self.engine_writes():
            names += ENGINE_MODULES
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - the main thread's import reports it
                return

    def engine_writes(self) -> bool:
        """Whether pcheckout's engine will likely write (the destination is latency-bound
        and no other writer was asked for).  Waits for the detection (a few ms)."""
        self._detected.wait()
        return self._imports and self._fs is not None and bool(self._fs.latency_bound)

    def local(self) -> bool:
        """Whether the destination was detected as not latency-bound (where git's writer
        runs: round 1 then lists what its switch needs; on a network mount a process more
        is tens of round trips).  Waits for the detection (a few ms)."""
        self._detected.wait()
        return self._fs is not None and not self._fs.latency_bound

    def close(self) -> None:
        """Let the thread end (its work done first), and wait for it."""
        self._closed.set()
        self._thread.join()

    def finish(self, root: Path) -> FsInfo | None:
        """The filesystem of ``root`` if it is the directory detected (None: detect it),
        once the thread's work is done and the thread has ended."""
        self.close()
        return self._fs if self._path == str(root) else None


class _Early(NamedTuple):
    """What round 1 read beside the config and REV's resolution (``_early``)."""

    listing: RootedListing
    git_dir: str  # the git dir guessed: DIRECTORY/.git (used if discover agrees)
    patterns: bytes | None  # its info/sparse-checkout; None: no such file


def open_checkout(opts: CheckoutOptions, ui: Reporter, ahead: Ahead) -> Run:
    """The repository, its config and the target; then its index lock (a run that writes
    takes it before it looks at the work tree) and what the work tree holds."""
    # None of round 1's processes needs the version (the runner is given the oldest
    # supported one until it is known); their errors count in this order: no git, no
    # repository, then config and REV.
    git = Git(opts.directory, debug=ui.debug, version=(*MIN_GIT, 0))
    if opts.rev == "-" or opts.rev.startswith("@{-"):  # one git process more, before round 1
        opts = opts._replace(rev=prior_checkout(git, opts.rev))
    try:
        (version, repo), ((config, (target, changes)), early) = both(
            lambda: both(lambda: git_version(git.exe), lambda: _with_work_tree(discover(git))),
            lambda: both(
                lambda: both(lambda: read_config(git), lambda: _resolve(git, opts, ahead)),
                lambda: _early(git, opts, ahead),
            ),
        )
    finally:
        round1.discard()  # what the CLI started and round 1 did not ask for
    git.version = version
    for line in target.said:  # git's warnings on REV come first, as git checkout prints them
        ui.git_message(line)
    if target.branch is not None and target.branch_exists:
        _refuse_branch_elsewhere(git, repo, config, target.branch)
    ctx = Context(git, repo, config, ui, opts.environ, opts.spawn)
    lock = None if opts.dry_run else IndexLock.acquire(repo.index_path)
    try:
        if lock is not None and lock.took_over:
            ui.debug(f"took over {lock.path.decode(errors='replace')} of a pcheckout that died")
        assert repo.work_tree is not None  # (_with_work_tree)
        found = _found(ctx, opts, target, early, repo.work_tree)
        if found.switching and changes is not None:
            found = found._replace(changes=changes)
        if not found.switching and found.previous is not None and found.previous.clone:
            # git clone's interrupted checkout: finished as git clone's (its hooks)
            opts = opts._replace(clone=True)
    except BaseException:
        if lock is not None:
            lock.rollback()
        raise
    return Run(ctx, opts, target, found, lock, ahead)


def _with_work_tree(repo: Repo) -> Repo:
    """``repo``, which must have a work tree (git checkout's setup: a bare repository or a
    git dir itself dies, git.c RUN_SETUP | NEED_WORK_TREE), before REV's errors."""
    if repo.work_tree is None:
        raise NotARepositoryError(
            "this operation must be run in a work tree "
            "(a bare repository, or inside a git dir; 'pcheckout export' writes a tree)"
        )
    return repo


def _refuse_branch_elsewhere(git: Git, repo: Repo, config: Mapping[str, str], branch: str) -> None:
    """git checkout refuses a branch another work tree has checked out, unless HEAD names
    it here already (builtin/checkout.c checkout_branch(), branch.c die_if_checked_out())."""
    ref = f"refs/heads/{branch}"
    where = checked_out_elsewhere(repo, config, ref)
    if where is not None and symbolic_head(git, repo, config) != ref:
        raise RevisionRefusedError(f"'{branch}' is already checked out at '{where}'")


def _found(
    ctx: Context, opts: CheckoutOptions, target: Target, early: _Early | None, work_tree: Path
) -> Found:
    """What the work tree holds (under the lock), with what round 1 read beside it."""
    repo, rev = ctx.repo, opts.rev
    listed = None
    patterns = None
    if early is not None:
        if early.listing.tree_id(repo.object_format) == target.tree:
            listed = early.listing
        else:
            ctx.ui.debug(f"{rev} was listed as another tree than {target.tree}: listed again")
        if Path(early.git_dir).resolve() == repo.git_dir:
            patterns = Patterns(early.patterns)
    occupied = occupants(work_tree)
    if not opts.dry_run:  # (under the index lock)
        occupied = without_probes(work_tree, occupied)
    # An index is a switch's, as in git, even in an emptied work tree: git's two-way merge
    # keeps its staged changes and leaves a file deleted where both trees have it alike
    # (only a clone --no-checkout, an init or an interrupted fresh checkout has none).
    # (an empty work tree's journal: git clone's checkout interrupted before its first file)
    indexed = repo.index_path.exists()
    read = occupied or indexed or not opts.clone
    previous = journal.read(repo.git_dir / IN_PROGRESS) if read else None
    # An interrupted switch left the index and HEAD where it began: a switch again.
    fresh_left = previous is not None and previous.kind != "switch"
    switching = indexed and not fresh_left and target.head_tree is not None
    switching = switching or (bool(occupied) and not fresh_left and indexed)
    return Found(occupied, previous, switching, listed, patterns)


def _looks(opts: CheckoutOptions) -> round1.Early:
    """What the destination looks like (``round1.looks``: as the CLI judged it)."""
    return round1.looks(
        os.fspath(opts.directory),
        opts.rev,
        dry_run=opts.dry_run,
        force=opts.force,
        writer=opts.writer,
    )


def _resolve(git: Git, opts: CheckoutOptions, ahead: Ahead) -> tuple[Target, TreeChanges | None]:
    """REV resolved; and where the destination looks like a switch git's own ``git
    checkout REV`` carries out (files and an index, no interrupted run's journal, not
    forced, a local disk), what changes from HEAD's tree to REV's (the diff-tree a
    switch's checks need), asked the moment both trees are known instead of in a round of
    its own after round 1, or started by the CLI with round 1 naming HEAD and REV (taken
    where REV names the tree it resolved to: a branch of that name is not shadowed) (None:
    not asked, or it failed: the ordinary path asks again)."""
    target = resolve_target(git, opts.rev)
    if target.head_tree is None or not (_looks(opts).switch and ahead.local()):
        return target, None
    old, new = target.head_tree, target.tree
    named = [*round1.DIFF_TREE, "HEAD", opts.rev]
    if target.rev_tree == target.tree and round1.started(git.argv(named), round1.DIFF_TREE_ENV):
        old, new = "HEAD", opts.rev  # (read by git's checkout by those names too)
    try:
        return target, tree_changes(git, old, new)
    except GitError:
        return target, None


def _early(git: Git, opts: CheckoutOptions, ahead: Ahead) -> _Early | None:
    """The target's listing and the sparse-checkout pattern file, read beside round 1
    (each git process is tens of round trips on a network mount before it answers:
    ``ls-tree -r`` took 57-71 ms on the 1 ms latency mount) where the destination looks
    like a fresh checkout or a resume: ``.git`` alone, or beside an interrupted run's
    journal (a switch's checks read what changes, not the target whole:
    ``decide/gitswitch.py``).  None where not tried or the listing failed (the same error
    then comes from the ordinary path)."""
    if not _looks(opts).fresh:
        return None
    git_dir = os.path.join(opts.directory, ".git")
    try:
        listing = list_rooted(git, opts.rev)
    except (GitError, OSError):
        return None
    if ahead.engine_writes():
        # The engine needs every entry: parsed here, while round 1's other processes
        # still run, not after them on the main thread (~25 ms at 4,800 entries).
        listing.entries  # noqa: B018 - parses and keeps them
    try:
        with open(os.path.join(git_dir, "info", "sparse-checkout"), "rb") as f:
            patterns: bytes | None = f.read()
    except OSError:
        patterns = None
    return _Early(listing, git_dir, patterns)
