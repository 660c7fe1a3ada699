"""Auto worker count end to end: detect, tune, the dry-run report, adapting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, make_repo, run_cli

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.plan import policy
from pcheckout.tune.workload import pick_knee

FIXTURES = Path(__file__).parent / "fixtures" / "mountinfo"


def test_detect_cli_json_and_table(tmp_path: Path) -> None:
    proc = run_cli("detect", "--json", str(tmp_path / "does" / "not" / "exist"))
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    for key in (
        "path",
        "mount_point",
        "fstype",
        "source",
        "options",
        "kind",
        "nfs_version",
        "f_type",
        "devices",
        "latency_bound",
        "notes",
    ):
        assert key in info
    assert info["probed_path"] == str(tmp_path)  # nearest existing ancestor
    proc = run_cli("detect", str(tmp_path))
    assert proc.returncode == 0 and "kind" in proc.stdout


def test_detect_from_a_captured_mount_table() -> None:
    proc = run_cli(
        "detect", "--json", "--mountinfo", str(FIXTURES / "nfs41.txt"), "/home/alice/src"
    )
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["kind"] == "nfs" and info["nfs_version"] == "4.1" and info["latency_bound"] is True
    proc = run_cli("detect", "--mountinfo", "/no/such/file", "/")
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_tune_then_dry_run_uses_the_stored_result(tmp_path: Path) -> None:
    target = tmp_path / "mount"
    target.mkdir()
    proc = run_cli(
        "tune", str(target), "--json", "--max-workers", "4", "--files", "200", "--rounds", "1"
    )
    assert proc.returncode == 0, proc.stderr
    tuned = json.loads(proc.stdout)
    curve = [(c["workers"], c["files_per_s"]) for c in tuned["curve"]]
    assert len(curve) >= 3 and {n for n, _ in curve} <= {1, 2, 4}
    # the stored count is the curve's knee, at the threshold reported with it
    assert tuned["workers"] == pick_knee(curve, tuned["threshold"])
    assert sorted(p.name for p in target.iterdir()) == []  # scratch removed

    files = {b"d%d/f%d" % (i % 9, i): b"x" * i for i in range(300)}
    src = make_repo(tmp_path, files)
    work = clone_no_checkout(src, target / "work")
    proc = run_cli("checkout", "-C", str(work), "--dry-run", "--json")
    report = json.loads(proc.stdout)
    assert report["source"] == "tuned", report
    assert report["workers"] == min(tuned["workers"], report["workers"])
    assert "tuned on" in report["reason"]
    # an explicit choice still wins, and says so
    report = json.loads(
        run_cli("checkout", "-C", str(work), "--dry-run", "--json", "--workers", "3").stdout
    )
    assert report["source"] == "user" and report["workers"] == 3
    proc = run_cli("tune", str(target), "--forget")
    assert proc.returncode == 0 and "forgot" in proc.stdout
    report = json.loads(run_cli("checkout", "-C", str(work), "--dry-run", "--json").stdout)
    assert report["source"] == "policy"


def test_environment_and_git_config_choices(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"f%d" % i: b"x" for i in range(200)})
    work = clone_no_checkout(src, tmp_path / "w", config={"pcheckout.workers": "5"})
    report = json.loads(run_cli("checkout", "-C", str(work), "-n", "--json").stdout)
    assert (report["workers"], report["source"]) == (5, "user")
    report = json.loads(
        run_cli("checkout", "-C", str(work), "-n", "--json", env={"PCHECKOUT_WORKERS": "6"}).stdout
    )
    assert report["workers"] == 6 and "PCHECKOUT_WORKERS" in report["reason"]


def test_adaptive_checkout_matches_git_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Adapt whatever kind of filesystem the temporary directory is on (CPU-bound kinds write
    # in a fixed number of processes instead).
    monkeypatch.setattr(policy, "CPU_BOUND_KINDS", ())
    monkeypatch.setattr(policy, "ADAPT_MIN_ENTRIES", 2000)
    files = {b"dir%02d/f%04d.txt" % (i % 50, i): b"%d\n" % i * (i % 7) for i in range(2500)}
    src = make_repo(tmp_path, files)
    theirs = clone_with_git(src, tmp_path / "theirs")
    ours = clone_no_checkout(src, tmp_path / "ours")
    dry = checkout(CheckoutOptions(directory=ours, dry_run=True))
    assert dry.plan.source == "policy" and dry.plan.adapt  # type: ignore[attr-defined]
    result = checkout(CheckoutOptions(directory=ours))
    assert result.adapt_summary  # type: ignore[attr-defined]
    assert_same_as_git(ours, theirs)
    ours2 = clone_no_checkout(src, tmp_path / "ours2")
    result = checkout(CheckoutOptions(directory=ours2, adapt=False))
    assert result.adapt_summary is None and not result.plan.adapt  # type: ignore[attr-defined]
