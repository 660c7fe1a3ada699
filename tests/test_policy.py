from __future__ import annotations

from pathlib import Path

import pytest

from pcheckout.errors import UsageError
from pcheckout.fs.detect import Device, FsInfo, Kind
from pcheckout.plan.cpus import linux_cores
from pcheckout.plan.policy import (
    MAX_WORKERS,
    PARALLEL_THRESHOLD,
    CpuInfo,
    Explicit,
    ExplicitWriter,
    Inputs,
    Tuned,
    WorkerPlan,
    choose_workers,
    explicit_choice,
    explicit_writer,
    parse_workers,
)

SMT8 = CpuInfo(logical=16, physical=8)
BIG = CpuInfo(logical=128, physical=64)
TWO = CpuInfo(logical=2, physical=2)


def fs(
    kind: Kind,
    *,
    fstype: str = "ext4",
    nfs_version: str | None = None,
    upper_kind: Kind | None = None,
    options: dict[str, str | None] | None = None,
) -> FsInfo:
    return FsInfo(
        path="/w",
        probed_path="/w",
        mount_point="/",
        mount_id=1,
        fstype=fstype,
        source="srv:/x",
        options=options or {},
        kind=kind,
        upper_kind=upper_kind,
        nfs_version=nfs_version,
        f_type=None,
        devices=(Device("vda", True, True),),
        latency_bound=None,
        notes=(),
    )


def plan(
    info: FsInfo | None, entries: int = 10_000, cpus: CpuInfo = SMT8, **kw: object
) -> WorkerPlan:
    inputs = Inputs(cpus=cpus, entries=entries, nbytes=entries * 4096, **kw)  # type: ignore[arg-type]
    return choose_workers(info, inputs)


# --- policy by kind ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["3", "4.1", "4.2"])
def test_nfs_3_and_41_get_many_workers(version: str) -> None:
    p = plan(fs("nfs", fstype="nfs4", nfs_version=version))
    assert p.workers == 16 and p.source == "policy"
    assert "git's NFS measurements" in p.reason and f"NFS {version}" in p.reason
    assert plan(fs("nfs", nfs_version=version), entries=70_000).workers == 32


def test_nfs_40_plateaus_at_4() -> None:
    p = plan(fs("nfs", fstype="nfs4", nfs_version="4.0"), entries=70_000)
    assert p.workers == 4 and "4.0" in p.reason


def test_nfs_unknown_version_gets_a_middle_value() -> None:
    assert plan(fs("nfs", fstype="nfs", nfs_version=None)).workers == 8


def test_latency_bound_counts_do_not_shrink_with_few_cpus() -> None:
    # seed 002: threads beyond CPUs pay off when open() waits on a server
    assert plan(fs("nfs", nfs_version="3"), cpus=CpuInfo(1, 1)).workers == 16
    assert plan(fs("smb", fstype="cifs"), cpus=CpuInfo(1, 1)).workers > 1


def test_cpu_bound_kinds_use_physical_cores() -> None:
    assert plan(fs("tmpfs", fstype="tmpfs")).workers == 8
    assert plan(fs("ssd")).workers == 8
    assert plan(fs("ssd"), cpus=TWO).workers == 2


def test_cpu_bound_cap_is_20() -> None:
    assert plan(fs("ssd"), cpus=BIG).workers == 20


def test_unknown_physical_cores_halves_logical() -> None:
    assert plan(fs("tmpfs", fstype="tmpfs"), cpus=CpuInfo(logical=12, physical=None)).workers == 6
    assert plan(fs("tmpfs", fstype="tmpfs"), cpus=CpuInfo(logical=1, physical=None)).workers == 1


def test_spinning_disk_gets_one_worker() -> None:
    p = plan(fs("hdd"), cpus=BIG)
    assert p.workers == 1 and not p.adapt


def test_virtual_disk_is_cpu_bound_not_spinning() -> None:
    p = plan(fs("virtual"), cpus=SMT8)
    assert p.workers == 8 and "page cache" in p.reason  # physical cores, not 1 as for hdd


