"""pcheckout tune: knee selection, the per-mount cache, rendering, and real end-to-end runs."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest
from rich.console import Console

from pcheckout.cli.render import tune_result as render
from pcheckout.errors import DestinationError, UsageError
from pcheckout.fs.detect import FsInfo, detect
from pcheckout.plan.policy import Tuned
from pcheckout.plan.tunecache import TuneResult, cache_path, forget, lookup, store
from pcheckout.tune.workload import TuneOptions, pick_knee, run_tune, worker_counts

REPO = Path(__file__).resolve().parent.parent


def fake_fs(fstype: str = "nfs4", source: str = "server:/export", **options: str | None) -> FsInfo:
    return FsInfo(
        path="/mnt/x",
        probed_path="/mnt/x",
        mount_point="/mnt/x",
        mount_id=42,
        fstype=fstype,
        source=source,
        options=dict(options),
        kind="nfs" if fstype.startswith("nfs") else "tmpfs",
        upper_kind=None,
        nfs_version="4.1" if fstype.startswith("nfs") else None,
        f_type=None,
        devices=(),
        latency_bound=fstype.startswith("nfs"),
        notes=(),
    )


def result_for(fs: FsInfo, workers: int = 16) -> TuneResult:
    return TuneResult(
        mount_key=fs.mount_key,
        mount_point=fs.mount_point,
        kind=str(fs.kind),
        measured_on="2024-05-01",
        workers=workers,
        threshold=0.05,
        curve=((32, 1000.0), (16, 980.0), (8, 600.0), (1, 90.0)),
    )


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


# --- knee -----------------------------------------------------------------------------------------


def test_knee_is_the_smallest_count_within_threshold() -> None:
    curve = [
        (64, 1000.0),
        (32, 1010.0),
        (16, 970.0),
        (8, 700.0),
        (4, 400.0),
        (2, 210.0),
        (1, 100.0),
    ]
    assert pick_knee(curve, 0.05) == 16  # 970 >= 1010 * 0.95
    assert pick_knee(curve, 0.0) == 32
    assert pick_knee(curve, 0.35) == 8
    assert pick_knee(list(reversed(curve)), 0.05) == 16  # order does not matter


def test_knee_on_cpu_bound_curve_is_the_peak() -> None:
    assert pick_knee([(8, 50.0), (4, 70.0), (2, 100.0), (1, 60.0)]) == 2


def test_knee_default_threshold_and_empty() -> None:
    assert pick_knee([(4, 100.0), (2, 96.0)]) == 2  # default 5%
    assert pick_knee([(4, 100.0), (2, 94.0)]) == 4
    with pytest.raises(ValueError):
        pick_knee([])


def test_worker_counts_halve_from_the_top_and_include_cpus() -> None:
    assert worker_counts(64) == (64, 32, 16, 8, 4, 2, 1)
    assert worker_counts(64, (6, 3)) == (64, 32, 16, 8, 6, 4, 3, 2, 1)
    assert worker_counts(10, (12, None)) == (10, 5, 2, 1)  # a CPU count above max is not tried
    assert worker_counts(1) == (1,)


# --- the cache ------------------------------------------------------------------------------------


def test_cache_path_follows_xdg(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cache_path() == cache_home / "pcheckout" / "tuned.json"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # invalid per the XDG spec: ignored
    assert cache_path() == Path.home() / ".cache" / "pcheckout" / "tuned.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_path() == Path.home() / ".cache" / "pcheckout" / "tuned.json"


def test_lookup_applies_only_to_the_same_mount() -> None:
    a = fake_fs(source="server-a:/export", vers="4.1")
    assert lookup(a) is None
    store(result_for(a, workers=24))
    want = Tuned(workers=24, measured_on="2024-05-01", mount_key=a.mount_key, ceiling=24)
    assert lookup(a) == want._replace(file=str(cache_path()))
    # Another server, another NFS version, another option that shapes throughput: never applies.
    assert lookup(fake_fs(source="server-b:/export", vers="4.1")) is None
    assert lookup(fake_fs(source="server-a:/export", vers="4.0")) is None
    assert lookup(fake_fs(source="server-a:/export", vers="4.1", nconnect="8")) is None
    # The same mount seen again (new mount id, another mount point) does.
    again = fake_fs(source="server-a:/export", vers="4.1")
    assert lookup(again) is not None


def test_store_replaces_and_keeps_other_mounts() -> None:
    a, b = fake_fs(source="a:/"), fake_fs(source="b:/")
    store(result_for(a, 8))
    store(result_for(b, 32))
    store(result_for(a, 16))
    assert lookup(a).workers == 16  # type: ignore[union-attr]
    assert lookup(b).workers == 32  # type: ignore[union-attr]
    data = json.loads(cache_path().read_text())
    assert data["version"] == 1 and set(data["mounts"]) == {a.mount_key, b.mount_key}
    assert data["mounts"][a.mount_key]["curve"][0] == {"workers": 32, "files_per_s": 1000.0}
    # written atomically: no temporary files left next to it
    assert [p.name for p in cache_path().parent.iterdir()] == ["tuned.json"]


def test_forget() -> None:
    a, b = fake_fs(source="a:/"), fake_fs(source="b:/")
    assert forget(a) is False
    store(result_for(a))
    store(result_for(b))
    assert forget(a) is True
    assert forget(a) is False
    assert lookup(a) is None


def test_unreadable_cache_counts_as_empty() -> None:
    a = fake_fs()
    cache_path().parent.mkdir(parents=True)
    for junk in ["{not json", "[]", '{"version": 99, "mounts": {}}', '{"version": 1, "mounts": 3}']:
        cache_path().write_text(junk)
        assert lookup(a) is None
    bad = result_for(a).to_json()
    bad["workers"] = 1000  # out of range: never trusted
    cache_path().write_text(json.dumps({"version": 1, "mounts": {a.mount_key: bad}}))
    assert lookup(a) is None
    store(result_for(a, 4))  # a broken file is replaced, not a crash
    assert lookup(a).workers == 4  # type: ignore[union-attr]


def test_json_round_trip() -> None:
    r = result_for(fake_fs())
    assert TuneResult.from_json(json.loads(json.dumps(r.to_json()))) == r


def test_render_marks_the_choice() -> None:
    console = Console(record=True, width=100, color_system=None)
    render(console, result_for(fake_fs(), workers=16))
    text = console.export_text()
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()[:1].isdigit()}
    assert set(rows) == {"1", "8", "16", "32"}
    assert "◀ chosen" in rows["16"] and "◀ chosen" not in rows["32"]
    assert rows["32"].count("█") == 40 and rows["1"].count("█") == 4
    assert "within 5% of the best" in text


# --- running it -----------------------------------------------------------------------------------


def test_option_validation(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        run_tune(TuneOptions(str(tmp_path), max_workers=0), fs=fake_fs())
    with pytest.raises(UsageError):
        run_tune(TuneOptions(str(tmp_path), duration=0.0), fs=fake_fs())
    with pytest.raises(DestinationError):
        run_tune(TuneOptions(str(tmp_path / "missing")), fs=fake_fs())


def tmpfs_dir() -> str:
    if os.path.isdir("/dev/shm") and detect("/dev/shm").kind == "tmpfs":
        return "/dev/shm"
    pytest.skip("no tmpfs at /dev/shm")


def test_end_to_end_on_tmpfs() -> None:
    with tempfile.TemporaryDirectory(dir=tmpfs_dir(), prefix="pcheckout-test-") as d:
        fs = detect(d)
        lines: list[str] = []
        r = run_tune(
            TuneOptions(d, max_workers=8, files=400, duration=1.5, rounds=2),
            fs=fs,
            progress=lines.append,
        )
        assert os.listdir(d) == []  # the scratch directory is gone
        assert r.kind == "tmpfs" and r.mount_key == fs.mount_key
        counts = [n for n, _ in r.curve]
        assert counts[:4] == [8, 4, 2, 1] or set(counts) >= {8, 4, 2, 1}
        assert all(rate > 0 for _, rate in r.curve)
        assert r.workers == pick_knee(r.curve, r.threshold)
        assert len(lines) == 2 * len(counts)
        want = Tuned(r.workers, r.measured_on, fs.mount_key, ceiling=r.workers)
        assert lookup(fs) == want._replace(file=str(cache_path()))


def test_interrupt_removes_the_scratch_directory() -> None:
    with tempfile.TemporaryDirectory(dir=tmpfs_dir(), prefix="pcheckout-test-") as d:
        calls = []

        def progress(msg: str) -> None:
            calls.append(msg)
            if len(calls) == 2:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_tune(
                TuneOptions(d, max_workers=4, files=200, rounds=3), fs=detect(d), progress=progress
            )
        assert os.listdir(d) == []
        assert lookup(detect(d)) is None  # nothing half-measured was stored


def _latencyfs() -> ModuleType:
    path = REPO / "scripts" / "latencyfs.py"
    if not path.exists():
        pytest.skip("scripts/latencyfs.py is not there (the latency filesystem is not built yet)")
    if not os.path.exists("/dev/fuse"):
        pytest.skip("/dev/fuse is missing: FUSE is unavailable here")
    spec = importlib.util.spec_from_file_location("latencyfs", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("latencyfs", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.fuse
def test_latency_filesystem_gets_a_clearly_larger_count_than_tmpfs(tmp_path: Path) -> None:
    latencyfs = _latencyfs()
    backing, mnt = tmp_path / "backing", tmp_path / "mnt"
    backing.mkdir()
    mnt.mkdir()
    try:
        ctx = latencyfs.mounted(backing, mnt, latency_ms=5.0, cache_seconds=0.0)
        mountpoint = ctx.__enter__()
    except Exception as exc:  # noqa: BLE001 - any failure to mount means "no FUSE here"
        pytest.skip(f"cannot mount the latency filesystem: {exc}")
    try:
        slow = run_tune(
            TuneOptions(str(mountpoint), max_workers=32, duration=2.0, rounds=2),
            fs=detect(str(mountpoint)),
        )
    finally:
        ctx.__exit__(None, None, None)
    assert list(backing.iterdir()) == []  # scratch removed through the mount
    with tempfile.TemporaryDirectory(dir=tmpfs_dir(), prefix="pcheckout-test-") as d:
        fast = run_tune(TuneOptions(d, max_workers=32, duration=0.6, rounds=2), fs=detect(d))
    curve = dict(slow.curve)
    # 5 ms per request: one worker is latency-bound, so more workers pay many times over.
    # Where they stop paying depends on spare CPU for the FUSE daemon (quiet dev VM: the knee
    # at 16 or more; at load 12 on its 2 vCPUs the best was at 8 and the 32-worker point fell
    # below one worker's rate x4; in CI beside the suite's other FUSE tests the best was 2.44x
    # one worker's, at 8), so the test asserts a gain and a parallel knee, not where.
    gain = max(curve.values()) / curve[1]
    assert gain > 2.0 and slow.workers >= 4, slow.curve
    # tmpfs is CPU-bound: its curve is flat or falls, so its knee is wherever noise puts it
    # (1-2 workers when the machine is quiet, 8-32 seen under load: more threads win a bigger
    # share of busy CPUs).  What separates the two is how much more workers gain.
    fast_curve = dict(fast.curve)
    assert gain > 1.5 * max(fast_curve.values()) / fast_curve[1], (slow.curve, fast.curve)
