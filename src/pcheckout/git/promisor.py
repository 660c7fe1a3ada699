"""Partial clones: find the blobs a checkout lacks without fetching, fetch them in batches.

git's own checkout (``unpack-trees.c: check_updates()`` -> ``read-cache.c:
prefetch_cache_entries()``) probes each entry it will write without fetching and hands
the missing ones to one ``promisor_remote_get_direct()``; a plain ``cat-file --batch``
instead runs one ``git fetch`` per missing blob (``object-file.c:
do_oid_object_info_extended()``), which is what made a blobless checkout 80x slower.

* Promisor remotes, in git's order (``promisor-remote.c: promisor_remote_config()`` and
  ``promisor_remote_init()``): config order of ``remote.<name>.promisor=true`` or
  ``remote.<name>.partialclonefilter``; the remote ``extensions.partialClone`` names goes
  to the tail (or is added there).
* What is missing: the local objects, listed by ``git cat-file --batch-all-objects``
  (never fetches), subtracted from the blobs wanted.  ``rev-list --missing=print`` also
  never fetches but rescans the pack directory once per missing object (each a readdir,
  a round trip on a network mount): docs/benchmarks.md, "Finding missing blobs".
* The fetch is git's ``promisor-remote.c: fetch_objects()`` command, byte for byte, with
  object ids on stdin; each remote gets everything still missing, the next one what the
  previous could not deliver (``promisor_remote_get_direct()``).
* ``GIT_NO_LAZY_FETCH=1`` (git >= 2.45, where it sets ``fetch_if_missing = 0`` at start-up)
  makes a cat-file answer ``missing`` for an object that is not there instead of fetching
  it; on older gits the variable only makes the lazy fetch die (the backports to 2.39.4 and
  later), so there the writers must never ask for an absent object (the caller's job:
  write an entry only after its blob has landed).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from pcheckout.errors import GitError
from pcheckout.git.config import config_bool
from pcheckout.git.lock import _try_record_lock
from pcheckout.git.runner import Git

__all__ = [
    "FETCH_ARGS",
    "GIT_NO_LAZY_FETCH",
    "Fetched",
    "PromisorFetchError",
    "batch_sizes",
    "fetch",
    "missing_objects",
    "no_lazy_fetch_env",
    "promisor_remotes",
]

#: ``git --no-lazy-fetch`` / ``GIT_NO_LAZY_FETCH=1`` disable lazy fetching at start-up from
#: git 2.45.0 on (environment.c); before that the variable only makes the fetch fail.
GIT_NO_LAZY_FETCH = (2, 45)
#: promisor-remote.c fetch_objects(): the command git runs (identical in 2.39 and 2.55).
FETCH_ARGS = (
    *("-c", "fetch.negotiationAlgorithm=noop"),
    *("fetch", "{remote}", "--no-tags", "--no-write-fetch-head", "--recurse-submodules=no"),
    *("--filter=blob:none", "--stdin"),
)
#: First batch of a fetch that overlaps the writes: small, so writing starts soon
#: (docs/benchmarks.md, "Blobless checkout"); each later batch doubles, up to the cap,
#: so a checkout of n missing blobs costs about log2(n / FIRST_BATCH) fetches.
FIRST_BATCH = 256
MAX_BATCH = 16384


class PromisorFetchError(GitError):
    """The promisor remotes could not deliver some blobs (unreachable or refusing)."""

    def __init__(self, remotes: Sequence[str], count: int, stderr: bytes = b"") -> None:
        names = ", ".join(f"'{r}'" for r in remotes) or "(none configured)"
        noun = "blob" if count == 1 else "blobs"
        which = "promisor remote" if len(remotes) == 1 else "promisor remotes"
        super().__init__(
            f"could not fetch {count} {noun} from {which} {names}; nothing was recorded for "
            "the files not written: run the command again when the remote is reachable",
            stderr=stderr,
        )
        self.remotes = tuple(remotes)
        self.count = count


def promisor_remotes(config: Mapping[str, str], keys: Sequence[str] | None = None) -> list[str]:
    """The promisor remotes in git's order; empty when this is not a partial clone.

    ``config`` is :func:`pcheckout.git.config.read_config`'s dict, whose key order is the
    order keys first appear in (``git config --list`` order); ``keys`` may give that order
    explicitly (all keys, lower-cased as read_config makes them)."""
    order: list[str] = []
    for key in keys if keys is not None else list(config):
        if not key.startswith("remote."):
            continue
        name, _, var = key[len("remote.") :].rpartition(".")
        if not name or name.startswith("/"):  # git warns and ignores such a name
            continue
        if var == "promisor":
            if not config_bool(config.get(key), False):
                continue
        elif var != "partialclonefilter":
            continue
        if name not in order:
            order.append(name)
    partial = config.get("extensions.partialclone")
    if partial and not partial.startswith("/"):
        if partial in order:
            order.remove(partial)
        order.append(partial)
    return order


def no_lazy_fetch_env(git: Git, env: Mapping[str, str] | None) -> dict[str, str] | None:
    """The environment for the writers' cat-files: ``GIT_NO_LAZY_FETCH=1`` where git
    honours it (>= 2.45), so an object that is not there is answered ``missing`` instead
    of fetched serially.  None where it would not help (older git)."""
    if not git.has(GIT_NO_LAZY_FETCH):
        return None
    return {**(env if env is not None else os.environ), "GIT_NO_LAZY_FETCH": "1"}


def local_objects(git: Git) -> set[str]:
    """Every object id in the local object store (packs, loose objects, alternates),
    listed without fetching anything (``cat-file --batch-all-objects``)."""
    list_all = ("cat-file", "--batch-all-objects", "--unordered", "--batch-check=%(objectname)")
    proc = git.run(*list_all, what="cannot list the repository's objects")
    return set(proc.stdout.decode("ascii").split())


def missing_objects(git: Git, oids: Iterable[str]) -> list[str]:
    """Those of ``oids`` (hex) not in the local object store, in the order given,
    each once.  Nothing is fetched."""
    have = local_objects(git)
    seen: set[str] = set()
    out: list[str] = []
    for oid in oids:
        if oid not in have and oid not in seen:
            seen.add(oid)
            out.append(oid)
    return out


def batch_sizes(n: int, first: int = FIRST_BATCH, cap: int = MAX_BATCH) -> list[int]:
    """Sizes of the fetches for ``n`` missing blobs: ``first``, then doubling up to
    ``cap``; a last batch smaller than half the one before is merged into it."""
    sizes: list[int] = []
    size = max(1, first)
    left = n
    while left > 0:
        take = min(size, left)
        if sizes and take < size // 2 and left == take:
            sizes[-1] += take
        else:
            sizes.append(take)
        left -= take
        size = min(cap, size * 2)
    return sizes


class Fetched:
    """What a fetch brought: object count and the bytes of the packs it wrote."""

    __slots__ = ("objects", "bytes", "fetches", "failed")

    def __init__(self, objects: int = 0, bytes: int = 0, fetches: int = 0) -> None:
        self.objects = objects
        self.bytes = bytes
        self.fetches = fetches
        self.failed: list[str] = []  # oids no remote delivered

    def __repr__(self) -> str:
        return f"Fetched({self.objects}, {self.bytes}, {self.fetches}, failed={self.failed!r})"


def _pack_dir(git: Git) -> bytes:
    out = git.out("rev-parse", "--git-path", "objects/pack").rstrip(b"\n")
    return out if os.path.isabs(out) else os.fsencode(git.cwd) + b"/" + out


def _pack_sizes(pack_dir: bytes) -> dict[bytes, int]:
    sizes: dict[bytes, int] = {}
    try:
        with os.scandir(pack_dir) as it:
            for e in it:
                if e.name.endswith(b".pack"):
                    try:
                        sizes[e.name] = e.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
    except OSError:
        pass
    return sizes


class Fetcher:
    """Runs git's promisor fetch for batches of object ids, one ``git fetch`` per
    batch and remote; ``kill()`` stops the one running (from another thread)."""

    def __init__(self, git: Git, remotes: Sequence[str], pack_dir: bytes | None = None) -> None:
        self.git = git
        self.remotes = list(remotes)
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._killed = False
        self._pack_dir = pack_dir  # where the fetches' packs land (asked of git if None)
        self.stderr = b""

    def _run(self, remote: str, oids: Sequence[str]) -> bool:
        args = [a.replace("{remote}", remote) for a in FETCH_ARGS]
        env = dict(self.git.env) if self.git.env is not None else dict(os.environ)
        env.pop("GIT_NO_LAZY_FETCH", None)  # the fetch itself must be allowed to fetch
        with self._lock:
            if self._killed:
                return False
            try:
                proc = self.git.popen(
                    args,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    env=env,
                )
            except OSError as exc:
                raise GitError(f"cannot run git fetch: {exc}") from None
            self._proc = proc
        try:
            _out, err = proc.communicate(b"".join(o.encode("ascii") + b"\n" for o in oids))
        finally:
            with self._lock:
                self._proc = None
        self.stderr = err or b""
        return proc.returncode == 0

    def fetch(self, oids: Sequence[str], result: Fetched) -> list[str]:
        """Fetch ``oids`` as ``promisor_remote_get_direct()`` does; return those no
        remote delivered (empty on success).  ``result`` is updated in place."""
        if self._pack_dir is None:
            self._pack_dir = _pack_dir(self.git)
        before = _pack_sizes(self._pack_dir)
        remaining = list(oids)
        for k, remote in enumerate(self.remotes):
            if not remaining:
                break
            result.fetches += 1
            if self._run(remote, remaining):
                remaining = []
                break
            if self._killed:
                break
            if len(remaining) > 1 and k + 1 < len(self.remotes):
                # remove_fetched_oids(): the next remote gets only what is still missing
                remaining = missing_objects(self.git, remaining)
        after = _pack_sizes(self._pack_dir)
        result.bytes += sum(size for name, size in after.items() if name not in before)
        result.objects += len(oids) - len(remaining)
        return remaining

    def kill(self) -> None:
        with self._lock:
            self._killed = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()


def fetch(git: Git, remotes: Sequence[str], oids: Sequence[str]) -> Fetched:
    """Fetch ``oids`` in one batch (git's prefetch); PromisorFetchError when some could
    not be had."""
    result = Fetched()
    if not oids:
        return result
    fetcher = Fetcher(git, remotes)
    left = fetcher.fetch(oids, result)
    if left:
        result.failed = left
        raise PromisorFetchError(remotes, len(left), fetcher.stderr)
    return result


class Prefetch:
    """Fetch missing blobs in a background thread, batch after batch, handing each
    batch to ``landed`` (called on that thread) as soon as its pack is in place.

    ``wait()`` returns the totals, or raises PromisorFetchError naming the remotes
    and the count of blobs that could not be had (those of the failed batch and of
    every batch after it)."""

    def __init__(
        self,
        git: Git,
        remotes: Sequence[str],
        batches: Sequence[Sequence[str]],
        landed: Callable[[int], None],
        progress: Callable[[Fetched], None] | None = None,
        pack_dir: bytes | None = None,
    ) -> None:
        self.fetcher = Fetcher(git, remotes, pack_dir)
        self.remotes = list(remotes)
        self.batches = batches
        self.landed = landed
        self.progress = progress
        self.result = Fetched()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="pcheckout-fetch", daemon=True)
        self._stop = threading.Event()

    def start(self) -> Prefetch:
        self._thread.start()
        return self

    def _main(self) -> None:
        try:
            for k, batch in enumerate(self.batches):
                if self._stop.is_set():
                    return
                left = self.fetcher.fetch(batch, self.result)
                if self.progress is not None:
                    self.progress(self.result)
                if left:
                    later = sum(len(b) for b in self.batches[k + 1 :])
                    self.result.failed = list(left)
                    stderr = self.fetcher.stderr
                    raise PromisorFetchError(self.remotes, len(left) + later, stderr)
                self.landed(k)
        except BaseException as exc:  # noqa: BLE001 - handed to wait()
            self.error = exc
        finally:
            self._stop.set()
            self.landed(-1)  # wakes whoever waits for the next batch

    def stop(self) -> None:
        """Stop fetching (an error elsewhere, an interrupt): kill the running fetch."""
        self._stop.set()
        self.fetcher.kill()

    def wait(self) -> Fetched:
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.result

    def wait_quietly(self) -> Fetched:
        """``wait()`` without raising: the error, if any, stays in ``error``."""
        self._thread.join()
        return self.result


#: Copy unit when moving a staged pack into the repository: large writes, few round
#: trips (a FUSE mount passes at most 128 KiB per WRITE request by default).
COPY_CHUNK = 1024 * 1024
#: Pack files in the order they are moved in: the .idx last, since git sees a pack only
#: once its index exists (packfile.c prepare_pack(): it lists *.idx).
_PACK_SUFFIXES = (b".pack", b".rev", b".promisor", b".idx")
#: Staging directories are ``$TMPDIR/pcheckout-fetch-XXXXXXXX``, each with a lock file that
#: its run holds (:func:`remove_stale_staging`).
STAGING_PREFIX = "pcheckout-fetch-"
STAGING_LOCK = "lock"
#: Age after which a staging directory without a lock file is removed (a day: only an
#: older pcheckout, which took no lock, could still be using one that old).
STALE_UNLOCKED_S = 24 * 3600
#: Variables that redirect the object store (no staging where the caller set one).
_OBJECT_STORE_VARS = ("GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES")
#: A pack file copied into the object store: created new, never inherited by a child.
_O_NEW_PACK = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


class Staging:
    """A local object directory the promisor fetches write into, for a repository on a
    latency-bound mount.

    A fetch writes its pack through index-pack's 4 KiB input buffer, one synchronous
    write (a round trip) per 4 KiB: 0.53 s of a 0.75 s fetch of 256 blobs on the 1 ms
    latency filesystem (docs/benchmarks.md, "Blobless checkout").  The fetch runs as git
    runs it, with ``GIT_OBJECT_DIRECTORY`` pointing here and the repository's objects as
    an alternate; the writers read the new packs from here as an alternate of theirs;
    :meth:`migrate` then copies each pack into the repository in large writes, its
    ``.idx`` last, leaving the packs git's own fetch would have left (one per batch)."""

    def __init__(self, repo_objects: bytes, scratch_dir: str | None = None) -> None:
        import tempfile  # (shutil and tempfile: only a partial clone's fetch needs them)

        self.repo_objects = repo_objects  # the repository's objects directory (absolute)
        self.root = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=scratch_dir)
        # Held (an open-file-description lock, as git/lock.py holds index.lock) until
        # close(); the kernel drops it however the run ends, SIGKILL included.
        self._lock: int | None = None
        try:
            self._lock = os.open(
                os.path.join(self.root, STAGING_LOCK),
                os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                0o600,
            )
            _try_record_lock(self._lock, wait=False)
            self.objects = os.path.join(self.root, "objects")
            os.makedirs(os.path.join(self.objects, "pack"))
            os.makedirs(os.path.join(self.objects, "info"))
        except BaseException:
            self.close()
            raise
        self.moved: list[bytes] = []
        self.removed_stale = remove_stale_staging(os.path.dirname(self.root), keep=self.root)

    @property
    def pack_dir(self) -> bytes:
        return os.fsencode(os.path.join(self.objects, "pack"))

    @staticmethod
    def usable(env: Mapping[str, str]) -> bool:
        """Not where the caller already redirects the object store."""
        return not any(k in env for k in _OBJECT_STORE_VARS)

    def fetch_env(self, env: Mapping[str, str]) -> dict[str, str]:
        return {
            **env,
            "GIT_OBJECT_DIRECTORY": self.objects,
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.fsdecode(self.repo_objects),
        }

    def reader_env(self, env: Mapping[str, str]) -> dict[str, str]:
        return {**env, "GIT_ALTERNATE_OBJECT_DIRECTORIES": self.objects}

    def migrate(self) -> int:
        """Copy every staged pack into the repository; return the bytes copied."""
        src_dir = os.fsencode(os.path.join(self.objects, "pack"))
        dst_dir = self.repo_objects + b"/pack"
        names = sorted(os.listdir(src_dir))
        stems = sorted({n.rpartition(b".")[0] for n in names if n.endswith(b".idx")})
        copied = 0
        for stem in stems:
            for suffix in _PACK_SUFFIXES:
                name = stem + suffix
                if name in names:
                    copied += _copy_into(src_dir + b"/" + name, dst_dir, name)
                    self.moved.append(name)
        return copied

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.root, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def remove_stale_staging(scratch_dir: str, keep: str | None = None) -> list[str]:
    """Remove the staging directories in ``scratch_dir`` that no run holds any more (a
    pcheckout killed before its ``close()``: SIGKILL, a power cut); return their paths.

    A live run holds the lock on its directory's lock file, and the kernel drops it when
    that run is gone, whatever the pid namespace; a directory whose lock can be taken is
    stale.  One without a lock file is being created (for the instant between mkdtemp and
    the lock), or left by an older pcheckout that took no lock: it is removed only once
    older than :data:`STALE_UNLOCKED_S`."""
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(scratch_dir) if n.startswith(STAGING_PREFIX)]
    except OSError:
        return removed
    import shutil

    for name in names:
        path = os.path.join(scratch_dir, name)
        if path == keep:
            continue
        try:
            fd = os.open(os.path.join(path, STAGING_LOCK), os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                if os.path.isdir(path) and time.time() - st.st_mtime > STALE_UNLOCKED_S:
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
            continue
        except OSError:  # not ours to judge (another user's, unreadable)
            continue
        try:
            if _try_record_lock(fd, wait=False):  # nobody holds it: its run is gone
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        finally:
            os.close(fd)
    return removed


def _copy_into(src: bytes, dst_dir: bytes, name: bytes) -> int:
    """Copy ``src`` to ``dst_dir/name`` through a temporary name: large writes, fsync,
    read-only as git leaves pack files, then rename."""
    tmp = dst_dir + b"/tmp_pcheckout_" + name
    fd_in = os.open(src, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        fd_out = os.open(tmp, _O_NEW_PACK, 0o444)
        total = 0
        try:
            while chunk := os.read(fd_in, COPY_CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd_out, view) :]
                total += len(chunk)
            os.fsync(fd_out)
        except BaseException:
            os.close(fd_out)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(fd_out)
    finally:
        os.close(fd_in)
    os.replace(tmp, dst_dir + b"/" + name)
    return total
