"""Write a list of tree entries into a directory: the write stage of a
checkout, a switch and an export.

In order: on resume, keep what an interrupted run completed, proven by the
stat data its journal recorded (``write/journal.py``) with no file read;
write the entries whose final bytes the caller gave (export-subst files); when
git's filters convert some path and git cannot be told to read the tree's
attributes (``--attr-source``, git >= 2.41), write ``.gitattributes`` first (git
then reads them from the work tree); then hand the rest to the writers: forked
processes where writing is CPU-bound, else the threaded engine, adapting its
limit where the plan says.  Each entry is converted as ``req.conversion`` says:
as stored, in-process (ident, CRLF) or through ``cat-file --filters``.
"""

from __future__ import annotations

import dataclasses
import os
import stat as stat_mod
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pcheckout.context import Context, Reporter
from pcheckout.errors import Interrupted, decode
from pcheckout.fdio import write_all
from pcheckout.fs.files import full_path, pack_stat
from pcheckout.fs.parallel import lstat_many_or_none, lstat_while_cached
from pcheckout.git import attributes, convert, odb
from pcheckout.git.catfile import CatFile, Prestarted
from pcheckout.git.config import config_bool
from pcheckout.git.objects import blob_oid, file_blob_oid
from pcheckout.git.runner import GIT_ATTR_SOURCE, GIT_CATFILE_Z
from pcheckout.git.tree import MODE_EXEC, MODE_GITLINK, MODE_SYMLINK, Entry
from pcheckout.options import Result
from pcheckout.plan import controller, policy
from pcheckout.write import forked, journal
from pcheckout.write.engine import Engine, EngineOptions, Outcome

#: The hint an interrupted write leaves the user.
RESUME_HINT = "run 'pcheckout checkout' again to finish"


@dataclass(frozen=True)
class WriteRequest:
    """What to write and how: the stage's inputs beyond the shared context."""

    tree: str  # the tree the entries come from (attributes are read from it)
    entries: Sequence[Entry]
    root: Path
    plan: policy.WorkerPlan
    conversion: convert.ConversionPlan  # how each entry is converted
    resume: bool = False  # keep what an interrupted run wrote correctly
    overwrite: bool = False  # replace what is in the way
    contents: Mapping[int, bytes] | None = None  # entries' final bytes, written as given
    #: git's filters read the tree's attributes (--attr-source where git has it, else
    #: .gitattributes written first); False: the caller's git environment decides
    #: (export: --worktree-attributes, or a temporary index of the tree's attributes)
    tree_attributes: bool = True
    previous: journal.Previous | None = None  # the interrupted run's journal (resume)
    journal: journal.Journal | None = None  # where completed entries are recorded
    stat_threads: int = 1  # threads for a resume's lstats (the writers' where latency-bound)
    #: each entry's position in the tree listing (the journal's key); None: as in ``entries``
    positions: Sequence[int] | None = None
    #: plain cat-files started ahead of the writers (checkout.py); the first round takes them
    catfiles: Prestarted | None = None
    #: the loose objects, listed while the run still decided (None: listed here)
    loose: LooseScan | None = None
    #: threads reading the local LFS objects ahead of the writers (a latency-bound
    #: repository: ``write/lfsread.py``); 0: each writer reads its own
    lfs_read_ahead: int = 0


def write_tree(ctx: Context, req: WriteRequest) -> Outcome:
    """Write ``req.entries`` under ``req.root`` in parallel; return per-entry stat data."""
    if req.resume and _overlaps(ctx, req):
        return _resume_overlapped(ctx, req)
    before = _before_writers(ctx, req)
    plan = req.plan
    adapt = None
    if plan.adapt:  # never above the mount's ceiling (policy.MAX_WORKERS without one)
        adapt = controller.Controller(plan.workers, minimum=1, maximum=plan.ceiling)
    opts = _engine_options(ctx, req, before, adapt is not None)
    if req.journal is not None:
        req.journal.flush()  # what a resume kept: nothing buffered is copied into a fork
    remaining = [i for i, s in enumerate(before.skip) if not s]
    # the size first: available() may wait a moment for exiting threads
    if (
        plan.processes
        and adapt is None
        and len(remaining) >= forked.MIN_ENTRIES
        and forked.available()
    ):
        outcome = _by_processes(ctx, req, opts, before.skip, remaining)
        return _finish(outcome, before.pre_stats, before.kept, None)
    outcome = _by_threads(ctx, req, opts, _Threads(before.skip, remaining, adapt))
    return _finish(outcome, before.pre_stats, before.kept, adapt.summary() if adapt else None)


