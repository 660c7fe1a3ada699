"""The per-mount tune cache: what ``pcheckout tune`` stored, and what a checkout reads back.

``$XDG_CACHE_HOME/pcheckout/tuned.json`` (default ``~/.cache/pcheckout/tuned.json``) holds one
:class:`TuneResult` per mount, keyed by :attr:`FsInfo.mount_key`; a result never applies to
another mount.  The file format is in ``docs/tuning.md``; :mod:`pcheckout.tune` measures.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pcheckout.errors import WriteError
from pcheckout.plan.policy import MAX_WORKERS, WRITERS, Tuned, Writer

if TYPE_CHECKING:
    from pcheckout.fs.detect import FsInfo


@dataclass(frozen=True)
class WriterTimes:
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


@dataclass(frozen=True)
class TuneResult:
    """One measured mount: the chosen worker count and the curve behind it (one cache entry)."""

    mount_key: str
    mount_point: str
    kind: str
    measured_on: str  # ISO date
    workers: int
    threshold: float
    curve: tuple[tuple[int, float], ...]  # (worker count, median files/s), descending counts
    rounds: tuple[tuple[tuple[int, float], ...], ...] = field(default=(), compare=False)
    writers: WriterTimes | None = None  # both writers timed (git >= 2.32), else None

    def to_json(self) -> dict[str, Any]:
        return {
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
        )


_CACHE_VERSION = 1


def cache_path() -> Path:
    """``$XDG_CACHE_HOME/pcheckout/tuned.json`` (default ``~/.cache/pcheckout/tuned.json``)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    # The XDG spec: a relative path is invalid and must be ignored.
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "pcheckout" / "tuned.json"


def _read_cache() -> dict[str, dict[str, Any]]:
    """The stored results by mount key; an unreadable or foreign file counts as empty."""
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _CACHE_VERSION:
        return {}
    mounts = data.get("mounts")
    if not isinstance(mounts, dict):
        return {}
    return {k: v for k, v in mounts.items() if isinstance(v, dict)}


def _write_cache(mounts: dict[str, dict[str, Any]]) -> None:
    """Atomically: a temporary file in the same directory, fsync, rename over the old one."""
    path = cache_path()
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tuned-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": _CACHE_VERSION, "mounts": mounts}, f, indent=2, sort_keys=True)
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


def store(result: TuneResult) -> Path:
    """Record ``result`` for its mount (replacing an older one); returns the cache file."""
    mounts = _read_cache()
    mounts[result.mount_key] = result.to_json()
    _write_cache(mounts)
    return cache_path()


def stored(fs: FsInfo) -> TuneResult | None:
    """The full stored result (with its curve) for exactly this mount, else None."""
    entry = _read_cache().get(fs.mount_key)
    if entry is None:
        return None
    try:
        result = TuneResult.from_json(entry)
    except (KeyError, TypeError, ValueError):
        return None
    if result.mount_key != fs.mount_key or not 1 <= result.workers <= MAX_WORKERS:
        return None
    return result


def lookup(fs: FsInfo) -> Tuned | None:
    """The stored worker count for exactly this mount, else None (never another mount's)."""
    result = stored(fs)
    if result is None:
        return None
    tuned = Tuned(workers=result.workers, measured_on=result.measured_on, mount_key=fs.mount_key)
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


def forget(fs: FsInfo) -> bool:
    """Drop the stored result for this mount; True if there was one."""
    mounts = _read_cache()
    if mounts.pop(fs.mount_key, None) is None:
        return False
    _write_cache(mounts)
    return True