def test_overlay_follows_its_upper_layer() -> None:
    on_nfs = plan(fs("overlay", fstype="overlay", upper_kind="nfs"))
    assert on_nfs.workers == 8 and "upper layer" in on_nfs.reason
    assert plan(fs("overlay", fstype="overlay", upper_kind="hdd")).workers == 1
    assert plan(fs("overlay", fstype="overlay", upper_kind=None)).workers == SMT8.cpu_bound_workers


def test_unknown_and_missing_filesystem_use_cpu_count() -> None:
    assert plan(fs("unknown")).workers == 8
    assert plan(None).workers == 8 and "unknown" in plan(None).reason


def test_network_and_fuse_are_parallel() -> None:
    assert plan(fs("network", fstype="lustre")).workers == 16
    assert plan(fs("fuse", fstype="fuse.bindfs")).workers == 32


def test_sshfs_gets_a_few_more_workers_than_its_ten_requests_in_flight() -> None:
    more_connections: dict[str, str | None] = {"max_conns": "4"}  # still 10 FUSE threads
    for options in ({}, more_connections):
        p = plan(fs("network", fstype="fuse.sshfs", options=options), entries=4_000)
        assert (p.workers, p.source, p.writer) == (16, "policy", "pcheckout")
        assert "at most 10 requests at a time" in p.reason
    assert "sshfs" not in plan(fs("network", fstype="fuse.glusterfs")).reason


# --- thresholds and caps -----------------------------------------------------------------------


def test_below_threshold_one_worker() -> None:
    p = plan(fs("nfs", nfs_version="3"), entries=PARALLEL_THRESHOLD - 1)
    assert p.workers == 1 and "thresholdForParallelism" in p.reason and not p.adapt
    assert plan(fs("nfs", nfs_version="3"), entries=PARALLEL_THRESHOLD).workers > 1


def test_few_entries_per_worker_reduce_the_count() -> None:
    p = plan(fs("nfs", nfs_version="3"), entries=100)
    assert p.workers == 12  # 100 // 8
    assert "for 100 entries" in p.reason


def test_reason_is_one_line() -> None:
    for kind in (
        "nfs",
        "smb",
        "network",
        "fuse",
        "tmpfs",
        "ssd",
        "hdd",
        "virtual",
        "overlay",
        "unknown",
    ):
        assert "\n" not in plan(fs(kind)).reason  # type: ignore[arg-type]


def test_adapt_only_for_policy_with_enough_entries() -> None:
    nfs = fs("nfs", nfs_version="3")
    assert plan(nfs, entries=50_000).adapt
    assert not plan(nfs, entries=500).adapt
    assert not plan(nfs, entries=5_000).adapt  # a checkout of seconds: probing cannot pay
    assert not plan(nfs, entries=50_000, allow_adapt=False).adapt
    assert not plan(nfs, entries=50_000, explicit=Explicit(4, "--workers")).adapt


# --- precedence --------------------------------------------------------------------------------


def test_explicit_wins_over_everything() -> None:
    nfs = fs("nfs", nfs_version="3")
    tuned = Tuned(workers=24, measured_on="2024-05-01", mount_key=nfs.mount_key)
    p = plan(nfs, entries=10, explicit=Explicit(3, "PCHECKOUT_WORKERS"), tuned=tuned)
    assert (p.workers, p.source) == (3, "user")
    assert "PCHECKOUT_WORKERS" in p.reason


def test_explicit_is_capped() -> None:
    p = plan(fs("ssd"), explicit=Explicit(1000, "--workers"))
    assert p.workers == MAX_WORKERS and "capped" in p.reason


def test_tuned_applies_only_to_the_same_mount() -> None:
    nfs = fs("nfs", nfs_version="3")
    same = Tuned(workers=24, measured_on="2024-05-01", mount_key=nfs.mount_key)
    p = plan(nfs, tuned=same)
    assert (p.workers, p.source) == (24, "tuned") and "2024-05-01" in p.reason
    other = Tuned(workers=24, measured_on="2024-05-01", mount_key="something else")
    assert plan(nfs, tuned=other).source == "policy"
    assert plan(None, tuned=same).source == "policy"


