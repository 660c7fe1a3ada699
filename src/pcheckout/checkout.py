"""The core: check a commit out into a working tree, or export a tree.

``checkout(opts, ui)`` takes typed options and a reporter; it never reads
``sys.argv`` or prints.  Order of work for a fresh checkout:

1. discover the repository, read config, resolve REV, list the tree (one git call);
2. refuse unsafe trees and occupied destinations before writing anything;
3. detect the filesystem and plan the worker count (``--dry-run`` stops here);
4. write ``.gitattributes`` first when conversion is on (git reads them);
5. write every entry in parallel (``engine.Engine``);
6. write the index from the stat data the workers collected (lock + rename);
7. move HEAD as ``git checkout REV`` would.
"""

from __future__ import annotations

import os
import stat as stat_mod
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pcheckout.errors import (
    DestinationError,
    GitError,
    Interrupted,
    PcheckoutError,
    UnknownRevisionError,
    WorktreeNotEmptyError,
    quote_path,
    quote_paths,
)
from pcheckout.git import attributes
from pcheckout.git.catfile import Spawn
from pcheckout.git.config import config_bool, read_config
from pcheckout.git.index import write_all
from pcheckout.git.objects import batch_check, blob_oid, file_blob_oid, resolve
from pcheckout.git.refs import is_branch_name, is_local_branch, symbolic_head
from pcheckout.git.runner import GIT_ATTR_SOURCE, GIT_CATFILE_Z, Git, Repo, discover
from pcheckout.git.tree import MODE_GITLINK, MODE_SYMLINK, Entry, list_tree
from pcheckout.plan import policy
from pcheckout.write.engine import Engine, EngineOptions, Outcome, pack_stat, unpack_stat

#: Marker left in the git dir while a checkout is writing; a re-run that finds
#: it resumes (verifies what is there, writes the rest) instead of refusing.
IN_PROGRESS = "pcheckout-in-progress"


class Reporter(Protocol):
    def debug(self, message: str) -> None: ...
    def start(self, files: int, nbytes: int, workers: int) -> None: ...
    def update(self, files: int, nbytes: int) -> None: ...
    def finish(self) -> None: ...


class NullReporter:
    def debug(self, message: str) -> None:
        pass

    def start(self, files: int, nbytes: int, workers: int) -> None:
        pass

    def update(self, files: int, nbytes: int) -> None:
        pass

    def finish(self) -> None:
        pass


@dataclass(frozen=True)
class CheckoutOptions:
    directory: Path
    rev: str = "HEAD"
    workers: str | None = None  # "--workers" as given: None/"auto" or a number
    dry_run: bool = False
    force: bool = False
    adapt: bool = True
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    spawn: Spawn | None = None  # test seam: a stand-in cat-file process


@dataclass(frozen=True)
class ExportOptions:
    repository: Path
    rev: str
    destination: Path
    workers: str | None = None
    dry_run: bool = False
    adapt: bool = True
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    spawn: Spawn | None = None


@dataclass
class Result:
    mode: str  # "checkout" | "export" | "switch" | "resume"
    files: int
    bytes: int
    workers: policy.WorkerPlan
    filesystem: object  # fsdetect.FsInfo
    seconds: float = 0.0
    written: int = 0
    kept: int = 0
    deleted: int = 0
    dry_run: bool = False
    adapt_summary: str | None = None
    head: str | None = None
    conversion: list[str] = field(default_factory=list)
    processes: bool = False  # written by forked processes (else threads)

    def to_json(self) -> dict[str, object]:
        fs = self.filesystem
        return {
            "mode": self.mode,
            "filesystem": fs.to_json() if hasattr(fs, "to_json") else None,
            "files": self.files,
            "bytes": self.bytes,
            "workers": self.workers.workers,
            "reason": self.workers.reason,
            "source": self.workers.source,
            "adapt": self.workers.adapt,
            "processes": self.processes if not self.dry_run else self.workers.processes,
            "dry_run": self.dry_run,
            "seconds": round(self.seconds, 4),
            "written": self.written,
            "kept": self.kept,
            "deleted": self.deleted,
            "adapt_summary": self.adapt_summary,
            "conversion": self.conversion,
        }


