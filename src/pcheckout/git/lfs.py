"""Git LFS pointers, and where git-lfs's smudge can be done here instead, byte for byte.

A path whose ``filter`` attribute is ``lfs`` is stored as a pointer blob (git-lfs's
``docs/spec.md``)::

    version https://git-lfs.github.com/spec/v1
    oid sha256:<64 lowercase hex>
    size <bytes>

and git-lfs's smudge writes the object ``<LocalMediaDir>/aa/bb/<oid>`` in its place.
When this module proves that git-lfs would do exactly that (:func:`smudge_plan`), the
writers copy the object themselves: no ``git-lfs filter-process``, no filter protocol.
The proof, per path: git-lfs is git's standard filter for ``lfs`` (the
``filter.lfs.process``/``smudge`` that ``git lfs install`` writes), no
``GIT_LFS_SKIP_SMUDGE``, no ``lfs.fetchinclude``/``lfs.fetchexclude`` (in the config or a
``.lfsconfig``), the path converts by the filter alone (no text, eol, ident or encoding),
its blob is a pointer in the spec's exact form (no ``ext-`` extension lines, size > 0),
and the object is in the local store with the pointer's size (git-lfs's smudge checks the
size, never the hash, before it copies a local object: ``lfs/gitfilter_smudge.go``).
Anything else goes through git's filters as before, so git-lfs decides.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from pcheckout.errors import LfsError
from pcheckout.git import lfsstage
from pcheckout.git.lfsstage import Stage
from pcheckout.git.runner import Git
from pcheckout.git.tree import Entry

#: The spec's first line (git-lfs accepts older aliases; those go to git-lfs).
SPEC_VERSION = b"version https://git-lfs.github.com/spec/v1\n"
#: Pointer files are smaller than this (spec: "less than 1024 bytes").
POINTER_MAX = 1024
#: The filter driver ``git lfs install`` configures.
STANDARD_PROCESS = "git-lfs filter-process"
STANDARD_SMUDGE = "git-lfs smudge -- %f"
#: The attribute value that names git-lfs's filter.
FILTER = "lfs"

_POINTER = re.compile(
    rb"version https://git-lfs\.github\.com/spec/v1\n"
    rb"((?:ext-[0-9]-[a-z0-9]+ sha256:[0-9a-f]{64}\n)*)"
    rb"oid sha256:([0-9a-f]{64})\n"
    rb"size (0|[1-9][0-9]{0,17})\n\Z"
)
#: git-lfs's decoder calls a blob without one of these words "not a pointer" before it
#: looks at anything else, and its smudge then writes the blob as it is.
_MARKER = re.compile(rb"git-media|hawser|git-lfs")
#: ``.lfsconfig`` keys that cannot change what a smudge of a local object writes.
_HARMLESS = re.compile(r"lfs\.url|remote\..+\.lfsurl|lfs\..+\.access|lfs\..+\.locksverify")


class Pointer(NamedTuple):
    """A pointer blob's fields."""

    oid: str  # sha256, 64 lowercase hex
    size: int
    extensions: int  # ext- lines (git-lfs runs the extensions' smudge: never here)


def parse_pointer(data: bytes) -> Pointer | None:
    """The pointer ``data`` holds in the spec's exact form (keys sorted, one LF after
    each line, nothing else, under 1024 bytes), or None."""
    if len(data) >= POINTER_MAX or not data.startswith(SPEC_VERSION):
        return None
    m = _POINTER.match(data)
    if m is None:
        return None
    ext = m.group(1)
    return Pointer(m.group(2).decode("ascii"), int(m.group(3)), ext.count(b"\n"))


def media_dir(config: Mapping[str, str], common_dir: os.PathLike[str] | str) -> str | None:
    """git-lfs's LocalMediaDir: ``<common dir>/lfs/objects``, or ``<lfs.storage>/objects``
    with a relative ``lfs.storage`` taken from the common dir (a linked worktree shares
    its main repository's store).  None where we would have to guess (``~`` paths)."""
    storage = config.get("lfs.storage") or ""
    if storage.startswith("~"):
        return None
    base = os.path.join(os.fspath(common_dir), storage or "lfs")
    return os.path.join(base, "objects")


