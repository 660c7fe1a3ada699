"""The per-mount tune cache: what ``pcheckout tune`` stored, and what a checkout reads back.

``$XDG_CACHE_HOME/pcheckout/tuned.json`` (default ``~/.cache/pcheckout/tuned.json``) holds one
:class:`TuneResult` per mount, keyed by :attr:`FsInfo.mount_key`; a result never applies to
another mount.  The file format is in ``docs/tuning.md``; :mod:`pcheckout.tune` measures.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from pcheckout.errors import WriteError
from pcheckout.fs.kinds import family
from pcheckout.plan.policy import MAX_WORKERS, WRITERS, Tuned, Writer

if TYPE_CHECKING:
    from pcheckout.fs.detect import FsInfo


class WriterTimes(NamedTuple):
    """The two writers timed on one probe tree in the mount (``pcheckout tune``): fresh
    checkouts of ``probe_files`` entries, interleaved, the median of ``rounds`` each."""

    winner: Writer
    git_workers: int  # git's best measured checkout.workers (what its writer gets)
    engine_workers: int  # the count pcheckout's engine was timed at (the knee)
    times: tuple[tuple[Writer, int, float], ...]  # (writer, workers, median seconds)
    probe_files: int
    rounds: int

    def best(self, writer: Writer) -> float:
        """The writer's best median time."""
        return min(t for w, _, t in self.times if w == writer)

    def to_json(self) -> dict[str, Any]:
        return {
            "winner": self.winner,
            "git_workers": self.git_workers,
            "engine_workers": self.engine_workers,
            "probe_files": self.probe_files,
            "rounds": self.rounds,
            "times": [
                {"writer": w, "workers": n, "seconds": round(t, 4)} for w, n, t in self.times
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WriterTimes:
        def writer(value: object) -> Writer:
            for w in WRITERS:
                if value == w:
                    return w
            raise ValueError(f"not a writer: {value!r}")

        times = tuple(
            (writer(t["writer"]), int(t["workers"]), float(t["seconds"])) for t in data["times"]
        )
        result = cls(
            winner=writer(data["winner"]),
            git_workers=int(data["git_workers"]),
            engine_workers=int(data["engine_workers"]),
            times=times,
            probe_files=int(data["probe_files"]),
            rounds=int(data["rounds"]),
        )
        counts = (result.git_workers, result.engine_workers, *(n for _, n, _ in times))
        if not all(1 <= n <= MAX_WORKERS for n in counts) or {w for w, _, _ in times} != set(
            WRITERS
        ):
            raise ValueError("writer times out of range")
        return result


class TuneResult(NamedTuple):
    """One measured mount: the chosen worker count and the curve behind it (one cache entry)."""

    mount_key: str
    mount_point: str
    kind: str
    measured_on: str  # ISO date
    workers: int
    threshold: float
    curve: tuple[tuple[int, float], ...]  # (worker count, median files/s), descending counts
    #: each round's curve, as measured (not stored: a result read back has none)
    rounds: tuple[tuple[tuple[int, float], ...], ...] = ()
    writers: WriterTimes | None = None  # both writers timed (git >= 2.32), else None
    #: No count above this on the mount (docs/tuning.md, *A ceiling per mount*): the knee
    #: when tune stores it; an administrator may lower it in the shared file.
    ceiling: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "ceiling": self.ceiling,
            "writers": None if self.writers is None else self.writers.to_json(),
            "mount_key": self.mount_key,
            "mount_point": self.mount_point,
            "kind": self.kind,
            "measured_on": self.measured_on,
            "workers": self.workers,
            "threshold": self.threshold,
            "curve": [{"workers": n, "files_per_s": round(r, 1)} for n, r in self.curve],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TuneResult:
        return cls(
            mount_key=str(data["mount_key"]),
            mount_point=str(data["mount_point"]),
            kind=str(data["kind"]),
            measured_on=str(data["measured_on"]),
            workers=int(data["workers"]),
            threshold=float(data["threshold"]),
            curve=tuple((int(p["workers"]), float(p["files_per_s"])) for p in data["curve"]),
            writers=WriterTimes.from_json(data["writers"]) if data.get("writers") else None,
            ceiling=None if data.get("ceiling") is None else int(data["ceiling"]),
        )


_CACHE_VERSION = 1


def cache_path() -> Path:
    """``$XDG_CACHE_HOME/pcheckout/tuned.json`` (default ``~/.cache/pcheckout/tuned.json``)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    # The XDG spec: a relative path is invalid and must be ignored.
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "pcheckout" / "tuned.json"


def _read_cache(path: Path | None = None, section: str = "mounts") -> dict[str, dict[str, Any]]:
    """The stored results by key (``mounts``: mount keys; the shared file's ``exports``:
    export keys); an unreadable or foreign file counts as empty."""
    try:
        text = (path or cache_path()).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return {}
    import json  # (here: a run without a stored result, the usual one, need not pay ~1.4 ms)

    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION:
        return {}
    entries = data.get(section)
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(v, dict)}


def _write_cache(entries: dict[str, dict[str, Any]], path: Path, section: str = "mounts") -> None:
    """Atomically: a temporary file in the same directory, fsync, rename over the old one."""
    import json
    import tempfile  # (as json: only a run that stores a result writes the file)

    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tuned-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": _CACHE_VERSION, section: entries}, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise WriteError(os.fsencode(str(path)), exc) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def with_ceiling(result: TuneResult) -> TuneResult:
    """Unless it has one, the ceiling is the highest count tune chose for either writer: the
    knee, or git's best count where git's writer was timed higher."""
    if result.ceiling is not None:
        return result
    git = result.writers.git_workers if result.writers is not None else 0
    return result._replace(ceiling=max(result.workers, git))


def store(result: TuneResult) -> Path:
    """Record ``result`` for its mount (replacing an older one) with its ceiling
    (:func:`_with_ceiling`); returns the cache file."""
    result = with_ceiling(result)
    mounts = _read_cache()
    mounts[result.mount_key] = result.to_json()
    _write_cache(mounts, cache_path())
    return cache_path()


def stored(fs: FsInfo) -> TuneResult | None:
    """The full stored result (with its curve) for exactly this mount, else None."""
    cache = _read_cache()
    entry = cache.get(fs.mount_key) if cache else None  # (no cache, no key to make)
    if entry is None:
        return None
    try:
        result = TuneResult.from_json(entry)
    except (KeyError, TypeError, ValueError):
        return None
    if result.mount_key != fs.mount_key or not 1 <= result.workers <= MAX_WORKERS:
        return None
    return result


def lookup(fs: FsInfo, shared: Path | None = None) -> Tuned | None:
    """The stored result for exactly this mount (never another mount's), else the ``shared``
    file's for this mount's export, else None."""
    result = stored(fs)
    where, file = "for this mount", cache_path()
    if result is None and shared is not None:
        found = stored_shared(fs, shared)
        if found is not None:
            key, result = found
            where, file = f"for {key} in {shared}", shared
    if result is None:
        return None
    tuned = Tuned(
        workers=result.workers,
        measured_on=result.measured_on,
        mount_key=fs.mount_key,
        ceiling=result.ceiling,
        where=where,
        file=str(file),
    )
    w = result.writers
    if w is None:
        return tuned
    return tuned._replace(
        writer=w.winner,
        git_workers=w.git_workers,
        git_seconds=w.best("git"),
        engine_seconds=w.best("pcheckout"),
        probe_files=w.probe_files,
    )


# --- the shared file, by export ----------------------------------------------------------------

#: Where an administrator provisions results for every host (docs/tuning.md, *Shared results*).
SHARED_PATH = Path("/etc/pcheckout/tuned.json")
_SHARED_ENV = "PCHECKOUT_SHARED_TUNE"
_SHARED_CONFIG = "pcheckout.sharedtune"


def shared_path(environ: Mapping[str, str], git_config: Mapping[str, str]) -> Path:
    """``PCHECKOUT_SHARED_TUNE`` > git config ``pcheckout.sharedTune`` > /etc/pcheckout."""
    value = environ.get(_SHARED_ENV) or next(
        (v for k, v in git_config.items() if k.lower() == _SHARED_CONFIG), ""
    )
    return Path(value) if value.strip() else SHARED_PATH


def export_key(fs: FsInfo) -> str | None:
    """The server and export a network mount shows, the same on every host that mounts it:
    NFS ``server:/export``, SMB ``//server/share``, sshfs ``host:path`` (without ``user@``),
    other network filesystems their source; hosts lower-cased.  None for local kinds."""
    kind = fs.upper_kind if fs.kind == "overlay" else fs.kind
    source = fs.source.strip()
    if kind not in ("nfs", "smb", "network") or not source:
        return None
    if kind == "smb":
        return source.replace("\\", "/").lower().rstrip("/")
    host, sep, path = source.rpartition(":")
    if not sep or not host:
        return source
    if family(fs.fstype) == "sshfs":
        host = host.rpartition("@")[2]
    return f"{host.lower()}:{path.rstrip('/') or '/'}"


def _export_matches(key: str, entry: str) -> bool:
    """``entry`` names ``key``'s export or a directory above it on the same server."""
    return key == entry or key.startswith(entry.rstrip("/") + "/")


def stored_shared(fs: FsInfo, shared: Path) -> tuple[str, TuneResult] | None:
    """The shared file's result for ``fs``'s export (the longest matching export, measured on
    the same kind of filesystem), with the export it is stored under."""
    key = export_key(fs)
    if key is None:
        return None
    best: tuple[str, TuneResult] | None = None
    for entry, data in _read_cache(shared, "exports").items():
        if not _export_matches(key, entry) or (best and len(entry) <= len(best[0])):
            continue
        try:
            result = TuneResult.from_json(data)
        except (KeyError, TypeError, ValueError):
            continue
        if result.kind == fs.kind and 1 <= result.workers <= MAX_WORKERS:
            best = (entry, result)
    return best


def store_shared(result: TuneResult, fs: FsInfo, shared: Path) -> str:
    """Record ``result`` in the shared file under ``fs``'s export; returns the export."""
    key = export_key(fs)
    if key is None:
        raise WriteError(
            os.fsencode(str(shared)),
            OSError(0, f"{fs.fstype} at {fs.mount_point} is not a network export"),
        )
    result = with_ceiling(result)
    exports = _read_cache(shared, "exports")
    exports[key] = result.to_json()
    _write_cache(exports, shared, "exports")
    return key


def forget(fs: FsInfo) -> bool:
    """Drop the stored result for this mount; True if there was one."""
    mounts = _read_cache()
    if mounts.pop(fs.mount_key, None) is None:
        return False
    _write_cache(mounts, cache_path())
    return True