# --------------------------------------------------------------------------
def checkout(opts: CheckoutOptions, ui: Reporter | None = None) -> Result:
    ui = ui or NullReporter()
    git = Git(opts.directory, debug=ui.debug)
    repo = discover(git)
    if repo.work_tree is None:
        raise DestinationError(
            f"{opts.directory} is a bare repository; use 'pcheckout export' to write a tree"
        )
    root = repo.work_tree
    marker = repo.git_dir / IN_PROGRESS
    occupied = _occupants(root)
    resume = bool(occupied) and marker.exists()
    switching = bool(occupied) and not resume and repo.index_path.exists()
    # Independent git processes run side by side: on a network mount each one
    # spends tens of round trips finding the repository before it answers.
    config, target = _concurrently(lambda: read_config(git),
                                   lambda: _resolve_target(git, opts.rev))
    commit, tree = target.commit, target.tree
    # Sizes cost git a header read per blob; only the dry run reports them.
    listing = [lambda: list_tree(git, tree, sizes=opts.dry_run)]
    if switching and target.head_tree is not None:
        listing.append(lambda: list_tree(git, target.head_tree or "", sizes=False))
    entries, *head_entries = _concurrently(*listing)
    _check_safe(entries, config)

    if occupied and not resume:
        if switching:
            from pcheckout import switch  # incremental switch lives in its own module

            return switch.switch(git, repo, config, opts, target, entries,
                                 head_entries[0] if head_entries else [], ui)
        raise WorktreeNotEmptyError(
            f"working tree {root} is not empty and has no index: " + quote_paths(occupied)
        )
    fs, plan = plan_workers(git, config, root, entries, opts.workers, opts.environ, opts.adapt)
    conversion = attributes.conversion_reasons(entries, config, repo.common_dir)
    result = Result(
        "resume" if resume else "checkout",
        len(entries),
        sum(max(e.size, 0) for e in entries),
        plan,
        fs,
        dry_run=opts.dry_run,
        conversion=conversion,
    )
    if opts.dry_run:
        return result
    try:
        marker.write_text(commit + "\n")
    except OSError as exc:  # e.g. EROFS, ENOSPC: before anything is written
        from pcheckout.errors import WriteError

        raise WriteError(os.fsencode(marker), exc) from None
    t0 = time.monotonic()
    outcome = write_tree(
        git, config, repo, tree, entries, root, plan, ui,
        conversion=bool(conversion), verify_existing=resume, spawn=opts.spawn,
    )
    write_index(repo, config, entries, outcome, settle=settles_index(fs),
                git_version=git.version)
    head = update_head(git, repo, config, opts.rev, target)
    marker.unlink(missing_ok=True)
    result.seconds = time.monotonic() - t0
    result.bytes = outcome.bytes
    result.written = outcome.files - getattr(outcome, "kept", 0)
    result.kept = getattr(outcome, "kept", 0)
    result.adapt_summary = getattr(outcome, "adapt_summary", None)
    result.processes = outcome.processes
    result.head = head
    return result