def object_path(objects: str, oid: str) -> str:
    """Where git-lfs keeps object ``oid`` under its media directory."""
    return os.path.join(objects, oid[0:2], oid[2:4], oid)


def standard_filter(config: Mapping[str, str]) -> bool:
    """git's filter for ``lfs`` is git-lfs's own smudge: ``process`` wins when set."""
    process = config.get("filter.lfs.process")
    if process is not None:  # an empty one too: git then runs no smudge at all
        return process.strip() == STANDARD_PROCESS
    smudge = config.get("filter.lfs.smudge")
    return bool(smudge) and (smudge or "").strip() == STANDARD_SMUDGE


def repo_refusal(
    config: Mapping[str, str], environ: Mapping[str, str], lfsconfig_keys: Sequence[str]
) -> str | None:
    """Why no path of this run may be smudged in-process, or None."""
    if not standard_filter(config):
        return "filter.lfs is not git-lfs's standard filter"
    if "GIT_LFS_SKIP_SMUDGE" in environ:
        return "GIT_LFS_SKIP_SMUDGE is set"
    for key in ("lfs.fetchinclude", "lfs.fetchexclude"):
        if key in config:
            return f"{key} is set"
    for key in lfsconfig_keys:
        if not _HARMLESS.fullmatch(key):
            return f".lfsconfig sets {key}"
    return None


class Smudge(NamedTuple):
    """An LFS path the writers write from the local object."""

    path: str  # the object file
    size: int


class LfsPlan:
    """The LFS paths of one write: which are smudged here, which are missing."""

    __slots__ = (
        "fetched_bytes",
        "fetches",
        "files",
        "local",
        "local_bytes",
        "missing",
        "missing_bytes",
        "objects",
        "plain",
        "refusal",
    )

    def __init__(self) -> None:
        self.files = 0  # paths whose blob is a valid pointer and filter is lfs
        self.local: dict[int, Smudge] = {}  # entry index -> the object it is written from
        self.local_bytes = 0
        self.missing: dict[int, Pointer] = {}  # valid pointers whose object is not here
        self.missing_bytes = 0
        self.refusal: str | None = None  # why nothing is smudged here (None: it may be)
        self.plain: list[int] = []  # blobs git-lfs writes unchanged (no pointer): as stored
        self.objects: str | None = None  # the local store (LocalMediaDir)
        self.fetches = 0  # git lfs fetch processes run
        self.fetched_bytes = 0  # the bytes of the objects they fetched


def read_small_blobs(git: Git, oids: Sequence[str]) -> dict[str, bytes]:
    """The contents of the blobs among ``oids`` smaller than a pointer's limit, in one
    ``cat-file --batch`` (larger blobs are never pointers; their bytes are skipped)."""
    if not oids:
        return {}
    unique = list(dict.fromkeys(oids))
    proc = git.run("cat-file", "--batch", input="".join(f"{o}\n" for o in unique).encode())
    out: dict[str, bytes] = {}
    data = proc.stdout
    pos = 0
    for oid in unique:
        eol = data.index(b"\n", pos)
        header = data[pos:eol].split(b" ")
        pos = eol + 1
        if len(header) != 3:  # "<oid> missing"
            continue
        size = int(header[2])
        if header[1] == b"blob" and size < POINTER_MAX:
            out[oid] = data[pos : pos + size]
        pos += size + 1
    return out


def lfsconfig_keys(git: Git, entries: Sequence[Entry], work_tree: str | None) -> list[str]:
    """The keys a ``.lfsconfig`` sets: the tree's and the work tree's (git-lfs reads the
    work tree's file first)."""
    keys: list[str] = []
    sources: list[tuple[str, ...]] = [("--blob", e.oid) for e in entries if e.path == b".lfsconfig"]
    if work_tree is not None and os.path.isfile(os.path.join(work_tree, ".lfsconfig")):
        sources.append(("--file", os.path.join(work_tree, ".lfsconfig")))
    for src in sources:
        proc = git.run("config", *src, "--name-only", "-z", "--list", ok_codes=(0, 1))
        keys += [k.decode("utf-8", "replace").lower() for k in proc.stdout.split(b"\0") if k]
    return keys


class Where(NamedTuple):
    """What a plan is made from besides the entries."""

    git: Git
    config: Mapping[str, str]
    common_dir: str
    work_tree: str | None
    environ: Mapping[str, str]