class _Before(NamedTuple):
    """What is done before the writers start: entries kept or written already."""

    skip: list[bool]  # per entry: not the writers' (kept by a resume, or written here)
    pre_stats: dict[int, bytes]  # their stat data
    kept: int  # of them, entries a resume kept
    overwrite: bool  # the writers replace what is in the way
    attr_source: str | None  # the tree git's filters read attributes from (git >= 2.41)


def _before_writers(ctx: Context, req: WriteRequest) -> _Before:
    """A resume's proof of what it keeps, the entries whose bytes were given, and (git
    < 2.41 with filters) the .gitattributes git's filters must find in the work tree."""
    entries = req.entries
    root_b = os.fsencode(req.root)
    skip = [False] * len(entries)
    pre_stats: dict[int, bytes] = {}
    kept = 0
    if req.journal is not None:
        req.journal.positions = req.positions  # this request's entries -> the listing's
    if req.resume:
        kept = _keep_completed(ctx, req, root_b, skip, pre_stats)
    if req.contents:
        _write_given(root_b, entries, req.contents, skip, pre_stats)
    conv = req.conversion
    by_git = conv.by_git > 0 and req.tree_attributes
    attr_source = req.tree if by_git and ctx.git.has(GIT_ATTR_SOURCE) else None
    if by_git and attr_source is None:
        _write_attributes_first(ctx, conv, entries, root_b, skip, pre_stats)
    return _Before(skip, pre_stats, kept, req.overwrite or req.resume, attr_source)


def _engine_options(ctx: Context, req: WriteRequest, before: _Before, adapt: bool) -> EngineOptions:
    """The engine's options for ``req``: up to 64 threads where it adapts."""
    conv, git, plan = req.conversion, ctx.git, req.plan
    by_git = conv.by_git > 0
    return EngineOptions(
        root=os.fsencode(req.root),
        workers=plan.ceiling if adapt else plan.workers,
        initial_limit=plan.workers,
        filters=by_git,
        conversions=conv.per_entry if conv.any else None,
        nul_requests=by_git and git.has(GIT_CATFILE_Z),
        attr_source=before.attr_source,
        symlinks=config_bool(ctx.config.get("core.symlinks"), True),
        overwrite=before.overwrite,
        journal=req.journal,
        loose=req.loose.result() if req.loose is not None else loose_objects(ctx, plan.workers),
        lfs_read_ahead=req.lfs_read_ahead if conv.lfs is not None and conv.lfs.local else 0,
    )


def loose_objects(ctx: Context, threads: int) -> odb.LooseObjects | None:
    """The loose objects the writers read themselves (none: every blob is cat-file's),
    their directories listed ``threads`` at a time.  A stand-in cat-file (the tests'
    ``spawn``) answers for every object."""
    if ctx.spawn is not None:
        return None
    git = ctx.git
    env = git.env if git.env is not None else ctx.environ
    dirs = odb.object_dirs(ctx.repo.common_dir, git.cwd, env)
    loose = odb.scan(dirs, ctx.repo.oid_hex_len, threads)
    ctx.ui.debug(f"loose objects: {len(loose)} in {len(dirs)} object directories")
    return loose if len(loose) else None


class LooseScan:
    """:func:`loose_objects` in a thread, started while the run still decides (the
    listing is round trips on a network mount: 9-10 ms on the 1 ms latency mount, before
    the first write when made there); :meth:`result` waits for it."""

    def __init__(self, ctx: Context, threads: int) -> None:
        self._found: odb.LooseObjects | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._scan, args=(ctx, threads), name="pcheckout-loose", daemon=True
        )
        self._thread.start()

    def _scan(self, ctx: Context, threads: int) -> None:
        try:
            self._found = loose_objects(ctx, threads)
        except BaseException as exc:  # noqa: BLE001 - raised where the result is asked for
            self._error = exc

    def result(self) -> odb.LooseObjects | None:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._found