def export(opts: ExportOptions, ui: Reporter | None = None) -> Result:
    """The tree alone into ``destination``: no .git, no index (like archive | tar -x)."""
    ui = ui or NullReporter()
    git = Git(opts.repository, debug=ui.debug)
    repo = discover(git)
    config = read_config(git)
    tree = resolve(git, opts.rev, "tree")
    entries = list_tree(git, tree, sizes=opts.dry_run)
    _check_safe(entries, config)
    dest = Path(os.path.abspath(opts.destination))
    if dest.exists():
        if not dest.is_dir():
            raise DestinationError(f"destination {dest} exists and is not a directory")
        occupied = _occupants(dest, ignore_git=False)
        if occupied:
            raise WorktreeNotEmptyError(
                f"destination {dest} is not empty: " + quote_paths(occupied)
            )
    fs, plan = plan_workers(git, config, dest, entries, opts.workers, opts.environ, opts.adapt)
    conversion = attributes.conversion_reasons(entries, config, repo.common_dir)
    result = Result(
        "export", len(entries), sum(max(e.size, 0) for e in entries), plan, fs,
        dry_run=opts.dry_run, conversion=conversion,
    )
    if opts.dry_run:
        return result
    dest.mkdir(parents=True, exist_ok=True)
    # Attributes are looked up in the work tree: point git at the destination
    # and run it from there (from outside, git finds no attributes at all).
    # No index: attributes must come from the exported tree alone, never from
    # the source repository's index (git < 2.40 falls back to it).
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pcheckout-export-") as scratch:
        git_w = Git(
            dest,
            debug=ui.debug,
            env={**opts.environ, "GIT_DIR": str(repo.git_dir), "GIT_WORK_TREE": str(dest),
                 "GIT_INDEX_FILE": os.path.join(scratch, "no-index")},
            version=git.version,
        )
        t0 = time.monotonic()
        outcome = write_tree(
            git_w, config, repo, tree, entries, dest, plan, ui,
            conversion=bool(conversion), verify_existing=False, spawn=opts.spawn,
        )
    result.seconds = time.monotonic() - t0
    result.bytes = outcome.bytes
    result.written = outcome.files
    result.adapt_summary = getattr(outcome, "adapt_summary", None)
    result.processes = outcome.processes
    return result


# --------------------------------------------------------------------------
def _concurrently(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, the calls run on threads side by side; the first
    call's exception (in argument order) is raised after all have finished."""
    if len(calls) == 1:
        return [calls[0]()]
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(k: int) -> None:
        try:
            results[k] = calls[k]()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            errors[k] = exc

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(1, len(calls))]
    for t in threads:
        t.start()
    run(0)
    for t in threads:
        t.join()
    for exc in errors:
        if exc is not None:
            raise exc
    return results


@dataclass(frozen=True)
class Target:
    """Where ``git checkout REV`` goes."""

    commit: str
    tree: str
    branch: str | None  # the local branch HEAD will name, else detached
    branch_exists: bool  # False: a remote-tracking branch guessed, to be created
    head_tree: str | None  # the tree HEAD has now (None: unborn HEAD)
    head_commit: str | None  # the commit HEAD is at now (None: unborn HEAD)


def _resolve_target(git: Git, rev: str) -> Target:
    """Resolve ``rev`` as git checkout reads it: a local branch of that name wins
    over a tag or any other reading (git warns "refname is ambiguous" and takes
    the branch); else any commit-ish; else a unique remote-tracking branch
    (``--guess``).  One ``cat-file --batch-check`` answers the common case."""
    if rev and not rev.startswith("-") and "\n" not in rev:
        names = ["HEAD^{tree}", "HEAD^{commit}", f"{rev}^{{commit}}", f"{rev}^{{tree}}"]
        if is_branch_name(rev):
            names += [f"refs/heads/{rev}^{{commit}}", f"refs/heads/{rev}^{{tree}}"]
        found = [f[0] if f else None for f in batch_check(git, names)]
        head = found[0], found[1]
        if len(found) > 4 and found[4] and found[5]:
            return Target(found[4], found[5], rev, True, *head)
        if found[2] and found[3]:
            return Target(found[2], found[3], None, False, *head)
    # Unknown (perhaps a remote branch to guess), or not sayable in a batch line.
    head = _head_tree_and_commit(git)
    try:
        commit = resolve(git, rev, "commit")
    except UnknownRevisionError:
        remote = _unique_remote_branch(git, rev)
        if remote is None:
            raise
        commit = resolve(git, remote, "commit")
        return Target(commit, resolve(git, commit, "tree"), rev, False, *head)
    branch = rev if is_local_branch(git, rev) else None
    return Target(commit, resolve(git, commit, "tree"), branch, branch is not None, *head)


def _head_tree_and_commit(git: Git) -> tuple[str | None, str | None]:
    try:
        return resolve(git, "HEAD", "tree"), resolve(git, "HEAD", "commit")
    except UnknownRevisionError:  # unborn
        return None, None


