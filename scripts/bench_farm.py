#!/usr/bin/env python3
"""A build farm checking out at once: N clients on one busy server.

    python3 scripts/bench_farm.py [--clients 8,32] [--slots 16] [--latency-ms 1.0]
        [--files 4800] [--attributes gitlike] [--rounds 3] [--git-workers 32] [--rows REGEX]
        [--ceilings 8,16]

One latencyfs server that serves ``--slots`` requests at a time (``--max-inflight``),
``--latency-ms`` each: the farm's shared file server, mounted once per client as every host
of a farm mounts the export (the mounts share the slots through ``--slots-name``; one mount
for all would also hold one open descriptor per inode of every client's tree in one daemon,
beyond this machine's limit of 20,000).  For every client count and every row
(pcheckout auto, and capped at each of ``--ceilings`` by ``PCHECKOUT_MAX_WORKERS`` as a
farm's admin caps it; git with ``checkout.workers=--git-workers``), interleaved over ``--rounds``
rounds, on a fresh mount each time: N ``git clone --no-checkout --shared`` in the backing
directory (untimed), then N checkouts started together.  Reported per row, medians over the
rounds:

* **batch**: from the first start to the last exit;
* **server floor**: the requests the server counted during the batch x latency / slots, the
  time the server needs for that work at full use (a lower bound: each request also costs
  its real operation);
* **batch / floor** (issue target: <= 1.15) and **slowest / median** client (<= 1.2);
* **server busy**: the time the slots were really held (latency, the operation, the reply)
  over slots x batch: how much of the batch the server worked;
* **requests per file**, everything the server saw (start-up included) / (N x entries);
* **client CPU per file**: the CPU seconds (user + system) each client and the children it
  waited for (pcheckout's cat-files, git's checkout workers) used, from ``wait4``, summed over
  the clients, over N x entries; **clients' CPU share**: that sum over (CPUs x batch), the
  share of the machine the clients alone kept busy (near 1: the batch is CPU-bound here);
* **machine CPU**: the share of the machine's CPU time (all CPUs, /proc/stat; niced time
  counts as idle) that was busy during the batch: the clients, the server's daemons and the
  kernel share these CPUs here, so near 100 % the batch waits for CPUs, not for the server;
* for pcheckout, what the clients' adaptive controllers did (from each one's ``--json``): the
  share that adapted (from 10,000 entries), the share that found the server saturated
  (latency per file rising while files/s stayed flat), the median count at start and end.

The first round of every row checks each client (``git status`` clean, HEAD right).  JSON
goes to ``--out``, markdown to stdout and ``--out`` with ``.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402
import benchlib  # noqa: E402
import genrepo  # noqa: E402

PROJECT = Path(__file__).resolve().parent.parent
TMPFS = Path("/dev/shm")
#: The issue's targets (docs/benchmarks.md, *A build farm at once*).
TARGET_BATCH_VS_FLOOR = 1.15
TARGET_SLOWEST_VS_MEDIAN = 1.2
_BATCHES = itertools.count()


class Farm(NamedTuple):
    """One table's fixed facts: the server and the tree."""

    latency_ms: float
    slots: int
    cache_seconds: float
    src: Path
    entries: int
    scratch: Path


class Row(NamedTuple):
    name: str
    argv: tuple[str, ...]  # the checkout command, ``{W}`` standing for the work tree


def rows(git_workers: int, ceilings: list[int]) -> list[Row]:
    """pcheckout auto (and under each ceiling, as a farm's admin sets one: a git config
    pcheckout.maxWorkers or PCHECKOUT_MAX_WORKERS), git with ``git_workers``."""
    pc = bench.pcheckout_cmd()
    # --json: each client's plan and what its adaptive controller did (a saturated server)
    auto = (*pc, "checkout", "-C", "{W}", "--json")
    return [
        Row("pcheckout auto", auto),
        *(
            Row(f"pcheckout auto, ceiling {n}", ("env", f"PCHECKOUT_MAX_WORKERS={n}", *auto))
            for n in ceilings
        ),
        Row(
            f"git checkout.workers={git_workers}",
            ("git", "-C", "{W}", "-c", f"checkout.workers={git_workers}", "checkout", "-f", "HEAD"),
        ),
    ]


