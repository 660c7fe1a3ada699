"""One tune result per server export, read by every host, and a ceiling per mount: the
shared file (keyed by export, longest export first, the user's own result before it), the
ceilings (set ones bind explicit counts, measured ones what pcheckout chooses), and what
``detect`` and ``--dry-run`` say about both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import clone_no_checkout, make_repo, run_cli

from pcheckout.errors import UsageError
from pcheckout.fs.detect import FsInfo, detect
from pcheckout.plan import policy, tunecache
from pcheckout.plan.planner import Asked, plan_for
from pcheckout.plan.policy import Ceiling, CpuInfo, Explicit, Inputs, Tuned
from pcheckout.plan.tunecache import TuneResult, cache_path, export_key, lookup, store, store_shared


def net_fs(
    source: str = "filer1:/vol/build",
    fstype: str = "nfs4",
    kind: str = "nfs",
    mount: str = "/mnt/a",
) -> FsInfo:
    return FsInfo(
        path=mount,
        probed_path=mount,
        mount_point=mount,
        mount_id=7,
        fstype=fstype,
        source=source,
        options={"vers": "4.1"},
        kind=kind,  # type: ignore[arg-type]
        upper_kind=None,
        nfs_version="4.1" if kind == "nfs" else None,
        f_type=None,
        devices=(),
        latency_bound=True,
        notes=(),
    )


def result(fs: FsInfo, workers: int = 12, ceiling: int | None = None) -> TuneResult:
    return TuneResult(
        mount_key=fs.mount_key,
        mount_point=fs.mount_point,
        kind=str(fs.kind),
        measured_on="2026-12-02",
        workers=workers,
        threshold=0.05,
        curve=((32, 990.0), (16, 985.0), (12, 980.0), (1, 90.0)),
        ceiling=ceiling,
    )


@pytest.mark.parametrize(
    ("fstype", "kind", "source", "key"),
    [
        ("nfs4", "nfs", "Filer1:/vol/build/", "filer1:/vol/build"),
        ("nfs", "nfs", "[fd00::1]:/export", "[fd00::1]:/export"),
        ("cifs", "smb", "//FS01/Share", "//fs01/share"),
        ("fuse.sshfs", "network", "alice@Build-Host:/srv/w", "build-host:/srv/w"),
        ("fuse.sshfs", "network", "host:", "host:/"),
        ("glusterfs", "network", "gl1:/vol0", "gl1:/vol0"),
        ("tmpfs", "tmpfs", "tmpfs", None),
    ],
)
def test_the_export_key(fstype: str, kind: str, source: str, key: str | None) -> None:
    assert export_key(net_fs(source, fstype, kind)) == key


def test_one_measurement_serves_every_host_that_mounts_the_export(tmp_path: Path) -> None:
    shared = tmp_path / "etc" / "tuned.json"
    here = net_fs("filer1:/vol/build", mount="/mnt/a")
    assert store_shared(result(here, 12), here, shared) == "filer1:/vol/build"
    # another host: another mount point, a subdirectory of the export, other options
    there = net_fs("FILER1:/vol/build/team7", mount="/build")._replace(options={"vers": "4.2"})
    tuned = lookup(there, shared)
    assert tuned is not None and (tuned.workers, tuned.ceiling) == (12, 12)
    assert (tuned.where, tuned.file) == (f"for filer1:/vol/build in {shared}", str(shared))
    assert tuned.mount_key == there.mount_key  # it applies to this mount now
    assert lookup(there) is None  # not without the shared file
    assert lookup(net_fs("filer2:/vol/build"), shared) is None  # another server
    assert lookup(net_fs("filer1:/vol/buildx"), shared) is None  # not a directory below
    sshfs = net_fs("filer1:/vol/build", "fuse.sshfs", "network")
    assert lookup(sshfs, shared) is None  # measured on NFS: not for an sshfs of the same path
    data = json.loads(shared.read_text())
    assert list(data["exports"]) == ["filer1:/vol/build"] and data["version"] == 1


def test_the_longest_export_and_the_users_own_result_come_first(tmp_path: Path) -> None:
    shared = tmp_path / "tuned.json"
    store_shared(result(net_fs("filer1:/vol"), 8), net_fs("filer1:/vol"), shared)
    store_shared(result(net_fs("filer1:/vol/build"), 24), net_fs("filer1:/vol/build"), shared)
    deep = net_fs("filer1:/vol/build/x")
    tuned = lookup(deep, shared)
    assert tuned is not None and tuned.workers == 24
    tuned = lookup(net_fs("filer1:/vol/other"), shared)
    assert tuned is not None and tuned.workers == 8
    store(result(deep, 4))
    tuned = lookup(deep, shared)
    assert tuned is not None and (tuned.workers, tuned.where) == (4, "for this mount")


def test_a_broken_shared_file_is_no_result(tmp_path: Path) -> None:
    shared = tmp_path / "tuned.json"
    shared.write_text("{not json")
    assert lookup(net_fs(), shared) is None
    shared.write_text(json.dumps({"version": 1, "exports": {"filer1:/vol/build": {"x": 1}}}))
    assert lookup(net_fs(), shared) is None
    assert lookup(net_fs(), tmp_path / "missing.json") is None


def test_where_the_shared_file_is(monkeypatch: pytest.MonkeyPatch) -> None:
    assert tunecache.shared_path({}, {}) == Path("/etc/pcheckout/tuned.json")
    assert tunecache.shared_path({}, {"pcheckout.sharedtune": "/srv/t.json"}) == Path("/srv/t.json")
    env = {"PCHECKOUT_SHARED_TUNE": "/e.json"}
    assert tunecache.shared_path(env, {"pcheckout.sharedtune": "/srv/t.json"}) == Path("/e.json")


# --- ceilings -------------------------------------------------------------------------------

CPUS = CpuInfo(2, 2)
FUSE = net_fs("x", "fuse.other", "fuse")


def plan(ceilings: tuple[Ceiling, ...], **kw: object) -> policy.WorkerPlan:
    return policy.choose_workers(FUSE, Inputs(CPUS, 20_000, ceilings=ceilings, **kw))  # type: ignore[arg-type]


def test_a_set_ceiling_caps_the_policy_and_explicit_counts_but_not_the_command_line() -> None:
    ceilings = policy.ceiling_for({}, {"pcheckout.maxWorkers": "8"}, None)
    assert ceilings == (Ceiling(8, "git config pcheckout.maxworkers"),)
    p = plan(ceilings)
    assert (p.workers, p.adapt, p.ceiling) == (8, False, 8)
    assert p.reason.endswith("; capped at 8 by git config pcheckout.maxworkers")
    env = plan(ceilings, explicit=Explicit(40, "PCHECKOUT_WORKERS"))
    assert env.workers == 8
    cli = plan(ceilings, explicit=Explicit(40, "--workers"))
    assert cli.workers == 40 and "above the ceiling of 8" in cli.reason


def test_a_ceiling_above_the_count_bounds_the_adaptive_controller() -> None:
    p = plan(policy.ceiling_for({"PCHECKOUT_MAX_WORKERS": "48"}, {}, None))
    assert (p.workers, p.adapt, p.ceiling) == (32, True, 48)
    assert plan(()).ceiling == policy.MAX_WORKERS


def test_the_strictest_set_ceiling_holds() -> None:
    found = policy.ceiling_for({"PCHECKOUT_MAX_WORKERS": "6"}, {"pcheckout.maxworkers": "9"}, None)
    p = plan(found)
    assert p.workers == 6 and "PCHECKOUT_MAX_WORKERS" in p.reason


def test_a_measured_ceiling_binds_only_what_pcheckout_chooses() -> None:
    tuned = Tuned(12, "2026-12-02", FUSE.mount_key, ceiling=12, where="for x in /etc/t.json")
    ceilings = policy.ceiling_for({}, {}, tuned)
    assert ceilings == (Ceiling(12, "the tune result for x in /etc/t.json", explicit=False),)
    assert plan(ceilings).workers == 12  # the policy's 32, capped
    assert plan(ceilings, explicit=Explicit(20, "PCHECKOUT_WORKERS")).workers == 20


@pytest.mark.parametrize("value", ["0", "-3", "many", "1.5"])
def test_an_unusable_ceiling_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match="PCHECKOUT_MAX_WORKERS"):
        policy.ceiling_for({"PCHECKOUT_MAX_WORKERS": value}, {}, None)


# --- what the user sees ---------------------------------------------------------------------


def test_dry_run_and_detect_say_which_result_applied_and_from_where(tmp_path: Path) -> None:
    """A real mount (the temporary directory's) has no export; the shared file is found by
    its mount key there through the planner, and the dry run quotes it."""
    src = make_repo(tmp_path, {b"d%d/f%03d" % (i % 9, i): b"x" for i in range(300)})
    work = clone_no_checkout(src, tmp_path / "w")
    fs = detect(str(work))
    store(result(fs, 3))
    asked = Asked(None, None, True, {}, {})
    _, p = plan_for(work, asked, entries=300, nbytes=300, fs=fs)
    assert p.source == "tuned" and "for this mount" in p.reason
    done = run_cli("checkout", "-C", str(work), "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["source"] == "tuned" and report["ceiling"] == 3
    assert report["tuned"]["where"] == "for this mount"
    assert report["tuned"]["file"] == str(cache_path())
    line = f"tuned: 3 workers, ceiling 3, measured 2026-12-02 for this mount in {cache_path()}"
    shown = run_cli("detect", "--json", str(work))
    assert json.loads(shown.stdout)["tuned"] == report["tuned"]
    assert line in run_cli("detect", str(work)).stdout
    dry = run_cli("checkout", "-C", str(work), "--dry-run").stdout
    assert line in dry and "CPUs: " in dry


def test_plan_for_reads_the_shared_file_named_by_the_environment(tmp_path: Path) -> None:
    shared = tmp_path / "shared.json"
    fs = net_fs("filer1:/vol/build/t", mount=str(tmp_path))
    store_shared(result(net_fs(), 12), net_fs(), shared)
    asked = Asked(None, None, True, {"PCHECKOUT_SHARED_TUNE": str(shared)}, {})
    _, p = plan_for(tmp_path, asked, entries=5000, nbytes=0, fs=fs)
    assert p.source == "tuned" and p.workers == 12
    assert f"for filer1:/vol/build in {shared}" in p.reason