def _unique_remote_branch(git: Git, name: str) -> str | None:
    """git checkout's --guess: ``name`` matches exactly one remote-tracking branch."""
    if not name or name.startswith("-"):
        return None
    out = git.out("for-each-ref", "--format=%(refname)", "refs/remotes/")
    matches = [
        r for r in out.decode("utf-8", "replace").splitlines()
        if r.count("/") >= 3 and r.split("/", 3)[3] == name
    ]
    return matches[0] if len(matches) == 1 else None


def _check_safe(entries: list[Entry], config: dict[str, str]) -> None:
    from pcheckout.git import pathsafety

    ntfs, hfs = pathsafety.protections_from_config(config.get)
    pathsafety.check_tree(((e.path, e.mode) for e in entries), protect_ntfs=ntfs, protect_hfs=hfs)


def _occupants(root: Path, *, ignore_git: bool = True) -> list[bytes]:
    """What is in ``root`` besides .git (sorted, a few are enough to name)."""
    try:
        with os.scandir(os.fsencode(root)) as it:
            names = sorted(e.name for e in it if not (ignore_git and e.name == b".git"))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise DestinationError(f"cannot read {root}: {exc.strerror}") from None
    return names


def plan_workers(
    git: Git,
    config: dict[str, str],
    root: Path,
    entries: list[Entry],
    workers: str | None,
    environ: dict[str, str],
    adapt: bool,
    fs: object | None = None,
) -> tuple[object, policy.WorkerPlan]:
    """The filesystem under ``root`` (detected unless given) and the worker plan."""
    explicit = policy.explicit_choice(workers, environ, config)
    if fs is None:
        from pcheckout.fs import detect as fsdetect

        fs = fsdetect.detect(str(root))
    tuned = None
    if explicit is None:
        try:
            from pcheckout.plan import tune

            tuned = tune.lookup(fs)
        except (ImportError, PcheckoutError, OSError, ValueError):
            tuned = None
    plan = policy.choose_workers(
        fs,
        cpus=policy.CpuInfo.current(),
        entries=len(entries),
        nbytes=sum(max(e.size, 0) for e in entries),
        explicit=explicit,
        tuned=tuned,
        allow_adapt=adapt,
    )
    return fs, plan


def write_tree(
    git: Git,
    config: dict[str, str],
    repo: Repo,
    tree: str,
    entries: list[Entry],
    root: Path,
    plan: policy.WorkerPlan,
    ui: Reporter,
    *,
    conversion: bool,
    verify_existing: bool,
    spawn: Spawn | None,
    skip: list[bool] | None = None,
    overwrite: bool = False,
) -> Outcome:
    """Write ``entries`` under ``root`` in parallel; return per-entry stat data."""
    root_b = os.fsencode(root)
    symlinks = config_bool(config.get("core.symlinks"), True)
    kept = 0
    if skip is None:
        skip = [False] * len(entries)
    pre_stats: dict[int, bytes] = {}
    if verify_existing:
        kept = _keep_verified(root_b, entries, skip, pre_stats, repo, conversion)
        overwrite = True
    if conversion:
        _write_attributes_first(git, repo, tree, entries, root_b, skip, pre_stats, spawn, ui)

    adapt = None
    max_threads = plan.workers
    if plan.adapt:
        from pcheckout.plan import controller as ctl

        adapt = ctl.Controller(plan.workers, minimum=1, maximum=policy.MAX_WORKERS)
        max_threads = policy.MAX_WORKERS
    opts = EngineOptions(
        root=root_b,
        workers=max_threads,
        initial_limit=plan.workers,
        filters=conversion,
        nul_requests=conversion and git.has(GIT_CATFILE_Z),
        attr_source=tree if conversion and git.has(GIT_ATTR_SOURCE) else None,
        symlinks=symlinks,
        overwrite=overwrite,
    )
    remaining = [i for i, s in enumerate(skip) if not s]

    def start_ui() -> None:
        ui.start(len(remaining), sum(max(entries[i].size, 0) for i in remaining), plan.workers)

    if plan.processes and adapt is None:
        from pcheckout.write import forked

        if forked.available() and len(remaining) >= forked.MIN_ENTRIES:
            try:
                outcome = forked.run(git, entries, opts, plan.workers, spawn=spawn, skip=skip,
                                     report=ui.update, forked=start_ui)
            except KeyboardInterrupt:
                raise Interrupted(2, "run 'pcheckout checkout' again to finish") from None
            finally:
                ui.finish()
            return _finish_outcome(outcome, pre_stats, kept, None)
    engine = Engine(git, entries, opts, spawn=spawn, skip=skip)
    start_ui()
    last = [time.monotonic(), 0, 0]

    def tick(eng: Engine) -> None:
        files, nbytes = eng.progress()
        ui.update(files, nbytes)
        if adapt is not None:
            now = time.monotonic()
            if now - last[0] >= adapt_interval:
                eng.set_limit(adapt.observe(files - last[1], nbytes - last[2], now - last[0]))
                last[:] = [now, files, nbytes]

    adapt_interval = 0.1
    if adapt is not None:
        from pcheckout.plan import controller as ctl

        adapt_interval = ctl.INTERVAL_S
    try:
        outcome = engine.run(tick=tick, interval=min(0.1, adapt_interval))
    except KeyboardInterrupt:
        raise Interrupted(2, "run 'pcheckout checkout' again to finish") from None
    finally:
        ui.finish()
    return _finish_outcome(outcome, pre_stats, kept, adapt.summary() if adapt else None)