class Client(NamedTuple):
    start: float
    end: float
    returncode: int
    report: dict[str, Any] | None  # pcheckout's --json (None for git)
    cpu_s: float  # user + system of the client and the children it waited for


def _client(argv: list[str], env: dict[str, str], go: threading.Barrier, out: list[Client]) -> None:
    go.wait()
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out_f, stderr=err_f)
        # reaped here, not by Popen: wait4 gives its CPU and its children's
        _pid, status, usage = os.wait4(proc.pid, 0)
        t1 = time.perf_counter()
        code = proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        stdout, stderr = out_f.read(), err_f.read()
    report = None
    if "--json" in argv and not code:
        report = json.loads(stdout)
    out.append(Client(t0, t1, code, report, usage.ru_utime + usage.ru_stime))
    if code:
        sys.stderr.write(stderr.decode(errors="replace")[-400:])


def _plans(clients: list[Client]) -> list[dict[str, Any]]:
    """Each pcheckout client's plan and its controller's account (adapting, saturation)."""
    keys = ("workers", "source", "adapt", "adapt_summary")
    return [{k: c.report.get(k) for k in keys} for c in clients if c.report is not None]


def _verify(backing: Path, n: int) -> str | None:
    for i in range(n):
        st = subprocess.run(
            ["git", "-C", str(backing / f"c{i}"), "status", "--porcelain"],
            capture_output=True,
            text=True,
        )
        if st.returncode or st.stdout.strip():
            return f"client {i}: git status not clean: {(st.stdout or st.stderr)[:200]}"
    return None


def one_batch(farm: Farm, row: Row, clients: int, check: bool) -> dict[str, Any]:
    """N clients of ``row`` at once, each on its own fresh mount of the one server (the
    mounts share its slots: ``slots_name``); their times and the server's counts."""
    import latencyfs

    backing = farm.scratch / "backing"
    shutil.rmtree(backing, ignore_errors=True)
    backing.mkdir(parents=True)
    env = bench.bench_env()
    clone = ["git", "clone", "-q", "--no-checkout", "--shared", str(farm.src)]
    for i in range(clients):
        subprocess.run([*clone, str(backing / f"c{i}")], env=env, check=True)
    times: list[list[Client]] = [[] for _ in range(clients)]
    go = threading.Barrier(clients)
    slots = f"/latencyfs-farm-{os.getpid()}-{next(_BATCHES)}"
    stats = [farm.scratch / f"stats-{i}" for i in range(clients)]
    try:
        with contextlib.ExitStack() as mounts:
            for i in range(clients):
                mounts.enter_context(
                    latencyfs.mounted(
                        backing / f"c{i}",
                        farm.scratch / f"m{i}",
                        latency_ms=farm.latency_ms,
                        max_inflight=farm.slots,
                        slots_name=slots,
                        cache_seconds=farm.cache_seconds,
                        stats=stats[i],
                    )
                )
            before = [latencyfs.read_stats(f) for f in stats]
            cpu_before = _cpu_ticks()
            threads = []
            for i in range(clients):
                argv = [a.replace("{W}", str(farm.scratch / f"m{i}")) for a in row.argv]
                t = threading.Thread(target=_client, args=(argv, env, go, times[i]))
                t.start()
                threads.append(t)
            for t in threads:
                t.join()
            cpu_busy = _busy_share(cpu_before, _cpu_ticks())
    finally:
        latencyfs.unlink_slots(slots)
    counted: dict[str, int] = {}
    for f, b in zip(stats, before, strict=True):  # once unmounted: the last RELEASEs are in
        for k, v in latencyfs.read_stats(f).items():
            if v - b[k]:
                counted[k] = counted.get(k, 0) + v - b[k]
    problem = _verify(backing, clients) if check else None
    shutil.rmtree(backing, ignore_errors=True)
    done = [t[0] for t in times]
    requests = latencyfs.requests(counted)
    return {
        "batch_s": max(c.end for c in done) - min(c.start for c in done),
        "client_s": sorted(c.end - c.start for c in done),
        "failed": sum(1 for c in done if c.returncode),
        "plans": _plans(done),
        "requests": counted,
        "requests_total": requests,
        "floor_s": requests * farm.latency_ms / 1000 / farm.slots,
        # what the slots were really held for (latency, operation, reply), per slot
        "busy_s": counted.get("slot_busy_ns", 0) / 1e9 / farm.slots,
        "cpu_busy": cpu_busy,
        "client_cpu_s": sum(c.cpu_s for c in done),
        "cpus": os.cpu_count() or 1,
        "problem": problem,
    }


