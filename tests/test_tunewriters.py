"""`pcheckout tune` compares the writers: the winner is recorded, used by the plan, overridden
by an explicit writer, reported (dry run, JSON, the tune table), and written for plain git."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import clone_no_checkout, git, make_repo, run_cli
from rich.console import Console

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.cli.render import tune_result
from pcheckout.fs.detect import FsInfo, detect
from pcheckout.plan import policy
from pcheckout.plan.policy import Tuned, Writer
from pcheckout.plan.tunecache import TuneResult, WriterTimes, cache_path, lookup, store, stored
from pcheckout.tune import gitconfig as includeif
from pcheckout.tune import writers as tunewriters
from pcheckout.tune.workload import TuneOptions, run_tune
from pcheckout.tune.writers import Comparison

GIT = (2, 39, 5)
FILES = {b"d%d/f%03d" % (i % 4, i): b"%d\n" % i * 20 for i in range(240)}


@pytest.fixture
def shm() -> Iterator[Path]:
    """A directory on tmpfs (where the policy alone would pick git's writer)."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm tmpfs here")
    base = Path(tempfile.mkdtemp(prefix="pcheckout-tunewriters-", dir="/dev/shm"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _times(winner: Writer, git_workers: int = 4, engine_workers: int = 2) -> WriterTimes:
    git_t, engine_t = (0.31, 0.52) if winner == "git" else (0.52, 0.31)
    return WriterTimes(
        winner=winner,
        git_workers=git_workers,
        engine_workers=engine_workers,
        times=(
            ("pcheckout", engine_workers, engine_t),
            ("git", engine_workers, git_t + 0.125),
            ("git", git_workers, git_t),
        ),
        probe_files=2000,
        rounds=3,
    )


def _store_for(fs: FsInfo, winner: Writer, knee: int = 2, git_workers: int = 4) -> None:
    store(
        TuneResult(
            mount_key=fs.mount_key,
            mount_point=fs.mount_point,
            kind=str(fs.kind),
            measured_on="2026-12-01",
            workers=knee,
            threshold=0.05,
            curve=((knee, 1000.0), (1, 600.0)),
            writers=_times(winner, git_workers, knee),
        )
    )


# --- the comparison itself ------------------------------------------------------------------------


def test_compare_interleaves_and_records_the_winner(shm: Path) -> None:
    calls: list[tuple[Writer, int]] = []
    fake = {("pcheckout", 2): 0.5, ("git", 2): 0.4, ("git", 4): 0.3}

    def run(work: Path, writer: Writer, workers: int) -> float:
        # each timed run starts from a clone without a checkout: no files, no index
        assert sorted(os.listdir(work)) == [".git"] and not (work / ".git" / "index").exists()
        calls.append((writer, workers))
        return fake[(writer, workers)]

    how = Comparison(GIT, rounds=3, files=64, run=run, environ=os.environ)
    times = tunewriters.compare(str(shm), 2, 1e6, how)
    assert times is not None
    assert (times.winner, times.git_workers, times.engine_workers) == ("git", 4, 2)
    assert times.probe_files == 64 and times.rounds == 3
    assert times.best("git") == 0.3 and times.best("pcheckout") == 0.5
    configs = list(tunewriters.configurations(2, 4))
    assert calls == configs + configs[::-1] + configs  # alternating order
    assert os.listdir(shm) == []  # the probe clone is removed


def test_compare_engine_wins_and_ties_go_to_the_engine(shm: Path) -> None:
    def run(work: Path, writer: Writer, workers: int) -> float:
        return 0.2 if writer == "pcheckout" else 0.2 + 0.01 * workers

    times = tunewriters.compare(str(shm), 1, 1e6, Comparison(GIT, rounds=1, files=20, run=run))
    assert times is not None and times.winner == "pcheckout" and times.git_workers == 1
    how = Comparison(GIT, rounds=1, files=20, run=lambda w, x, n: 0.2)
    same = tunewriters.compare(str(shm), 1, 1e6, how)
    assert same is not None and same.winner == "pcheckout"


def test_no_comparison_without_parallel_checkout(shm: Path) -> None:
    assert tunewriters.compare(str(shm), 2, 1e6, Comparison((2, 31, 1))) is None
    assert os.listdir(shm) == []


def test_configurations_and_probe_size() -> None:
    assert tunewriters.configurations(1, 4) == (
        ("pcheckout", 1),
        ("git", 1),
        ("git", 2),
        ("git", 4),
    )
    assert tunewriters.configurations(32, 4) == (("pcheckout", 32), ("git", 32), ("git", 64))
    assert tunewriters.configurations(64, 4) == (("pcheckout", 64), ("git", 64))
    assert tunewriters.probe_size(100.0) == tunewriters.PROBE_MIN_FILES
    assert tunewriters.probe_size(1e9) == tunewriters.PROBE_MAX_FILES
    assert tunewriters.probe_size(1e9, files=300) == 300


def test_real_comparison_on_tmpfs(shm: Path) -> None:
    """Both writers really check the probe tree out (no time is asserted)."""
    fs = detect(str(shm))
    lines: list[str] = []

    def writers(scratch: str, knee: int, rate: float) -> WriterTimes | None:
        how = Comparison(GIT, rounds=1, files=300, progress=lines.append)
        return tunewriters.compare(scratch, knee, rate, how)

    r = run_tune(TuneOptions(str(shm), max_workers=2, files=200, rounds=1), fs=fs, writers=writers)
    assert os.listdir(shm) == []  # scratch and probe removed
    assert r.writers is not None and r.writers.probe_files == 300
    assert {w for w, _, _ in r.writers.times} == {"git", "pcheckout"}
    assert all(t > 0 for _, _, t in r.writers.times)
    assert len([line for line in lines if "300-file checkout" in line]) == len(r.writers.times)
    tuned = lookup(fs)
    assert tuned is not None and tuned.writer == r.writers.winner
    assert tuned.git_workers == r.writers.git_workers


# --- recorded, used, overridden, reported ---------------------------------------------------------


def test_cache_round_trip_and_old_entries() -> None:
    fs = detect(tempfile.gettempdir())
    _store_for(fs, "git")
    assert stored(fs) is not None and stored(fs).writers == _times("git", 4, 2)  # type: ignore[union-attr]
    tuned = lookup(fs)
    assert tuned == Tuned(
        workers=2,
        measured_on="2026-12-01",
        mount_key=fs.mount_key,
        writer="git",
        git_workers=4,
        git_seconds=0.31,
        engine_seconds=0.52,
        probe_files=2000,
        ceiling=4,  # the higher of the knee and git's best count: the mount's ceiling
        file=str(cache_path()),
    )
    data = json.loads(cache_path().read_text())
    entry = data["mounts"][fs.mount_key]
    assert entry["writers"]["winner"] == "git" and len(entry["writers"]["times"]) == 3
    del entry["writers"], entry["ceiling"]  # an entry stored before either existed
    cache_path().write_text(json.dumps(data))
    assert lookup(fs) == Tuned(2, "2026-12-01", fs.mount_key, file=str(cache_path()))
    entry["writers"] = {**_times("git").to_json(), "winner": "svn"}  # foreign: not trusted
    cache_path().write_text(json.dumps(data))
    assert lookup(fs) is None


@pytest.mark.parametrize("winner", ["git", "pcheckout"])
def test_the_plan_uses_the_measured_writer(
    shm: Path, monkeypatch: pytest.MonkeyPatch, winner: Writer
) -> None:
    monkeypatch.delenv("PCHECKOUT_WRITER")
    src = make_repo(shm, FILES)
    ours = clone_no_checkout(src, shm / "ours")
    _store_for(detect(str(ours)), winner, knee=3, git_workers=6)
    dry = checkout(CheckoutOptions(directory=ours, dry_run=True))
    plan = dry.plan
    assert (plan.writer, plan.writer_source, plan.source) == (winner, "tuned", "tuned")
    assert plan.workers == (6 if winner == "git" else 3)
    assert "2026-12-01" in plan.writer_reason and "2,000-file probe" in plan.writer_reason
    first = "git's writer 0.310 s" if winner == "git" else "pcheckout's engine 0.310 s"
    assert plan.writer_reason.split(": ", 1)[1].startswith(first)
    done = checkout(CheckoutOptions(directory=ours))
    assert done.plan.writer == winner and git(ours, "status", "--porcelain") == b""


def test_an_explicit_writer_overrides_the_measurement(
    shm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = make_repo(shm, FILES)
    ours = clone_no_checkout(src, shm / "ours")
    _store_for(detect(str(ours)), "git", knee=3, git_workers=6)
    monkeypatch.setenv("PCHECKOUT_WRITER", "pcheckout")
    plan = checkout(CheckoutOptions(directory=ours, dry_run=True)).plan
    assert (plan.writer, plan.writer_source, plan.workers) == ("pcheckout", "user", 3)
    monkeypatch.delenv("PCHECKOUT_WRITER")
    git(ours, "config", "pcheckout.writer", "pcheckout")
    assert checkout(CheckoutOptions(directory=ours, dry_run=True)).plan.writer == "pcheckout"
    plan = checkout(CheckoutOptions(directory=ours, dry_run=True, writer="git")).plan
    assert (plan.writer, plan.writer_source, plan.workers) == ("git", "user", 6)


def test_dry_run_json_names_the_measurement(shm: Path) -> None:
    src = make_repo(shm, FILES)
    ours = clone_no_checkout(src, shm / "ours")
    _store_for(detect(str(ours)), "git")
    proc = run_cli(
        "checkout", "-C", str(ours), "--dry-run", "--json", env={"PCHECKOUT_WRITER": "auto"}
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["writer"], report["writer_source"]) == ("git", "tuned")
    assert "git's writer 0.310 s vs pcheckout's engine 0.520 s" in report["writer_reason"]
    human = run_cli("checkout", "-C", str(ours), "--dry-run", env={"PCHECKOUT_WRITER": "auto"})
    assert "writer: git (tuned)" in human.stdout and "0.310 s" in human.stdout


def test_policy_with_a_measured_writer() -> None:
    nfs = detect(tempfile.gettempdir())
    cpus = policy.CpuInfo(2, 2)
    engine = Tuned(32, "2026-12-01", nfs.mount_key, writer="pcheckout", git_workers=16)
    p = policy.choose_workers(nfs, policy.Inputs(cpus, 5000, tuned=engine, git_version=GIT))
    assert (p.writer, p.workers, p.writer_source) == ("pcheckout", 32, "tuned")
    wins = Tuned(2, "2026-12-01", nfs.mount_key, writer="git", git_workers=5)
    p = policy.choose_workers(nfs, policy.Inputs(cpus, 5000, tuned=wins, git_version=GIT))
    assert (p.writer, p.workers) == ("git", 5)
    old = policy.choose_workers(nfs, policy.Inputs(cpus, 5000, tuned=wins, git_version=(2, 31, 0)))
    assert (old.writer, old.workers) == ("pcheckout", 2) and "2.32+" in old.writer_reason


def test_tune_table_shows_both_writers() -> None:
    fs = detect(tempfile.gettempdir())
    result = TuneResult(
        fs.mount_key, "/m", "tmpfs", "2026-12-01", 2, 0.05, ((2, 10.0), (1, 9.0)), (), _times("git")
    )
    console = Console(record=True, width=120, color_system=None)
    tune_result(console, result)
    text = console.export_text()
    rows = [line for line in text.splitlines() if line.startswith(("git's", "pcheckout's"))]
    assert len(rows) == 3
    assert [r for r in rows if "◀ chosen" in r] == [next(r for r in rows if " 4 " in r)]
    assert "chose git's writer at 4 for this mount: 0.310 s against 0.520 s" in text


def test_cli_no_writers_records_none(tmp_path: Path) -> None:
    d = tmp_path / "t"
    d.mkdir()
    args = ("tune", str(d), "--json", "--max-workers", "2", "--files", "40", "--rounds", "1")
    proc = run_cli(*args, "--no-writers")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["writers"] is None
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    writers = json.loads(proc.stdout)["writers"]
    assert writers["winner"] in ("git", "pcheckout") and writers["probe_files"] == 40


# --- plain git: the measured git count, and pcheckout does not mistake it for the user's ---------


def test_git_config_gets_gits_measured_count(tmp_path: Path) -> None:
    mount = tmp_path / "m"
    mount.mkdir()
    fs = detect(str(mount))
    _store_for(fs, "pcheckout", knee=3, git_workers=6)
    proc = run_cli("tune", str(mount), "--git-config", "--no-measure", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["workers"] == 6
    owned = includeif.owned_path(fs.mount_point or str(mount))
    assert "gitConfigWorkers = 6" in owned.read_text()
    repo = mount / "r"
    git(mount, "init", "-q", "r")
    (repo / "f").write_text("x\n")
    git(repo, "add", "f")
    git(repo, "commit", "-qm", "one")
    w = tmp_path / "m" / "w"
    git(mount, "clone", "-q", "--no-checkout", str(repo), "w")
    assert git(w, "config", "checkout.workers").strip() == b"6"
    # pcheckout's plan there is the tune result's, not "git config checkout.workers"
    plan = checkout(CheckoutOptions(directory=w, dry_run=True)).plan
    assert plan.source != "user" and "checkout.workers" not in plan.reason.split(":")[0]
    # a checkout.workers the user sets is theirs again
    git(w, "config", "checkout.workers", "7")
    plan = checkout(CheckoutOptions(directory=w, dry_run=True)).plan
    assert (plan.source, plan.workers) == ("user", 7)


def test_explicit_choice_ignores_the_tuned_git_config() -> None:
    cfg = {"checkout.workers": "6", policy.TUNED_GIT_CONFIG_KEY: "6"}
    assert policy.explicit_choice(None, {}, cfg) is None
    cfg["checkout.workers"] = "5"
    explicit = policy.explicit_choice(None, {}, cfg)
    assert explicit == policy.Explicit(5, "git config checkout.workers")
    assert policy.TUNED_GIT_CONFIG_KEY == "pcheckout.gitconfigworkers"
    assert "[pcheckout]\n\tgitConfigWorkers = 6\n" in includeif.render("/m", 6, 100, "w", "d")