def _finish_outcome(
    outcome: Outcome, pre_stats: dict[int, bytes], kept: int, adapt_summary: object
) -> Outcome:
    for i, st in pre_stats.items():
        outcome.stats[i] = st
    outcome.files += len(pre_stats)
    outcome.kept = kept  # type: ignore[attr-defined]
    outcome.adapt_summary = adapt_summary  # type: ignore[attr-defined]
    return outcome


def _write_attributes_first(
    git: Git,
    repo: Repo,
    tree: str,
    entries: list[Entry],
    root_b: bytes,
    skip: list[bool],
    pre_stats: dict[int, bytes],
    spawn: Spawn | None,
    ui: Reporter,
) -> None:
    """.gitattributes go first: cat-file --filters reads them from the work tree.

    Each is written raw, then rewritten through the filters (``* text eol=crlf``
    converts .gitattributes itself) before any worker starts, so no worker can
    read a half-written attributes file.
    """
    from pcheckout.git.catfile import CatFile

    todo = [i for i, e in enumerate(entries) if not skip[i] and attributes.is_gitattributes(e.path)
            and e.mode not in (MODE_SYMLINK, MODE_GITLINK)]
    if not todo:
        return
    plain = CatFile(git, spawn=spawn, name="cat-file (attributes)")
    try:
        raw: dict[int, bytes] = {}
        for i in todo:
            e = entries[i]
            plain.last_request = plain.request_line(e.oid)
            plain.send(plain.last_request)
            _kind, size = plain.read_header(e.oid)
            raw[i] = plain.read_small(size)
    finally:
        plain.close()
    for i in todo:
        path = root_b + b"/" + entries[i].path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        _replace_file(path, raw[i], entries[i].mode)
    filt = CatFile(git, filters=True, nul=git.has(GIT_CATFILE_Z),
                   attr_source=tree if git.has(GIT_ATTR_SOURCE) else None,
                   spawn=spawn, name="cat-file (attributes)")
    try:
        for i in todo:
            e = entries[i]
            if b"\n" in e.path and not filt.nul:
                data = git.out("cat-file", "--filters", f"--path={os.fsdecode(e.path)}", e.oid)
            else:
                filt.last_request = filt.request_line(e.oid, e.path)
                filt.send(filt.last_request)
                filt.read_header(e.oid)
                parts: list[bytes] = []
                filt.read_filtered(parts.append)
                data = b"".join(parts)
            path = root_b + b"/" + e.path
            if data != raw[i]:
                _replace_file(path, data, e.mode)
            pre_stats[i] = pack_stat(os.lstat(path))
            skip[i] = True
    finally:
        filt.close()