def _start_ui(ui: Reporter, req: WriteRequest, remaining: list[int]) -> None:
    """The progress display, for the entries the writers write."""
    entries = req.entries
    nbytes = sum(max(entries[i].size, 0) for i in remaining)
    ui.start(len(remaining), nbytes, req.plan.workers)


def _by_processes(
    ctx: Context, req: WriteRequest, opts: EngineOptions, skip: list[bool], remaining: list[int]
) -> Outcome:
    """The engine in forked processes (``write/forked.py``)."""
    ui = ctx.ui
    try:
        how = forked.Forking(
            req.plan.workers,
            spawn=ctx.spawn,
            report=ui.update,
            forked=lambda: _start_ui(ui, req, remaining),
        )
        outcome = forked.run(ctx.git, req.entries, opts, how, skip=skip)
    except KeyboardInterrupt:
        raise Interrupted(2, RESUME_HINT) from None
    finally:
        ui.finish()
    _relay(ui, outcome)
    return outcome


class _Threads(NamedTuple):
    """What the threaded engine is given besides its options."""

    skip: list[bool]
    remaining: list[int]  # the entries it writes
    adapt: controller.Controller | None  # moves its limit, where it adapts


def _by_threads(ctx: Context, req: WriteRequest, opts: EngineOptions, t: _Threads) -> Outcome:
    """The engine in threads, its limit moved by the adaptive controller if there is one,
    progress and the journal's flush on each tick."""
    engine = Engine(
        ctx.git, req.entries, opts, spawn=ctx.spawn, skip=t.skip, prestarted=req.catfiles
    )
    ui, adapt = ctx.ui, t.adapt
    _start_ui(ui, req, t.remaining)
    interval = controller.INTERVAL_S if adapt is not None else 0.1
    last_t, last_files, last_bytes = time.monotonic(), 0, 0

    def tick(eng: Engine) -> None:
        nonlocal last_t, last_files, last_bytes
        files, nbytes = eng.progress()
        ui.update(files, nbytes)
        if req.journal is not None:
            req.journal.flush()  # a kill loses at most one tick of records
        if adapt is not None:
            now = time.monotonic()
            if now - last_t >= interval:
                eng.set_limit(adapt.observe(files - last_files, nbytes - last_bytes, now - last_t))
                last_t, last_files, last_bytes = now, files, nbytes

    try:
        outcome = engine.run(tick=tick, interval=min(0.1, interval))
    except KeyboardInterrupt:
        raise Interrupted(2, RESUME_HINT) from None
    finally:
        ui.finish()
    _relay(ui, outcome)
    return outcome


def _relay(ui: Reporter, outcome: Outcome) -> None:
    """Say what the writers' git processes printed on stderr (git's lines about the files
    it converted, which git's checkout prints as it writes them, -q or not)."""
    for said in outcome.git_said:
        for line in decode(said).splitlines():
            ui.git_message(line)


def _finish(
    outcome: Outcome, pre_stats: dict[int, bytes], kept: int, adapt_summary: str | None
) -> Outcome:
    """Fold what was written before the writers started into their outcome."""
    for i, st in pre_stats.items():
        outcome.stats[i] = st
    outcome.files += len(pre_stats)
    outcome.kept = kept
    outcome.adapt_summary = adapt_summary
    return outcome