def smudge_plan(
    where: Where,
    entries: Sequence[Entry],
    candidates: Sequence[int],
    local: Callable[[str], bool] | None = None,
    tree: Sequence[Entry] | None = None,
) -> LfsPlan:
    """Which of ``candidates`` (entries converted by the ``lfs`` filter alone) the writers
    write from the local LFS store, and which pointers name objects not here.  ``local``:
    whether a blob is in the repository (a partial clone's missing blobs are not read);
    ``tree``: the whole tree, when ``entries`` are some of it (its ``.lfsconfig``)."""
    plan = LfsPlan()
    if not candidates:
        return plan
    keys = lfsconfig_keys(where.git, entries if tree is None else tree, where.work_tree)
    plan.refusal = repo_refusal(where.config, where.environ, keys)
    objects = plan.objects = media_dir(where.config, where.common_dir)
    if objects is None and plan.refusal is None:
        plan.refusal = "lfs.storage names a home directory"
    todo = [i for i in candidates if local is None or local(entries[i].oid)]
    blobs = read_small_blobs(where.git, [entries[i].oid for i in todo])
    pointers: list[tuple[int, Pointer]] = []  # the pointers whose object may be local
    for i in todo:
        data = blobs.get(entries[i].oid)
        ptr = parse_pointer(data) if data is not None else None
        if ptr is None:
            if data is not None and plan.refusal is None and not _MARKER.search(data):
                plan.plain.append(i)
            continue
        plan.files += 1
        if ptr.extensions or ptr.size == 0:
            continue
        pointers.append((i, ptr))
    found = [object_path(objects, p.oid) for _i, p in pointers] if objects is not None else []
    sizes = stat_sizes(found)
    for k, (i, ptr) in enumerate(pointers):
        present = objects is not None and sizes[k] == ptr.size
        if present:
            if plan.refusal is None:
                plan.local[i] = Smudge(found[k], ptr.size)
            plan.local_bytes += ptr.size
        else:
            plan.missing[i] = ptr
            plan.missing_bytes += ptr.size
    return plan


#: :func:`stat_sizes` goes on in its thread while a chunk of this many stats averages
#: under :data:`FAST_STAT_S` each (the kernel's cache, a local disk); past that each one
#: waits on a server (a repository on NFS or FUSE) and the rest is spread over threads:
#: one after the other, a checkout's 600 objects were ~1,500 LOOKUPs (aa/, bb/, the
#: object) in a row on the 1 ms latency filesystem.
STAT_CHUNK = 32
FAST_STAT_S = 50e-6
STAT_THREADS = 16


