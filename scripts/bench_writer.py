#!/usr/bin/env python3
"""The writer benchmark (issue 15's Measure): pcheckout auto against git's default and git's
best ``checkout.workers``, where writing is CPU-bound, plus pcheckout's own engine
(``--writer pcheckout``) and the time pcheckout spends before git's writer starts.

    sudo python3 scripts/bench_writer.py --dest tmpfs,ext4j --files 5000,40000 \\
        --attributes none,gitlike --runs 5 --out bench-out/writer.json

Destinations: ``tmpfs`` (/dev/shm) and ``ext4j``: a fresh ext4 *with a journal* on a loop file
on the disk (mkfs.ext4 defaults; needs root), so that the benchmark's own deletions between
runs do not skew it (docs/filesystems.md, journal-less ext4).  Every table: one repository
(scripts/genrepo.py, ``source`` shape, v1 -> v2 changes 20% of the files), one destination,
fresh checkouts (``v2`` into a no-checkout clone) or switches (v1 -> v2 in a populated tree);
rows round-robin, the first row rotating, medians of ``--runs``.  Only the checkout command is
timed (fork to reaping); the clone (and for switches the v1 checkout) before it and the
``rm -rf`` after it are not.  Every command runs with GIT_CONFIG_GLOBAL=/dev/null and
GIT_CONFIG_NOSYSTEM=1 and an empty tune cache.

"before git's writer": for the pcheckout auto row, from just before the fork to git's own
trace2 ``start`` event of the ``read-tree``/``checkout`` it runs as the writer
(GIT_TRACE2_EVENT), so the interpreter's start-up is included; measured in an extra,
untimed run after each timed one (the timed runs are not traced).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import genrepo  # noqa: E402

PROJECT = Path(__file__).resolve().parent.parent
GIT_COUNTS = (1, 2, 4, 8)  # git's default (1) and the counts around the 2-vCPU knee
ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "LC_ALL": "C",
    "GIT_TERMINAL_PROMPT": "0",
}
#: ext4j image size: a 40k-file source tree is ~250 MB written; one tree at a time lives there.
EXT4_IMAGE_MIB = 3072


def rows() -> list[tuple[str, list[str]]]:
    """(name, extra arguments); git rows carry their count as the argument."""
    out: list[tuple[str, list[str]]] = [
        ("pcheckout auto", []),
        ("pcheckout --writer pcheckout", ["--writer", "pcheckout"]),
    ]
    out += [
        (f"git checkout.workers={n}" + (" (default)" if n == 1 else ""), [str(n)])
        for n in GIT_COUNTS
    ]
    return out


def command(name: str, extra: list[str], work: Path, rev: str) -> list[str]:
    if name.startswith("git"):
        verb = ["checkout", "-q", "-f", rev] if rev == "HEAD" else ["checkout", "-q", rev]
        return ["git", "-C", str(work), "-c", f"checkout.workers={extra[0]}", *verb]
    beside = Path(sys.executable).parent / "pcheckout"
    run = [str(beside)] if beside.exists() else [sys.executable, "-m", "pcheckout"]
    return [*run, "checkout", "-q", "-C", str(work), *extra, rev]


@contextlib.contextmanager
def destination(name: str, scratch: Path) -> Iterator[Path]:
    if name == "tmpfs":
        d = Path(tempfile.mkdtemp(prefix="pcheckout-benchw-", dir="/dev/shm"))
        try:
            yield d
        finally:
            shutil.rmtree(d, ignore_errors=True)
        return
    if name != "ext4j":
        raise SystemExit(f"unknown destination {name}")
    image = scratch / "ext4j.img"
    mnt = scratch / "ext4j"
    mnt.mkdir(parents=True, exist_ok=True)
    subprocess.run(["truncate", "-s", f"{EXT4_IMAGE_MIB}M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)  # journal: the default
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        image.unlink(missing_ok=True)


def trace_start(trace: Path, verbs: tuple[str, ...]) -> float | None:
    """The wall time (s since the epoch) git's writer process started, from its trace2."""
    try:
        lines = trace.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        ev = json.loads(line)
        if ev.get("event") == "start" and any(v in ev.get("argv", []) for v in verbs):
            stamp = ev["time"].replace("Z", "+00:00")
            return dt.datetime.fromisoformat(stamp).timestamp()
    return None


def _clone(src: Path, work: Path, switch: bool, env: dict[str, str]) -> str:
    """A fresh no-checkout clone (for a switch, with v1 checked out); the revision to time."""
    subprocess.run(
        ["git", "clone", "-q", "--no-checkout", "--shared", str(src), str(work)],
        check=True,
        env=env,
    )
    if not switch:
        return "HEAD"
    subprocess.run(["git", "-C", str(work), "checkout", "-q", "-f", "v1"], check=True, env=env)
    return "v2"