def _write_attributes_first(
    ctx: Context,
    conv: convert.ConversionPlan,
    entries: Sequence[Entry],
    root_b: bytes,
    skip: list[bool],
    pre_stats: dict[int, bytes],
) -> None:
    """.gitattributes go first where git's filters read them from the work tree (git <
    2.41, which has no ``--attr-source``): each is written converted before any worker
    starts, so no filter process reads a half-written attributes file."""
    git = ctx.git
    todo = [
        i
        for i, e in enumerate(entries)
        if not skip[i]
        and attributes.is_gitattributes(e.path)
        and e.mode not in (MODE_SYMLINK, MODE_GITLINK)
    ]
    if not todo:
        return
    plain = CatFile(git, spawn=ctx.spawn, name="cat-file (attributes)")
    try:
        raw: dict[int, bytes] = {}
        for i in todo:
            e = entries[i]
            plain.send(plain.request_line(e.oid))
            _kind, size = plain.read_header(e.oid)
            raw[i] = plain.read_small(size)
    finally:
        plain.close()
    for i in todo:
        e = entries[i]
        path = full_path(root_b, e.path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        c = conv.per_entry[i]
        _replace_file(path, raw[i] if c is None or c.by_git else c.apply(raw[i], e.oid), e.mode)
    for i in todo:  # now that every attributes file is there, git's own conversions
        e = entries[i]
        c = conv.per_entry[i]
        if c is not None and c.by_git:
            data = git.out("cat-file", "--filters", f"--path={os.fsdecode(e.path)}", e.oid)
            _replace_file(full_path(root_b, e.path), data, e.mode)
    for i in todo:
        pre_stats[i] = pack_stat(os.lstat(full_path(root_b, entries[i].path)))
        skip[i] = True


def _write_given(
    root_b: bytes,
    entries: Sequence[Entry],
    contents: Mapping[int, bytes],
    skip: list[bool],
    pre_stats: dict[int, bytes],
) -> None:
    """Entries whose final bytes the caller made (export-subst), written before the rest."""
    for i, data in contents.items():
        if skip[i]:
            continue
        e = entries[i]
        path = full_path(root_b, e.path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _replace_file(path, data, e.mode)
        pre_stats[i] = pack_stat(os.lstat(path))
        skip[i] = True


def _replace_file(path: bytes, data: bytes, mode: int) -> None:
    tmp = path + b".pcheckout-tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
        0o777 if mode == MODE_EXEC else 0o666,
    )
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _overlaps(ctx: Context, req: WriteRequest) -> bool:
    """Whether a resume proves what it keeps while it writes the rest: where its lstats
    are round trips (``stat_threads`` > 1), with the journal of this tree, writer threads
    (a fork must not copy the lstat threads) and no attributes read from the work tree
    (git < 2.41 with filters: what is written would depend on a file not yet proven)."""
    prev = req.previous
    if req.stat_threads <= 1 or prev is None or prev.version != 2 or prev.tree != req.tree:
        return False
    if req.plan.processes or req.contents:
        return False
    conv = req.conversion
    return not (conv.by_git > 0 and req.tree_attributes and not ctx.git.has(GIT_ATTR_SOURCE))


def _resume_overlapped(ctx: Context, req: WriteRequest) -> Outcome:
    """Resume with the journal where each ``lstat`` is a round trip: the entries the
    interrupted run recorded (and raw now) are ``lstat``-ed in the background while the
    writers write every other entry (those are written in any case); then whatever
    recorded entry does not prove to be exactly what was recorded is written too (none,
    unless something changed it since).  Proving 4,800 entries took ~0.2 s and starting
    the writers ~0.1-0.2 s on the 1 ms mount: they now overlap.

    The lstats the kernel answers from its caches (a re-run right after the kill:
    files written a few seconds ago) are taken first, in this thread, before the writers
    start (~4 us each; beside the writers, in threads, 4,291 of them took 0.42 s), and
    the entries they do not prove go to the writers with the unrecorded ones."""
    entries = req.entries
    n = len(entries)
    root_b = os.fsencode(req.root)
    proof = _Proof.of(req)
    raw = [c is None for c in req.conversion.per_entry]
    todo = journal.candidates(proof.previous, req.tree, raw, [False] * n, req.positions)
    # Answered from the kernel's caches (files written a moment ago), the lstats are
    # microseconds each: taken here before the writers start, with no thread beside
    # them; from the first slow chunk on they run beside the writers, in threads.
    paths = [entries[i].path for i in todo]
    quick = lstat_while_cached(root_b, paths)
    k = len(quick)
    stats: list[bytes | None] = [None] * n
    proven = proof.prove(todo[:k], quick, stats)
    later = todo[k:]
    # first: all but what is kept already and what the prover has yet to answer
    first_too = [True] * n
    for i in [*proven, *later]:
        first_too[i] = False
    first = [i for i in range(n) if first_too[i]]
    prover = _Prover(root_b, paths[k:], req.stat_threads)
    nbytes = sum(max(entries[i].size, 0) for i in first)
    ui = RoundReporter(ctx.ui, len(first), nbytes, req.plan.workers)
    round_ctx = ctx._replace(ui=ui)
    outcomes: list[Outcome] = []
    try:
        _write_group(round_ctx, req, first, stats, outcomes)
        rest: list[int] = []
        if later:
            proven += proof.prove(later, prover.result(), stats)
            # the recorded entries that changed since (rare): their progress counts beyond
            # the total shown at first, which did not know them yet
            rest = [i for i in later if stats[i] is None]
        if req.journal is not None and not req.journal.continued:
            for i in proven:
                packed = stats[i]
                assert packed is not None
                req.journal.done(i, packed)
        if rest:
            _write_group(round_ctx, req, rest, stats, outcomes)
    finally:
        ui.done()
    out = merge_outcomes(stats, outcomes)
    out.files += len(proven)
    out.kept = len(proven)
    return out


class _Proof(NamedTuple):
    """What proves a recorded entry unchanged: the interrupted run's journal and what
    the tree asks of each entry."""

    previous: journal.Previous
    modes: list[int]
    sizes: list[int]
    positions: Sequence[int] | None

    @classmethod
    def of(cls, req: WriteRequest) -> _Proof:
        assert req.previous is not None
        entries = req.entries
        return cls(
            req.previous, [e.mode for e in entries], [e.size for e in entries], req.positions
        )

    def prove(
        self, todo: list[int], found: Sequence[os.stat_result | None], stats: list[bytes | None]
    ) -> list[int]:
        """Which of ``todo`` (their lstats ``found``) are exactly what was recorded; their
        stat data goes into ``stats``."""
        proven = journal.proven(self.previous, todo, found, self.modes, self.sizes, self.positions)
        by_index = dict(zip(todo, found, strict=False))  # (found may be a prefix)
        for i in proven:
            st = by_index[i]
            assert st is not None
            stats[i] = pack_stat(st)
        return proven


class _Prover:
    """The lstats of ``paths`` in a thread (in parallel where each is a round trip),
    started at once if there are any."""

    def __init__(self, root_b: bytes, paths: list[bytes], threads: int) -> None:
        self._found: list[list[os.stat_result | None]] = []
        self._failed: list[BaseException] = []
        self._args = (root_b, paths, threads)
        self._thread = threading.Thread(target=self._prove, name="pcheckout-prove", daemon=True)
        if paths:
            self._thread.start()

    def _prove(self) -> None:
        root_b, paths, threads = self._args
        try:
            self._found.append(lstat_many_or_none(root_b, paths, threads, cached_first=False))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            self._failed.append(exc)

    def result(self) -> list[os.stat_result | None]:
        """The lstats, once the thread is done (its error raised here)."""
        self._thread.join()
        if self._failed:
            raise self._failed[0]
        return self._found[0]


def _write_group(
    ctx: Context,
    req: WriteRequest,
    group: list[int],
    stats: list[bytes | None],
    outcomes: list[Outcome],
) -> None:
    """Write ``group`` (indexes into ``req.entries``) over whatever is in the way; fill in
    their ``stats`` and append the round's outcome."""
    if not group:
        return
    sub = dataclasses.replace(
        req,
        entries=[req.entries[i] for i in group],
        conversion=req.conversion.take(group),
        resume=False,
        overwrite=True,
        previous=None,
        positions=group if req.positions is None else [req.positions[i] for i in group],
    )
    out = write_tree(ctx, sub)
    outcomes.append(out)
    for j, i in enumerate(group):
        stats[i] = out.stats[j]


def _keep_completed(
    ctx: Context, req: WriteRequest, root_b: bytes, skip: list[bool], pre_stats: dict[int, bytes]
) -> int:
    """Resume: keep what the interrupted run completed.  With its journal, each
    recorded entry (written raw) that is raw now too is kept if ``lstat`` (in
    parallel) gives exactly the recorded stat data; everything else is written
    again, over whatever is in the way (a file cut short, one in flight).
    Without a usable journal (an older pcheckout's marker, another tree, a
    header cut short) each entry on disk is verified by its content instead."""
    entries = req.entries
    conversions = req.conversion.per_entry
    prev = req.previous
    if prev is None or prev.version != 2 or prev.tree != req.tree:
        return _keep_verified(ctx, req, root_b, skip, pre_stats)
    raw = [c is None for c in conversions]
    todo = journal.candidates(prev, req.tree, raw, skip, req.positions)
    stats = lstat_many_or_none(root_b, [entries[i].path for i in todo], req.stat_threads)
    modes = [e.mode for e in entries]
    sizes = [e.size for e in entries]
    proven = journal.proven(prev, todo, stats, modes, sizes, req.positions)
    by_pos = dict(zip(todo, stats, strict=True))
    for i in proven:
        st = by_pos[i]
        assert st is not None
        pre_stats[i] = pack_stat(st)
        skip[i] = True
    if req.journal is not None and not req.journal.continued:
        # (a continued journal holds these records already: appending them again cost
        # ~0.1 s of WRITEs for 4,800 kept entries on the 1 ms mount)
        for i in proven:
            req.journal.done(i, pre_stats[i])
    return len(proven)


def _keep_verified(
    ctx: Context, req: WriteRequest, root_b: bytes, skip: list[bool], pre_stats: dict[int, bytes]
) -> int:
    """Keep entries already written correctly (content hashes to the blob; a
    converted file is written again)."""
    hash_name = ctx.repo.object_format
    entries, conversions = req.entries, req.conversion.per_entry
    kept = 0
    todo = [i for i in range(len(entries)) if not skip[i]]
    stats = lstat_many_or_none(root_b, [entries[i].path for i in todo], req.stat_threads)
    for i, st in zip(todo, stats, strict=True):
        if st is None:
            continue
        e = entries[i]
        path = full_path(root_b, e.path)
        ok = False
        if e.mode == MODE_SYMLINK and stat_mod.S_ISLNK(st.st_mode):
            ok = blob_oid(os.readlink(path), hash_name) == e.oid
        elif e.mode == MODE_GITLINK:
            ok = stat_mod.S_ISDIR(st.st_mode)
        elif (
            stat_mod.S_ISREG(st.st_mode)
            and conversions[i] is None
            and e.size in (-1, st.st_size)
            and bool(st.st_mode & 0o100) == (e.mode == MODE_EXEC)
        ):
            ok = file_blob_oid(path, st.st_size, hash_name) == e.oid
        if ok:
            pre_stats[i] = pack_stat(st)
            skip[i] = True
            kept += 1
    return kept


class RoundReporter:
    """One progress display over all write rounds: totals given once, counts carried
    from round to round, finished once at the end."""

    def __init__(self, ui: Reporter, files: int, nbytes: int, workers: int) -> None:
        self.ui = ui
        self.total = (files, nbytes, workers)
        self.started = False
        self.base_files = 0
        self.base_bytes = 0
        self.last = (0, 0)

    def debug(self, message: str) -> None:
        self.ui.debug(message)

    def start(self, files: int, nbytes: int, workers: int) -> None:
        if not self.started:
            self.started = True
            self.ui.start(*self.total)

    def update(self, files: int, nbytes: int) -> None:
        self.last = (files, nbytes)
        self.ui.update(self.base_files + files, self.base_bytes + nbytes)

    def finish(self) -> None:  # a round ended: its counts become the base of the next
        self.base_files += self.last[0]
        self.base_bytes += self.last[1]
        self.last = (0, 0)

    def fetch(self, objects: int, total: int, nbytes: int) -> None:
        self.ui.fetch(objects, total, nbytes)

    def moved(self, result: Result) -> None:
        self.ui.moved(result)

    def git_message(self, line: str) -> None:
        self.ui.git_message(line)

    def done(self) -> None:
        if self.started:
            self.ui.finish()


def merge_outcomes(stats: list[bytes | None], outcomes: Sequence[Outcome]) -> Outcome:
    """One outcome for all rounds (counts summed, the last adapt summary)."""
    return Outcome(
        stats=stats,
        files=sum(o.files for o in outcomes),
        bytes=sum(o.bytes for o in outcomes),
        seconds=sum(o.seconds for o in outcomes),
        restarts=sum(o.restarts for o in outcomes),
        workers_used=max((o.workers_used for o in outcomes), default=0),
        limit_history=[h for o in outcomes for h in o.limit_history],
        processes=any(o.processes for o in outcomes),
        kept=sum(o.kept for o in outcomes),
        adapt_summary=next((o.adapt_summary for o in reversed(outcomes) if o.adapt_summary), None),
    )
