#!/usr/bin/env python3
"""What pcheckout's front end adds to git's own checkout where git's writer runs (issue 24).

    python3 scripts/bench_front.py [--dest tmpfs,ext4j] [--files 5000,40000]
        [--kinds fresh,switch] [--runs 7] [--git-counts 1,2,3,4,6,8] [--baseline SRC]
        [--attributes none|gitlike] [--change F] [--lfs-installed] [--python PY]

Per table (one generated ``source`` repository, scripts/genrepo.py, one destination, fresh
checkouts of v2 into a ``clone --no-checkout --shared`` or switches v1 -> v2), the rows run
round-robin, the first row rotating: ``pcheckout checkout -q`` (this tree's ``src/``, and
``--baseline SRC``'s beside it), git's ``checkout`` at each count of ``--git-counts`` and
at the count pcheckout plans (read from ``checkout -n --json`` once per table), and the
interpreter's own start (``python -c pass``, the same interpreter as pcheckout's).  Only the
command is timed (fork to reaping); the clone before and the removal after are not.

overhead = pcheckout - git at pcheckout's count - ``python -c pass`` (medians), the issue's
measure.  The own part is timed inside each pcheckout run (:data:`OWN`): from its first
line to its end, less git's writer; it does not move with git's own spread, which the
overhead column carries.  Every pcheckout run is checked: ``git status --porcelain`` empty.

``--python``: the interpreter pcheckout and ``python -c pass`` run in.  A plain venv's
(``python3 -m venv --without-pip V``; pcheckout is found through PYTHONPATH) times what a
pipx install pays: an interpreter whose site hooks import modules at start (``pathlib``,
``tempfile``, ...) hides their cost from the own part and the overhead alike.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import benchlib  # noqa: E402
import genrepo  # noqa: E402
from bench_writer import ENV, destination  # noqa: E402

PROJECT = HERE.parent
#: the interpreter pcheckout and ``python -c pass`` run in (``--python``)
PYTHON = sys.executable
#: The share of the files v2 changes (genrepo.py ``--change``): a switch's size.
DEFAULT_CHANGE = 0.2
#: what ``git lfs install`` writes into the global config (git-lfs 3.x)
LFS_INSTALLED = """[filter "lfs"]
\tclean = git-lfs clean -- %f
\tsmudge = git-lfs smudge -- %f
\tprocess = git-lfs filter-process
\trequired = true
"""


def _clone(src: Path, work: Path, switch: bool, env: dict[str, str]) -> str:
    subprocess.run(
        ["git", "clone", "-q", "--no-checkout", "--shared", str(src), str(work)],
        check=True,
        env=env,
    )
    if not switch:
        return "HEAD"
    subprocess.run(["git", "-C", str(work), "checkout", "-q", "-f", "v1"], check=True, env=env)
    return "v2"


#: The CLI, timed in its own process from its first line (the interpreter's start is not
#: in it) to its end, less the time in git's writer (``gitwriter._run``: fork to reaping):
#: pcheckout's own part, without git's spread.  Said on stderr's last line.
OWN = """import gc, importlib.util, sys, time
START = importlib.util.find_spec("pcheckout.cli.start") is not None  # (not in older trees)
if START:
    gc.disable()  # (the entry point's first step, taken before gitwriter is imported here)
t0 = time.perf_counter()
from pcheckout.write import gitwriter
spent = [0.0]
real = gitwriter._run
def timed(*a, **k):
    t = time.perf_counter()
    try:
        return real(*a, **k)
    finally:
        spent[0] += time.perf_counter() - t
gitwriter._run = timed
if START:
    from pcheckout.cli.start import entrypoint  # (the command's own entry point)
else:
    from pcheckout.cli.main import entrypoint
try:
    entrypoint()
finally:
    sys.stdout.flush()
    sys.stderr.write("own %.6f %.6f\\n" % (time.perf_counter() - t0, spent[0]))