def test_tuned_still_respects_threshold_and_cap() -> None:
    nfs = fs("nfs", nfs_version="3")
    t = Tuned(workers=500, measured_on="2024-05-01", mount_key=nfs.mount_key)
    assert plan(nfs, tuned=t).workers == MAX_WORKERS
    assert plan(nfs, entries=10, tuned=t).workers == 1


# --- explicit_choice ---------------------------------------------------------------------------


def test_no_choice_anywhere() -> None:
    assert explicit_choice(None, {}, {}) is None
    assert (
        explicit_choice(
            parse_workers("auto"), {"PCHECKOUT_WORKERS": "auto"}, {"pcheckout.workers": "auto"}
        )
        is None
    )


def test_precedence_cli_env_config() -> None:
    env = {"PCHECKOUT_WORKERS": "6"}
    cfg = {"pcheckout.workers": "5", "checkout.workers": "4"}
    assert explicit_choice(parse_workers("7"), env, cfg) == Explicit(7, "--workers")
    assert explicit_choice(None, env, cfg) == Explicit(6, "PCHECKOUT_WORKERS")
    assert explicit_choice(parse_workers("auto"), {}, cfg) == Explicit(
        5, "git config pcheckout.workers"
    )
    assert explicit_choice(None, {}, {"checkout.workers": "4"}) == Explicit(
        4, "git config checkout.workers"
    )


def test_auto_defers_to_the_next_level() -> None:
    assert explicit_choice(parse_workers("auto"), {"PCHECKOUT_WORKERS": "3"}, {}) == Explicit(
        3, "PCHECKOUT_WORKERS"
    )
    assert explicit_choice(None, {"PCHECKOUT_WORKERS": ""}, {"pcheckout.workers": "2"}).workers == 2  # type: ignore[union-attr]


def test_git_config_keys_are_case_insensitive() -> None:
    assert explicit_choice(None, {}, {"PCheckout.Workers": "9"}) == Explicit(
        9, "git config pcheckout.workers"
    )


def test_git_checkout_workers_below_one_means_all_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 12)
    choice = explicit_choice(None, {}, {"checkout.workers": "0"})
    assert choice is not None and choice.workers == 12 and "all CPUs" in choice.where
    assert explicit_choice(None, {}, {"checkout.workers": "many"}) is None  # git's business


@pytest.mark.parametrize(
    ("cli", "env", "cfg", "where"),
    [
        ("0", {}, {}, "--workers"),
        ("-3", {}, {}, "--workers"),
        ("two", {}, {}, "--workers"),
        ("1.5", {}, {}, "--workers"),
        (None, {"PCHECKOUT_WORKERS": "x"}, {}, "PCHECKOUT_WORKERS"),
        (None, {}, {"pcheckout.workers": "0"}, "pcheckout.workers"),
    ],
)
def test_invalid_values_are_usage_errors(
    cli: str | None, env: dict[str, str], cfg: dict[str, str], where: str
) -> None:
    with pytest.raises(UsageError) as info:
        explicit_choice(None if cli is None else parse_workers(cli), env, cfg)
    msg = str(info.value)
    assert where in msg and "\n" not in msg and "auto" in msg


def test_cpuinfo_current_is_sane() -> None:
    c = CpuInfo.current()
    assert c.logical >= 1
    assert c.physical is None or 1 <= c.physical <= c.logical


def test_cpu_bound_kinds_write_in_processes_latency_bound_in_adapting_threads() -> None:
    tmpfs = fs("tmpfs", fstype="tmpfs")
    for entries in (5_000, 60_000):
        p = plan(tmpfs, entries=entries)  # SMT8: 8 workers on 16 CPUs
        assert p.processes and not p.adapt
    assert plan(fs("virtual"), cpus=TWO).processes
    fuse = plan(fs("fuse", fstype="fuse.x"), entries=20_000)
    assert not fuse.processes and fuse.adapt  # latency-bound: many cheap threads, probing
    # More workers than CPUs asked for: threads; one worker: no fork at all.
    asked = Explicit(64, "--workers")
    assert not plan(tmpfs, explicit=asked).processes
    assert plan(tmpfs, explicit=Explicit(4, "--workers")).processes
    assert not plan(tmpfs, explicit=Explicit(1, "--workers")).processes
    assert not plan(fs("unknown", fstype="weird")).processes  # nothing known: threads