def _cpu_ticks() -> tuple[int, int]:
    """The machine's (busy, total) CPU ticks so far, over all CPUs (/proc/stat's cpu line).
    Niced time counts as idle: a niced process elsewhere (another session's tests) only
    takes CPU the batch leaves."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    idle = ticks[1] + ticks[3] + ticks[4]  # nice, idle, iowait
    return sum(ticks) - idle, sum(ticks)


def _busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total else float("nan")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summary(runs: list[dict[str, Any]], entries: int, clients: int) -> dict[str, float]:
    ok = [r for r in runs if not r["failed"]]
    return {
        "batch_s": _median([r["batch_s"] for r in ok]),
        "floor_s": _median([r["floor_s"] for r in ok]),
        "batch_vs_floor": _median([r["batch_s"] / r["floor_s"] for r in ok]),
        "busy_vs_batch": _median([r["busy_s"] / r["batch_s"] for r in ok]),
        "cpu_busy": _median([r.get("cpu_busy", float("nan")) for r in ok]),
        "slowest_vs_median": _median([r["client_s"][-1] / _median(r["client_s"]) for r in ok]),
        "client_median_s": _median([_median(r["client_s"]) for r in ok]),
        "requests_per_file": _median([r["requests_total"] / (entries * clients) for r in ok]),
        "client_cpu_us_per_file": _median(
            [1e6 * r["client_cpu_s"] / (entries * clients) for r in ok if "client_cpu_s" in r]
        ),
        "clients_cpu_share": _median(
            [r["client_cpu_s"] / (r["cpus"] * r["batch_s"]) for r in ok if "client_cpu_s" in r]
        ),
        "slot_waits_per_request": _median(
            [r["requests"].get("slot_waits", 0) / r["requests_total"] for r in ok]
        ),
        "failed_runs": len(runs) - len(ok),
        **_controller(ok),
    }


def _controller(runs: list[dict[str, Any]]) -> dict[str, float]:
    """What pcheckout's clients' controllers did, over all rounds: the share that adapted,
    the share that found the server saturated, and the median count they ended at."""
    plans = [p for r in runs for p in r.get("plans", [])]
    if not plans:
        return {}
    summaries = [p["adapt_summary"] or "" for p in plans]
    ended = [_ended_at(p) for p in plans]
    return {
        "adapting": sum(1 for p in plans if p["adapt"]) / len(plans),
        "saturated": sum(1 for s in summaries if "saturated at" in s) / len(plans),
        "workers_at_end": _median([float(n) for n in ended]),
        "workers_at_start": _median([float(p["workers"]) for p in plans]),
    }


def _ended_at(plan: dict[str, Any]) -> int:
    """The count a client ended at: "adapted 32 -> 16 workers, ..." or its planned count."""
    words = (plan["adapt_summary"] or "").split()
    if len(words) > 3 and words[0] == "adapted" and words[2] == "->":
        return int(words[3])
    return int(plan["workers"])


def markdown(table: dict[str, Any]) -> str:
    lines = [
        f"*{table['clients']} clients at once, {table['entries']} entries each; server: "
        f"{table['slots']} slots, {table['latency_ms']} ms per request; medians of "
        f"{table['rounds']} rounds*",
        "",
        "| row | batch s | server floor s | batch ÷ floor | server busy | slowest ÷ median "
        "client | median client s | requests/file | waited for a slot | client CPU per file | "
        "clients' CPU share | machine CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in table["summary"].items():
        lines.append(
            f"| {name} | {s['batch_s']:.2f} | {s['floor_s']:.2f} | {s['batch_vs_floor']:.3f} | "
            f"{100 * s['busy_vs_batch']:.0f} % | {s['slowest_vs_median']:.3f} | "
            f"{s['client_median_s']:.2f} | "
            f"{s['requests_per_file']:.2f} | {100 * s['slot_waits_per_request']:.0f} % | "
            f"{s['client_cpu_us_per_file']:.0f} µs | {100 * s['clients_cpu_share']:.0f} % | "
            f"{100 * s['cpu_busy']:.0f} % |"
        )
    for name, s in table["summary"].items():
        if "adapting" in s:
            lines.append(
                f"\n{name}: {100 * s['adapting']:.0f} % of the clients adapted, "
                f"{100 * s['saturated']:.0f} % found the server saturated; median count "
                f"{s['workers_at_start']:.0f} at the start, {s['workers_at_end']:.0f} at the end"
            )
    return "\n".join(lines) + "\n"


def run_table(farm: Farm, clients: int, row_list: list[Row], rounds: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {r.name: [] for r in row_list}
    for k in range(rounds):
        order = row_list if k % 2 == 0 else row_list[::-1]
        for row in order:
            res = one_batch(farm, row, clients, check=k == 0)
            runs[row.name].append(res)
            print(
                f"[farm] {clients} clients, {row.name}, round {k + 1}: batch "
                f"{res['batch_s']:.2f} s, floor {res['floor_s']:.2f} s"
                + (f", {res['problem']}" if res["problem"] else ""),
                flush=True,
            )
    return {
        "clients": clients,
        "entries": farm.entries,
        "slots": farm.slots,
        "latency_ms": farm.latency_ms,
        "rounds": rounds,
        "runs": runs,
        "summary": {name: summary(r, farm.entries, clients) for name, r in runs.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", default="8,32")
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--latency-ms", type=float, default=1.0)
    ap.add_argument("--cache-seconds", type=float, default=3.0)
    ap.add_argument("--files", type=int, default=4800)
    ap.add_argument("--shape", default="source", choices=sorted(genrepo.SHAPES))
    ap.add_argument("--attributes", default="gitlike", choices=genrepo.ATTRIBUTE_SETS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--git-workers", type=int, default=32)
    ap.add_argument(
        "--ceilings", default="", help="comma list: a pcheckout row capped at each count"
    )
    ap.add_argument("--rows", default=None, help="only the rows whose name matches (regex)")
    ap.add_argument("--repo-dir", type=Path, default=PROJECT / "bench-out" / "repos")
    ap.add_argument("--out", type=Path, default=PROJECT / "bench-out" / "farm.json")
    a = ap.parse_args(argv)
    bench.compile_bytecode()
    bench._load_latencyfs()
    spec = genrepo.RepoSpec(a.shape, a.files, 1, 0.2, 0, a.attributes)
    src, meta = bench.ensure_repo(a.repo_dir, spec)
    bench.warm(src)
    scratch = TMPFS / f"pcheckout-farm-{os.getpid()}"
    farm = Farm(
        a.latency_ms,
        a.slots,
        a.cache_seconds,
        src,
        bench.tree_entry_count(src, "HEAD"),
        scratch,
    )
    result: dict[str, Any] = {
        "argv": sys.argv if argv is None else argv,
        "date": benchlib.now_iso(),
        "machine": benchlib.machine_facts(),
        "repo": meta["name"],
        "tables": [],
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        for n in (int(x) for x in a.clients.split(",")):
            ceilings = [int(x) for x in a.ceilings.split(",") if x]
            every = rows(a.git_workers, ceilings)
            chosen = [r for r in every if re.search(a.rows or "", r.name)]
            table = run_table(farm, n, chosen, a.rounds)
            result["tables"].append(table)
            print(markdown(table), flush=True)
            result["machine"]["loadavg_end"] = os.getloadavg()
            a.out.write_text(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    a.out.with_suffix(".md").write_text("\n".join(markdown(t) for t in result["tables"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