def _before_writer(
    extra: list[str], src: Path, root: Path, k: int, switch: bool, env: dict[str, str]
) -> float | None:
    """Fork to the trace2 start of git's writer, in a run of its own: tracing every git
    process costs git's writer time, so the timed runs are not traced (before 2026-12-01
    they were, which charged pcheckout auto's rows ~0.1-0.2 s at 40k entries)."""
    work = root / f"t{k}"
    rev = _clone(src, work, switch, env)
    trace = root / f"trace{k}.json"
    t_fork = time.time()
    benchlib.run_timed(command("pcheckout auto", extra, work, rev),
                       {**env, "GIT_TRACE2_EVENT": str(trace)})  # fmt: skip
    started = trace_start(trace, ("read-tree", "checkout"))
    trace.unlink(missing_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    os.sync()
    return None if started is None else started - t_fork


def one(
    name: str, extra: list[str], src: Path, root: Path, k: int, switch: bool, env: dict[str, str]
) -> dict[str, Any]:
    work = root / f"w{k}"
    rev = _clone(src, work, switch, env)
    timed = benchlib.run_timed(command(name, extra, work, rev), dict(env))
    ok = (
        timed.returncode == 0
        and subprocess.run(
            ["git", "-C", str(work), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            env=env,
        ).stdout
        == b""
    )
    shutil.rmtree(work, ignore_errors=True)
    os.sync()
    before = _before_writer(extra, src, root, k, switch, env) if name == "pcheckout auto" else None
    return {
        "row": name,
        "seconds": timed.seconds,
        "ok": ok,
        "before_writer_s": before,
        "stderr": timed.stderr_tail if timed.returncode else "",
    }


def table(
    dest: str,
    root: Path,
    src: Path,
    files: int,
    attrs: str,
    switch: bool,
    runs: int,
    env: dict[str, str],
) -> dict[str, Any]:
    rs = rows()
    cells: dict[str, list[dict[str, Any]]] = {n: [] for n, _ in rs}
    k = 0
    for r in range(runs):
        order = rs[r % len(rs) :] + rs[: r % len(rs)]
        for name, extra in order:
            cells[name].append(one(name, extra, src, root, k, switch, env))
            k += 1
    return {
        "dest": dest,
        "files": files,
        "attributes": attrs,
        "kind": "switch" if switch else "fresh",
        "cells": cells,
    }


def markdown(t: dict[str, Any]) -> str:
    med = {n: statistics.median(c["seconds"] for c in cells) for n, cells in t["cells"].items()}
    gits = {n: v for n, v in med.items() if n.startswith("git")}
    default = med[next(n for n in gits if "(default)" in n)]
    best_name = min(gits, key=lambda n: gits[n])
    best = gits[best_name]
    out = [
        f"*{t['kind']} - {t['dest']}, source-{t['files']} attributes={t['attributes']}*",
        "",
        "| row | median s | min s | max s | ÷ git default | ÷ git best | ok |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for n, cells in t["cells"].items():
        s = [c["seconds"] for c in cells]
        ok = "yes" if all(c["ok"] for c in cells) else "NO"
        out.append(
            f"| {n} | {med[n]:.3f} | {min(s):.3f} | {max(s):.3f} | "
            f"{med[n] / default:.2f} | {med[n] / best:.2f} | {ok} |"
        )
    before = [
        c["before_writer_s"]
        for c in t["cells"]["pcheckout auto"]
        if c["before_writer_s"] is not None
    ]
    out.append("")
    out.append(
        f"git best: {best_name} ({best:.3f} s); pcheckout auto {med['pcheckout auto']:.3f} s"
        f" = {med['pcheckout auto'] / default:.2f}x git's default, "
        f"{med['pcheckout auto'] / best:.2f}x git's best"
    )
    if before:
        out.append(
            f"before git's writer started (pcheckout auto, fork to git's trace2 start): "
            f"median {statistics.median(before) * 1000:.0f} ms, "
            f"min {min(before) * 1000:.0f} ms"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", default="tmpfs,ext4j")
    p.add_argument("--files", default="5000,40000")
    p.add_argument("--attributes", default="none,gitlike")
    p.add_argument("--kinds", default="fresh,switch")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--repo-dir", default=str(PROJECT / "bench-out" / "repos"))
    p.add_argument("--scratch", default="/var/tmp/pcheckout-benchw")
    p.add_argument("--out", default=str(PROJECT / "bench-out" / "writer.json"))
    args = p.parse_args(argv)
    env = {**os.environ, **ENV}
    empty = Path(tempfile.mkdtemp(prefix="pcheckout-benchw-cache-"))
    env["XDG_CACHE_HOME"] = str(empty)
    for k in ("PCHECKOUT_WORKERS", "PCHECKOUT_WRITER"):
        env.pop(k, None)
    env["PYTHONPATH"] = str(PROJECT / "src")
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(PROJECT / "src")],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    repo_dir = Path(args.repo_dir)
    repo_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    facts = {
        "machine": benchlib.machine_facts(),
        "git": benchlib.git_version(),
        "argv": sys.argv,
        "date": benchlib.now_iso(),
        "commit": subprocess.run(
            ["git", "-C", str(PROJECT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip(),
        "loadavg_start": os.getloadavg(),
    }
    md: list[str] = []
    try:
        for dest in args.dest.split(","):
            with destination(dest, scratch) as root:
                for files in (int(f) for f in args.files.split(",")):
                    for attrs in args.attributes.split(","):
                        name = f"source-{files}-s1-c0.2-a{attrs}"
                        src = repo_dir / name
                        if not src.exists():
                            spec = genrepo.RepoSpec(
                                shape="source", files=files, seed=1, change=0.2, attributes=attrs
                            )
                            genrepo.generate(spec, src)
                        subprocess.run(
                            [
                                "git",
                                "-C",
                                str(src),
                                "cat-file",
                                "--batch-all-objects",
                                "--batch-check",
                            ],
                            stdout=subprocess.DEVNULL,
                            check=True,
                        )
                        for kind in args.kinds.split(","):
                            t = table(
                                dest, root, src, files, attrs, kind == "switch", args.runs, env
                            )
                            t["loadavg_end"] = os.getloadavg()
                            results.append(t)
                            md.append(
                                markdown(t) + f"\nload average at the end: "
                                f"{t['loadavg_end'][0]:.1f}\n"
                            )
                            print(md[-1], flush=True)
                            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                            Path(args.out).write_text(
                                json.dumps({"facts": facts, "tables": results}, indent=1)
                            )
                            Path(args.out).with_suffix(".md").write_text("\n".join(md))
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