def test_processes_or_threads_when_asked() -> None:
    """``processes=`` overrides the filesystem and the CPU count; one worker never forks."""
    fuse = fs("fuse", fstype="fuse.x")
    asked = plan(fuse, entries=20_000, cpus=TWO, explicit=Explicit(4, "--workers"), processes=True)
    assert asked.processes and not asked.adapt and asked.workers == 4
    assert not plan(fs("tmpfs", fstype="tmpfs"), processes=False).processes
    assert not plan(fuse, explicit=Explicit(1, "--workers"), processes=True).processes


def test_cpu_info_agrees_with_psutil_on_this_machine() -> None:
    import os

    import psutil

    here = CpuInfo.current()
    assert here.logical == len(os.sched_getaffinity(0)) or here.limited_by
    if here.logical == psutil.cpu_count(logical=True):  # no affinity mask in the way
        assert here.physical == psutil.cpu_count(logical=False)


def test_linux_cores_counts_sibling_sets(tmp_path: Path) -> None:
    # 4 logical CPUs, 2 cores with 2 threads each; cpu3 only has the pre-5.6 file name.
    for cpu, siblings in ((0, "0,2"), (1, "1,3"), (2, "0,2")):
        d = tmp_path / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "core_cpus_list").write_text(siblings + "\n")
    d = tmp_path / "cpu3" / "topology"
    d.mkdir(parents=True)
    (d / "thread_siblings_list").write_text("1,3\n")
    assert linux_cores({0, 1, 2, 3}, str(tmp_path)) == 2
    assert linux_cores({0, 2}, str(tmp_path)) == 1  # affinity on one core's two threads
    assert linux_cores({0, 4}, str(tmp_path)) is None  # cpu4 has no topology: unknown


# --- the writer --------------------------------------------------------------------------------

GIT_NEW = (2, 39, 5)
GIT_OLD = (2, 31, 1)
FIXTURES = Path(__file__).parent / "fixtures" / "mountinfo"


@pytest.mark.parametrize(
    ("table", "path", "writer"),
    [
        ("tmpfs_virtio.txt", "/dev/shm/w", "git"),
        ("tmpfs_virtio.txt", "/mnt/scratch/w", "git"),
        ("overlay_docker.txt", "/srv/tmp-overlay/w", "git"),  # upper layer on tmpfs
        ("zfs.txt", "/tank/src/w", "git"),  # a zfs dataset: virtual, CPU-bound
        ("nfs3.txt", "/mnt/build/w", "pcheckout"),
        ("nfs41.txt", "/home/alice/w", "pcheckout"),
        ("cifs_smb3.txt", "/mnt/share/w", "pcheckout"),
        ("lustre.txt", "/lustre/scratch/w", "pcheckout"),
        ("sshfs.txt", "/mnt/remote/w", "pcheckout"),
        ("fuse_local.txt", "/mnt/local-fuse/w", "pcheckout"),
        ("tmpfs_virtio.txt", "/mnt/hostshare/w", "pcheckout"),  # virtiofs: calls go to the host
        ("nfs3.txt", "/srv/w", "pcheckout"),  # an ext4 on an unnamed disk, from a table: unknown
    ],
)
def test_writer_by_filesystem_kind_from_mount_tables(table: str, path: str, writer: str) -> None:
    from pcheckout.fs.detect import detect

    info = detect(path, mountinfo=str(FIXTURES / table))
    p = plan(info, entries=5_000, cpus=TWO, git_version=GIT_NEW)
    assert p.writer == writer, (info.kind, p.writer_reason)
    assert p.writer_source == "policy" and "\n" not in p.writer_reason
    if writer == "git":
        assert not p.processes and not p.adapt and "CPU-bound" in p.writer_reason
        assert p.workers == 4  # 2 checkout.workers per core on 2 cores
    else:
        assert "latency-bound" in p.writer_reason or "unknown" in p.writer_reason


def test_git_older_than_232_falls_back_with_a_note() -> None:
    p = plan(fs("tmpfs", fstype="tmpfs"), cpus=TWO, git_version=GIT_OLD)
    assert p.writer == "pcheckout" and p.processes
    assert "git 2.31.1 has no parallel checkout (2.32+)" in p.writer_reason
    assert plan(fs("tmpfs", fstype="tmpfs"), git_version=(0, 0, 0)).writer == "pcheckout"