def _replace_file(path: bytes, data: bytes, mode: int) -> None:
    tmp = path + b".pcheckout-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                 0o777 if mode == 0o100755 else 0o666)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _keep_verified(
    root_b: bytes,
    entries: list[Entry],
    skip: list[bool],
    pre_stats: dict[int, bytes],
    repo: Repo,
    conversion: bool,
) -> int:
    """Resume: keep entries already written correctly (content hashes to the blob)."""
    kept = 0
    for i, e in enumerate(entries):
        if skip[i]:
            continue
        path = root_b + b"/" + e.path
        try:
            st = os.lstat(path)
        except OSError:
            continue
        ok = False
        if e.mode == MODE_SYMLINK and stat_mod.S_ISLNK(st.st_mode):
            ok = blob_oid(os.readlink(path), repo.object_format) == e.oid
        elif e.mode == MODE_GITLINK:
            ok = stat_mod.S_ISDIR(st.st_mode)
        elif stat_mod.S_ISREG(st.st_mode) and not conversion and e.size in (-1, st.st_size):
            want_x = e.mode == 0o100755
            if bool(st.st_mode & 0o100) == want_x:
                ok = file_blob_oid(path, st.st_size, repo.object_format) == e.oid
        if ok:
            pre_stats[i] = pack_stat(st)
            skip[i] = True
            kept += 1
    return kept


#: git (as usually built, without USE_NSEC) trusts an index entry's stat data
#: only if the index file is from a later *second* than the file's mtime; a
#: "racily clean" entry is re-hashed by the next ``git status``.  Measured here
#: with strace: index written 50 ms after the files -> every file re-hashed;
#: 1.1 s later -> none.  Waiting costs up to a second, so we wait only on
#: network-like filesystems (SETTLE_KINDS: re-hashing a file costs round trips)
#: and only when at least this many entries would be racy.  On tmpfs or a local
#: or virtual disk the re-hash is cheaper than the wait, and git's own checkout
#: never waits.
SETTLE_MIN_RACY = 64


#: ...and only when the wait costs at most this share of the time spent writing:
#: a 40 s NFS checkout may wait a second, a 1 s one may not (on the FUSE
#: imitation of NFS an unconditional wait turned 0.97 s checkouts into 1.9 s).
SETTLE_MAX_SHARE = 0.05