"""


def _pcheckout(src_dir: Path, work: Path, rev: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [PYTHON, "-c", OWN, "checkout", "-q", "-C", str(work), *extra, rev]


def _own(stderr_tail: str) -> float:
    """pcheckout's own part (s) from :data:`OWN`'s line."""
    line = stderr_tail.strip().splitlines()[-1].split()
    if line[0] != "own" or float(line[2]) <= 0:
        raise SystemExit(f"no timing line, or git's writer did not run: {stderr_tail!r}")
    return float(line[1]) - float(line[2])


def _git(n: int, work: Path, rev: str) -> list[str]:
    verb = ["checkout", "-q", "-f", rev] if rev == "HEAD" else ["checkout", "-q", rev]
    return ["git", "-C", str(work), "-c", f"checkout.workers={n}", *verb]


def _env(env: dict[str, str], src_dir: Path) -> dict[str, str]:
    return {**env, "PYTHONPATH": str(src_dir)}


def planned_count(src: Path, root: Path, switch: bool, env: dict[str, str]) -> int:
    work = root / "plan"
    rev = _clone(src, work, switch, env)
    cmd = [*_pcheckout(PROJECT / "src", work, rev)[:-1], "-n", "--json", rev]
    cmd.remove("-q")
    out = subprocess.run(cmd, env=_env(env, PROJECT / "src"), capture_output=True, check=True)
    shutil.rmtree(work)
    return int(json.loads(out.stdout)["workers"])


def one(
    row: str, src: Path, root: Path, k: int, switch: bool, env: dict[str, str], srcs
) -> tuple[float, float | None]:
    """(seconds, pcheckout's own part in seconds or None) of one run of ``row``."""
    if row == "python -c pass":
        return benchlib.run_timed([PYTHON, "-c", "pass"], env).seconds, None
    work = root / f"w{k}"
    rev = _clone(src, work, switch, env)
    if row.startswith("git "):
        timed = benchlib.run_timed(_git(int(row.split()[1]), work, rev), env)
    else:
        s = srcs[row]
        timed = benchlib.run_timed(_pcheckout(s, work, rev), _env(env, s))
    st = subprocess.run(
        ["git", "-C", str(work), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        env=env,
    )
    if timed.returncode != 0 or st.stdout:
        raise SystemExit(f"{row}: failed ({timed.returncode}): {timed.stderr_tail}{st.stdout!r}")
    shutil.rmtree(work, ignore_errors=True)
    return timed.seconds, None if row.startswith("git ") else _own(timed.stderr_tail)


def table(args, dest: str, root: Path, src: Path, files: int, switch: bool, env) -> str:
    n = planned_count(src, root, switch, env)
    counts = sorted({*(int(c) for c in args.git_counts.split(",")), n})
    srcs = {"pcheckout": PROJECT / "src"}
    if args.baseline:
        srcs["baseline"] = Path(args.baseline).resolve()
    rows = [*srcs, *(f"git {c}" for c in counts), "python -c pass"]
    cells: dict[str, list[float]] = {r: [] for r in rows}
    own: dict[str, list[float]] = {r: [] for r in srcs}
    k = 0
    for r in range(args.runs):
        for row in rows[r % len(rows) :] + rows[: r % len(rows)]:
            seconds, part = one(row, src, root, k, switch, env, srcs)
            cells[row].append(seconds)
            if part is not None:
                own[row].append(part)
            k += 1
    med = {r: statistics.median(v) for r, v in cells.items()}
    best = min((r for r in rows if r.startswith("git ")), key=lambda r: med[r])
    kind = "switch" if switch else "fresh"
    out = [f"*{kind}, {dest}, {files} files: pcheckout plans {n} workers; git's best: {best}*", ""]
    out += [
        "| row | median s | min s | max s | overhead ms | own part ms, median (min-max) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        v = cells[r]
        over = part = ""
        if r in srcs:
            over = f"{(med[r] - med[f'git {n}'] - med['python -c pass']) * 1000:.0f}"
            o = [x * 1000 for x in own[r]]
            part = f"{statistics.median(o):.1f} ({min(o):.1f}-{max(o):.1f})"
        out.append(f"| {r} | {med[r]:.3f} | {min(v):.3f} | {max(v):.3f} | {over} | {part} |")
    gap = med[f"git {n}"] / med[best] - 1
    out += ["", f"git at pcheckout's count {n} is {gap * 100:+.1f} % of git's best ({best})", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dest", default="tmpfs,ext4j")
    p.add_argument("--files", default="5000,40000")
    p.add_argument("--kinds", default="fresh,switch")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--git-counts", default="1,2,3,4,6,8")
    p.add_argument("--baseline", help="another pcheckout's src/ to run beside this one")
    p.add_argument("--repo-dir", default=str(PROJECT / "bench-out" / "repos"))
    p.add_argument("--scratch", default="/var/tmp/pcheckout-benchf")
    p.add_argument("--attributes", default="none", choices=("none", "gitlike"))
    p.add_argument(
        "--change",
        type=float,
        default=DEFAULT_CHANGE,
        help="the share of the files v2 changes (the switch's size; default %(default)s)",
    )
    p.add_argument(
        "--lfs-installed",
        action="store_true",
        help="git-lfs's filter in the global config, as `git lfs install` puts it there "
        "(CI images install git-lfs so): a repository without LFS files too",
    )
    p.add_argument("--python", default=sys.executable, help="pcheckout's interpreter")
    args = p.parse_args(argv)
    global PYTHON
    PYTHON = args.python
    env = {**os.environ, **ENV}
    cache = Path(tempfile.mkdtemp(prefix="pcheckout-benchf-cache-"))
    env["XDG_CACHE_HOME"] = str(cache)
    if args.lfs_installed:
        (cache / "gitconfig").write_text(LFS_INSTALLED)
        env["GIT_CONFIG_GLOBAL"] = str(cache / "gitconfig")
    for k in ("PCHECKOUT_WORKERS", "PCHECKOUT_WRITER", "PYTHONPATH"):
        env.pop(k, None)
    for s in [PROJECT / "src", *([Path(args.baseline)] if args.baseline else [])]:
        subprocess.run([PYTHON, "-m", "compileall", "-q", str(s)], check=True)
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    try:
        for dest in args.dest.split(","):
            with destination(dest, scratch) as root:
                for files in (int(f) for f in args.files.split(",")):
                    named = "" if args.attributes == "none" else f"-a{args.attributes}"
                    named += "" if args.change == DEFAULT_CHANGE else f"-c{args.change}"
                    src = Path(args.repo_dir) / f"source-{files}{named}"
                    if not src.exists():
                        spec = genrepo.RepoSpec(
                            shape="source",
                            files=files,
                            seed=1,
                            change=args.change,
                            attributes=args.attributes,
                        )
                        genrepo.generate(spec, src)
                    for kind in args.kinds.split(","):
                        print(
                            table(args, dest, root, src, files, kind == "switch", env), flush=True
                        )
                        print(f"load average: {os.getloadavg()[0]:.1f}\n", flush=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