def test_explicit_writer_wins_over_kind_and_tuning() -> None:
    nfs = fs("nfs", nfs_version="3")
    tuned = Tuned(workers=24, measured_on="2024-05-01", mount_key=nfs.mount_key)
    p = plan(nfs, tuned=tuned, writer=ExplicitWriter("git", "--writer"), git_version=GIT_NEW)
    assert (p.writer, p.writer_source, p.workers) == ("git", "user", 24)
    assert not p.adapt and not p.processes
    tmpfs = fs("tmpfs", fstype="tmpfs")
    p = plan(
        tmpfs, cpus=TWO, writer=ExplicitWriter("pcheckout", "PCHECKOUT_WRITER"), git_version=GIT_NEW
    )
    assert (p.writer, p.workers, p.processes) == ("pcheckout", 2, True)
    assert "PCHECKOUT_WRITER" in p.writer_reason
    old = plan(tmpfs, writer=ExplicitWriter("git", "--writer"), git_version=GIT_OLD)
    assert old.writer == "git" and "sequentially" in old.writer_reason  # the user's call


def test_explicit_count_goes_to_git_as_is() -> None:
    p = plan(
        fs("tmpfs", fstype="tmpfs"),
        cpus=TWO,
        explicit=Explicit(7, "--workers"),
        git_version=GIT_NEW,
    )
    assert (p.writer, p.workers, p.source) == ("git", 7, "user")


def test_tuned_result_picks_the_writer() -> None:
    ext4 = fs("virtual")
    wide = Tuned(workers=32, measured_on="2024-05-01", mount_key=ext4.mount_key)
    p = plan(ext4, cpus=TWO, tuned=wide, git_version=GIT_NEW)
    assert (p.writer, p.writer_source, p.workers) == ("pcheckout", "tuned", 32)
    assert "calls wait" in p.writer_reason
    nfs = fs("nfs", nfs_version="3")
    narrow = Tuned(workers=2, measured_on="2024-05-01", mount_key=nfs.mount_key)
    p = plan(nfs, cpus=TWO, tuned=narrow, git_version=GIT_NEW)
    assert (p.writer, p.writer_source, p.workers) == ("git", "tuned", 2)
    chosen = Tuned(workers=8, measured_on="2024-05-01", mount_key=nfs.mount_key, writer="git")
    assert plan(nfs, cpus=TWO, tuned=chosen, git_version=GIT_NEW).writer == "git"
    assert plan(nfs, cpus=TWO, tuned=chosen, git_version=GIT_OLD).writer == "pcheckout"


def test_small_trees_give_git_one_worker() -> None:
    p = plan(fs("tmpfs", fstype="tmpfs"), entries=50, cpus=TWO, git_version=GIT_NEW)
    assert (p.writer, p.workers) == ("git", 1)


def test_explicit_writer_precedence_cli_env_config() -> None:
    env = {"PCHECKOUT_WRITER": "pcheckout"}
    cfg = {"pcheckout.writer": "git"}
    assert explicit_writer("git", env, cfg) == ExplicitWriter("git", "--writer")
    assert explicit_writer(None, env, cfg) == ExplicitWriter("pcheckout", "PCHECKOUT_WRITER")
    assert explicit_writer("auto", {"PCHECKOUT_WRITER": "auto"}, cfg) == ExplicitWriter(
        "git", "git config pcheckout.writer"
    )
    assert explicit_writer("AUTO", {}, {"PCheckout.Writer": "auto"}) is None
    assert explicit_writer(None, {"PCHECKOUT_WRITER": " "}, {}) is None


@pytest.mark.parametrize(
    ("cli", "env", "where"),
    [("cat-file", {}, "--writer"), (None, {"PCHECKOUT_WRITER": "gitt"}, "PCHECKOUT_WRITER")],
)
def test_invalid_writer_is_a_usage_error(cli: str | None, env: dict[str, str], where: str) -> None:
    with pytest.raises(UsageError, match=where):
        explicit_writer(cli, env, {})