def _size(path: str) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def stat_sizes(paths: Sequence[str]) -> list[int | None]:
    """Each path's size (None: no such file), in this thread while that is fast, else
    over :data:`STAT_THREADS` threads."""
    out: list[int | None] = []
    while len(out) < len(paths):
        t0 = time.perf_counter()
        chunk = paths[len(out) : len(out) + STAT_CHUNK]
        out += [_size(p) for p in chunk]
        if time.perf_counter() - t0 > FAST_STAT_S * len(chunk):
            break
    rest = paths[len(out) :]
    if rest:
        # (imported here: concurrent.futures and the logging it imports are ~3 ms of every
        # checkout's start that imports this module, git's writer's included)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(STAT_THREADS, thread_name_prefix="pcheckout-lfs") as pool:
            out += pool.map(_size, rest, chunksize=max(1, len(rest) // (4 * STAT_THREADS)))
    return out


def lfs_remote(config: Mapping[str, str]) -> str | None:
    """The remote git-lfs fetches from by default: ``origin``, else the only one."""
    names = sorted(
        k[len("remote.") : -len(".url")]
        for k in config
        if k.startswith("remote.") and k.endswith(".url")
    )
    if "origin" in names:
        return "origin"
    return names[0] if len(names) == 1 else None


#: Concurrent ``git lfs fetch`` processes for one checkout's missing objects.  One
#: fetch moves its objects through ``lfs.concurrenttransfers`` (8) transfers, but each
#: object it writes into the store is several round trips of its own (a temporary file,
#: its writes, the rename, the directories) where the repository is on a network mount.
FETCHERS = 4
#: Paths per ``--include`` list at most: one argument stays far below the kernel's
#: 128 KiB limit on a single argument.
INCLUDE_BYTES = 64 * 1024
#: Characters that make a path a pattern in ``--include`` (git-lfs's filepathfilter
#: globs, its comma list) or that a literal path cannot say there.
_PATTERN_CHARS = re.compile(r"[*?\[\],\\!#{}\s]")


def include_lists(paths: Sequence[bytes], fetchers: int = FETCHERS) -> list[str] | None:
    """The missing objects' paths in up to ``fetchers`` ``--include`` lists (more where one
    would be longer than :data:`INCLUDE_BYTES`), each a run of neighbouring paths; None
    where a path cannot be said literally there (one fetch of the whole commit then)."""
    names: list[str] = []
    for p in paths:
        try:
            name = p.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if _PATTERN_CHARS.search(name):
            return None
        names.append(name)
    if not names:
        return []
    total = sum(len(n) + 1 for n in names)
    parts = max(1, min(fetchers, len(names)), -(-total // INCLUDE_BYTES))
    return [
        ",".join(names[len(names) * j // parts : len(names) * (j + 1) // parts])
        for j in range(parts)
    ]


class Wanted(NamedTuple):
    """What a :class:`Fetch` asks the remote for: the commit's LFS objects at ``paths``."""

    paths: Mapping[int, bytes]  # the missing entries' paths
    commit: str
    remote: str


class Fetch:
    """The objects ``plan`` misses, fetched by ``git lfs fetch <remote> <commit>`` (what
    ``git lfs pull`` fetches, in git-lfs's own batches) on background threads while the
    writers write everything else: one process per ``--include`` list of the missing
    paths, :data:`FETCHERS` at a time (one of the whole commit where the paths cannot be
    listed).  :meth:`landed` hands over the entries of each fetch that ended, whose
    object is in the local store now, to be written from it; a failed fetch is one line
    naming the remote and the count of objects still missing."""

    def __init__(self, git: Git, plan: LfsPlan, what: Wanted, stage: Stage | None = None) -> None:
        self.plan = plan
        self.remote = what.remote
        base = ["lfs", "fetch", what.remote, what.commit]
        paths = what.paths
        order = sorted(plan.missing, key=lambda i: paths[i])
        lists = include_lists([paths[i] for i in order])
        if lists is None and stage is not None:  # (the whole commit: not all of it missing)
            stage.remove()
            stage = None
        #: a local store the objects land in first (``git/lfsstage.py``); None: the
        #: repository's own
        self.stage = stage
        self.git = git if stage is None else git.replace(env=stage.env)
        self._staged: list[str] = []  # the objects landed in the stage
        self.commands: list[tuple[list[str], list[int]]] = []
        if lists is None:
            self.commands.append((base, order))
        else:
            k = 0
            for names in lists:
                n = names.count(",") + 1
                self.commands.append(([*base, "--include", names], order[k : k + n]))
                k += n
        self._cv = threading.Condition()
        self._todo = list(range(len(self.commands)))
        self._procs: list[subprocess.Popen[bytes]] = []
        self._ended: list[int] = []  # commands that ended well, not yet handed over
        self._running = 0
        self._errors: list[bytes] = []
        self._stopped = False
        self._threads = [
            threading.Thread(target=self._run, name=f"pcheckout-lfs-fetch{k}", daemon=True)
            for k in range(min(FETCHERS, len(self.commands)))
        ]
        self._running = len(self._threads)

    def start(self) -> Fetch:
        for t in self._threads:
            t.start()
        return self

    def _run(self) -> None:
        try:
            while True:
                with self._cv:
                    if self._stopped or not self._todo or self._errors:
                        return
                    k = self._todo.pop(0)
                    proc = self.git.popen(
                        self.commands[k][0],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                    )
                    self._procs.append(proc)
                _out, err = proc.communicate()
                with self._cv:
                    self.plan.fetches += 1
                    if proc.returncode != 0:
                        if not self._stopped:
                            self._errors.append(err)
                    else:
                        self._ended.append(k)
                    self._cv.notify_all()
        finally:
            with self._cv:
                self._running -= 1
                self._cv.notify_all()

    def landed(self) -> tuple[dict[int, Smudge], bool]:
        """Wait for a fetch to end; the entries whose object it brought (moved to
        ``plan.local``), and whether every fetch has ended.  Raises LfsError once one
        failed (the others stopped)."""
        with self._cv:
            while not self._ended and not self._errors and self._running:
                self._cv.wait()
            ended, self._ended = self._ended, []
            failed, finished = bool(self._errors), not self._running
        if failed:
            self.kill()
            n = len(self.plan.missing)
            raise LfsError(
                f"cannot fetch {n} Git LFS object{'s' if n != 1 else ''} from '{self.remote}'",
                cmd=self.git.argv(self.commands[0][0]),
                stderr=self._errors[0],
            )
        got = [i for k in ended for i in self.commands[k][1]]
        return self._landed(got), finished

    def _landed(self, indexes: Sequence[int]) -> dict[int, Smudge]:
        objects = None if self.stage is None else self.stage.objects
        landed = _landed(self.plan, indexes, objects)
        if self.stage is not None:
            self._staged += [os.path.basename(sm.path) for sm in landed.values()]
        return landed

    def kill(self) -> None:
        """Stop fetching (a fetch or the writes failed, or an interruption)."""
        with self._cv:
            self._stopped = True
            for proc in self._procs:
                if proc.poll() is None:
                    proc.kill()
        for t in self._threads:
            if t.is_alive():
                t.join()
        for proc in self._procs:
            proc.wait()
        self.close()

    def keep(self, threads: int) -> None:
        """The objects landed in the stage, copied into the repository's store (where
        git-lfs keeps them: its next checkout, ``git lfs fsck``), then the stage removed;
        nothing where the objects landed in the store itself."""
        stage, store = self.stage, self.plan.objects
        if stage is None or store is None:
            return
        try:
            lfsstage.keep(stage, store, self._staged, threads)
        except OSError as exc:
            n = len(self._staged)
            raise LfsError(
                f"cannot store {n} Git LFS object{'s' if n != 1 else ''} in {store}: "
                f"{exc.strerror or exc}"
            ) from None
        finally:
            self.close()

    def close(self) -> None:
        """The stage removed, its objects with it (a run that failed or kept them)."""
        if self.stage is not None:
            self.stage.remove()

    def wait(self) -> dict[int, Smudge]:
        """Wait for every fetch; the entries whose object is local now (raises LfsError)."""
        got: dict[int, Smudge] = {}
        finished = False
        while not finished:
            more, finished = self.landed()
            got.update(more)
        got.update(self._landed(list(self.plan.missing)))  # (a list can match more)
        return got


def fetch_missing(git: Git, plan: LfsPlan, commit: str, remote: str) -> dict[int, Smudge]:
    """The objects ``plan`` misses, fetched by one ``git lfs fetch <remote> <commit>`` (what
    ``git lfs pull`` fetches: every object of the commit's tree, in git-lfs's batches);
    then the entries whose object is now in the local store, to be written from it.
    A failed fetch is one line naming the remote and the count; nothing is written."""
    if not plan.missing:
        return {}
    n = len(plan.missing)
    git.run(
        "lfs",
        "fetch",
        remote,
        commit,
        error=LfsError,
        what=f"cannot fetch {n} Git LFS object{'s' if n != 1 else ''} from '{remote}'",
    )
    plan.fetches += 1
    return _landed(plan, list(plan.missing))


def _landed(plan: LfsPlan, indexes: Sequence[int], objects: str | None = None) -> dict[int, Smudge]:
    """The entries among ``indexes`` of ``plan.missing`` whose object is in the local
    store now (``objects``; None: ``plan.objects``), moved to ``plan.local``."""
    objects = objects if objects is not None else plan.objects
    fetched: dict[int, Smudge] = {}
    if objects is None:
        return fetched
    todo = [(i, plan.missing[i]) for i in indexes if i in plan.missing]
    paths = [object_path(objects, ptr.oid) for _i, ptr in todo]
    for (i, ptr), found, size in zip(todo, paths, stat_sizes(paths), strict=True):
        if size != ptr.size:
            continue
        del plan.missing[i]
        plan.missing_bytes -= ptr.size
        plan.fetched_bytes += ptr.size
        if plan.refusal is None:
            fetched[i] = plan.local[i] = Smudge(found, ptr.size)
        plan.local_bytes += ptr.size
    return fetched