def settle_racy_timestamps(stats: list[bytes | None], elapsed: float = float("inf")) -> float:
    """Sleep into the next second if many entries share the current one and the
    wait is small next to ``elapsed`` (the writing time); return the seconds slept."""
    seconds = [unpack_stat(st).mtime_ns // 10**9 for st in stats if st is not None]
    newest = max(seconds, default=0)
    if not newest:
        return 0.0
    racy = sum(1 for s in seconds if s >= newest)
    wait = newest + 1 - time.time() + 0.001
    if racy < SETTLE_MIN_RACY or wait <= 0 or wait > SETTLE_MAX_SHARE * elapsed:
        return 0.0
    time.sleep(wait)
    return wait


_U32 = 0xFFFFFFFF


def index_fields(e: Entry, packed: bytes) -> tuple[int | bytes, ...]:
    """The index's fixed fields for ``e`` from the stat data a worker packed,
    in index-entry order, cut to 32 bits as git does."""
    c, m, dev, ino, uid, gid, size = unpack_stat(packed)
    cs, cns = divmod(c, 10**9)
    ms, mns = divmod(m, 10**9)
    return (cs & _U32, cns, ms & _U32, mns, dev & _U32, ino & _U32, e.mode,
            uid & _U32, gid & _U32, size & _U32, bytes.fromhex(e.oid))


def index_entry(e: Entry, packed: bytes) -> object:
    """An IndexEntry for ``e`` (the switch mixes these with kept entries)."""
    from pcheckout.git.index import IndexEntry

    f = index_fields(e, packed)
    return IndexEntry(e.path, e.mode, f[10], f[0], f[1], f[2], f[3], f[4], f[5],  # type: ignore[arg-type]
                      f[7], f[8], f[9])  # type: ignore[arg-type]


#: Where re-reading a file costs network round trips, a racily clean index is
#: worth avoiding: NFS, SMB, other network filesystems and FUSE (directly or as
#: an overlay's upper layer).  A virtual disk is latency-bound for creates but
#: re-hashing reads hit the page cache (measured here: waiting cost the switch
#: of 1000 files 0.5 s on average, re-hashing them ~20 ms).
SETTLE_KINDS = frozenset({"nfs", "smb", "network", "fuse"})


def settles_index(fs: object) -> bool:
    """Should the index wait out racy timestamps for this filesystem?"""
    kind = getattr(fs, "kind", None)
    if kind == "overlay":
        kind = getattr(fs, "upper_kind", None)
    return kind in SETTLE_KINDS


def write_index(
    repo: Repo,
    config: dict[str, str],
    entries: list[Entry],
    outcome: Outcome,
    *,
    settle: bool = False,
    git_version: tuple[int, int, int] = (0, 0, 0),
) -> None:
    """The index for a fresh checkout, encoded straight from entries and stat data."""
    from pcheckout.git import index as ix

    stats = outcome.stats
    n = len(entries)
    order: Iterable[int] = range(n)
    # ls-tree's order is the index's (paths compared as bytes); sort only if not.
    if any(entries[i].path >= entries[i + 1].path for i in range(n - 1)):
        order = sorted(range(n), key=lambda i: entries[i].path)

    def rows() -> Iterator[ix.Row]:
        for i in order:
            e, packed = entries[i], stats[i]
            if packed is None:
                raise PcheckoutError(f"internal error: no stat data for {quote_path(e.path)}")
            yield e.path, index_fields(e, packed), 0, 0

    if settle:
        settle_racy_timestamps(stats, outcome.seconds)
    data = ix.encode_rows(
        rows(),
        n,
        version=_index_version(config),
        hash_name=repo.object_format,
        skip_hash=skip_hash(config, git_version),
    )
    ix.write_index_bytes(repo.index_path, data)


def skip_hash(config: dict[str, str], git_version: tuple[int, int, int]) -> bool:
    """index.skipHash (implied by feature.manyFiles) exists from git 2.40 on; an
    older git rejects an index without its checksum, so never write one for it."""
    if git_version[:2] < (2, 40):
        return False
    return config_bool(config.get("index.skiphash"),
                       config_bool(config.get("feature.manyfiles"), False))


def _index_version(config: dict[str, str]) -> int:
    env = os.environ.get("GIT_INDEX_VERSION")
    value = env or config.get("index.version")
    if value is None and config_bool(config.get("feature.manyfiles"), False):
        value = "4"
    try:
        v = int(value) if value else 2
    except ValueError:
        v = 2
    return v if v in (2, 3, 4) else 2


def update_head(git: Git, repo: Repo, config: dict[str, str], rev: str, target: Target) -> str:
    """Point HEAD where ``git checkout REV`` would; return a description.  The
    reflog says "checkout: moving from OLD to REV" with git's OLD: the branch
    name, or the full commit id when HEAD was detached."""
    commit, branch = target.commit, target.branch
    old = symbolic_head(git, repo, config)
    if old is not None and old.startswith("refs/heads/"):
        old_name = old.removeprefix("refs/heads/")
    else:
        old_name = target.head_commit or ""
    if rev == "HEAD":
        return old_name or commit
    if branch is not None:
        ref = f"refs/heads/{branch}"
        if not target.branch_exists:
            remote = _unique_remote_branch(git, branch)
            if remote is None:  # pragma: no cover - resolved earlier
                raise GitError(f"branch {branch} disappeared")
            git.run("branch", "--track", branch, remote.removeprefix("refs/remotes/"))
        git.run("symbolic-ref", "-m", f"checkout: moving from {old_name} to {branch}", "HEAD", ref)
        return branch
    git.run("update-ref", "--no-deref", "-m", f"checkout: moving from {old_name} to {rev}",
            "HEAD", commit)
    return f"detached at {rev}"

