"""What the commands show: the detect and tune tables, the dry-run report, the summary line.

The core returns typed results (:class:`~pcheckout.fs.detect.FsInfo`,
:class:`~pcheckout.plan.tunecache.TuneResult`); only this package turns them into text.  rich's
tables are imported where a table is drawn: ``rich.table`` costs ~5 ms (``python -X importtime``
on the dev VM, 2 vCPU; it pulls in ``fractions`` and ``decimal``), which ``detect --json``,
plain output to a pipe and a checkout's dry run without a terminal do not need.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pcheckout.fs.kinds import rotational_flag
from pcheckout.plan.tunecache import cache_path

if TYPE_CHECKING:
    from rich.console import Console

    from pcheckout.clone import CloneResult, SubmoduleResult
    from pcheckout.fs.detect import FsInfo
    from pcheckout.options import Result
    from pcheckout.plan.policy import Writer
    from pcheckout.plan.tunecache import TuneResult

#: Width of the longest bar in the ``tune`` chart, in cells.
_BAR_WIDTH = 40


def _fs_rows(info: FsInfo) -> list[tuple[str, str]]:
    kind = info.kind + (f" (upper layer: {info.upper_kind})" if info.upper_kind else "")
    devices = ", ".join(
        f"{d.name} (rotational={rotational_flag(d.rotational)}{', virtual' if d.virtual else ''})"
        for d in info.devices
    )
    opts = ",".join(k if v is None else f"{k}={v}" for k, v in info.options.items())
    rows = [
        ("path", info.path),
        ("examined", info.probed_path),
        ("mount point", info.mount_point),
        ("filesystem", info.fstype),
        ("source", info.source),
        ("kind", kind),
        ("latency-bound", {True: "yes", False: "no", None: "unknown"}[info.latency_bound]),
    ]
    if info.nfs_version:
        rows.append(("NFS version", info.nfs_version))
    if info.f_type is not None:
        rows.append(("statfs f_type", f"0x{info.f_type:x}"))
    if devices:
        rows.append(("devices", devices))
    rows.append(("options", opts))
    return rows


def fs_info(console: Console, info: FsInfo) -> None:
    """``pcheckout detect``: a rich table on a terminal, plain ``key: value`` lines otherwise."""
    if not console.is_terminal:
        for key, value in _fs_rows(info):
            console.print(f"{key}: {value}", markup=False, highlight=False, soft_wrap=True)
        for note in info.notes:
            console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
        return
    from rich.table import Table  # only on a terminal: see the module docstring
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in _fs_rows(info):
        table.add_row(key, Text(value))
    console.print(table)
    for note in info.notes:
        console.print(Text("• " + note, style="dim"))


def tune_result(console: Console, result: TuneResult) -> None:
    """``pcheckout tune``: a bar chart of files/s per worker count, the chosen count marked."""
    from rich.table import Table  # see the module docstring
    from rich.text import Text

    best_n, best = max(result.curve, key=lambda p: (p[1], -p[0]))
    table = Table(
        title=f"pcheckout tune: {result.mount_point} ({result.kind}), {result.measured_on}",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    table.add_column("workers", justify="right")
    table.add_column("files/s", justify="right")
    table.add_column("", no_wrap=True)
    table.add_column("", no_wrap=True)
    for n, rate in sorted(result.curve):
        chosen = n == result.workers
        cells = max(0, round(_BAR_WIDTH * rate / best)) if best > 0 else 0
        bar = Text("█" * cells, style="bold green" if chosen else "cyan")
        if cells == 0 and rate > 0:
            bar = Text("▏", style="cyan")
        mark = Text("◀ chosen", style="bold green") if chosen else Text("")
        table.add_row(Text(str(n), style="bold" if chosen else ""), f"{rate:,.0f}", bar, mark)
    console.print(table)
    console.print(
        f"chose [bold]{result.workers}[/bold] workers: the smallest count within "
        f"{result.threshold:.0%} of the best ({best:,.0f} files/s at {best_n}); "
        f"stored for this mount in {cache_path()}",
        highlight=False,
    )
    if result.writers is not None:
        writers_table(console, result)


def writers_table(console: Console, result: TuneResult) -> None:
    """``pcheckout tune``'s second table: each writer's probe checkout, the winner marked."""
    from rich.table import Table  # see the module docstring
    from rich.text import Text

    w = result.writers
    assert w is not None
    table = Table(
        title=f"writers: a fresh checkout of a {w.probe_files:,}-file probe tree, "
        f"median of {w.rounds}",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    table.add_column("writer")
    table.add_column("workers", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("", no_wrap=True)
    for writer, n, seconds in w.times:
        won = writer == w.winner and (writer != "git" or n == w.git_workers)
        name = "git's checkout" if writer == "git" else "pcheckout's engine"
        mark = Text("◀ chosen", style="bold green") if won else Text("")
        table.add_row(Text(name, style="bold" if won else ""), str(n), f"{seconds:.3f}", mark)
    console.print(table)
    other: Writer = "pcheckout" if w.winner == "git" else "git"
    names = {"git": "git's writer", "pcheckout": "pcheckout's engine"}
    count = w.git_workers if w.winner == "git" else w.engine_workers
    console.print(
        f"chose [bold]{names[w.winner]}[/bold] at {count} for this mount: "
        f"{w.best(w.winner):.3f} s against {w.best(other):.3f} s for {names[other]}",
        highlight=False,
    )


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def summary(r: Result) -> str:
    """The one line printed after a checkout, switch or export."""
    plan = r.plan
    if r.dry_run:
        return ""
    verb = {"switch": "switched", "resume": "resumed"}.get(r.mode, "wrote")
    files = r.written if r.mode in ("switch", "resume") else r.files
    # -1: not known (git's writer left an index this could not read); never shown as -1
    size = f" ({human_bytes(r.bytes)})" if r.bytes >= 0 else " (bytes not counted)"
    by = " by git's checkout" if plan.writer == "git" else ""
    parts = [
        f"{verb} {files:,} files{size} in {r.seconds:.2f} s{by} "
        f"with {plan.workers} worker{'s' if plan.workers != 1 else ''}"
        f"{' (processes)' if r.processes else ''} ({plan.source})"
    ]
    if r.fetch_blobs and r.fetches:
        parts.append(
            f"fetched {r.fetch_blobs:,} blobs ({human_bytes(r.fetched_bytes)}) "
            f"in {r.fetches} fetch{'es' if r.fetches != 1 else ''}"
        )
    elif r.fetch_blobs:  # git's writer prefetches them itself, in one batch
        parts.append(f"{r.fetch_blobs:,} missing blobs fetched by git")
    if r.skip_worktree:
        parts.append(f"{r.skip_worktree:,} outside the sparse checkout")
    if r.kept:
        parts.append(f"kept {r.kept:,}")
    if r.deleted:
        parts.append(f"deleted {r.deleted:,}")
    if r.adapt_summary:
        parts.append(r.adapt_summary)
    if r.head:
        parts.append(f"HEAD: {r.head}")
    return "; ".join(parts)


def plan(console: Console, r: Result) -> None:
    """The dry run's report: the filesystem, the work and the plan, and why."""
    # The checkout that produced ``r`` imported the writers already; `detect` must not.
    from pcheckout.write.forked import MIN_ENTRIES as forked_min_entries

    fs_info(console, r.filesystem)
    plan = r.plan
    what = {"checkout": "write", "export": "write", "resume": "resume", "switch": "update"}
    console.print(
        f"would {what.get(r.mode, 'write')} {r.files:,} entries ({human_bytes(r.bytes)})"
        + (f", delete {r.deleted:,}" if r.deleted else "")
        + (f"; {r.skip_worktree:,} outside the sparse checkout" if r.skip_worktree else "")
    )
    if r.fetch_blobs:
        how = "in one batch (git's writer)" if plan.writer == "git" else "in batches while writing"
        console.print(f"would fetch {r.fetch_blobs:,} missing blobs from the promisor remote {how}")
    console.print(f"writer: {plan.writer} ({plan.writer_source}) — {plan.writer_reason}")
    count = "checkout.workers for git" if plan.writer == "git" else "workers"
    console.print(f"{count}: {plan.workers} ({plan.source}) — {plan.reason}")
    if plan.adapt:
        console.print("will adapt the worker count to measured throughput (--no-adapt to keep it)")
    if plan.processes:
        console.print(
            "workers are processes (CPU-bound writing: one interpreter lock each), "
            f"from {forked_min_entries:,} entries up on Linux"
        )
    if r.conversion:
        console.print("attributes from: " + "; ".join(r.conversion))
        console.print(conversion_line(r))
    if r.conversion_unknown:
        console.print(
            f"conversion unknown for {r.conversion_unknown:,} paths: their .gitattributes "
            "are among the missing blobs (a dry run fetches nothing)"
        )
    if r.export_ignored or r.export_subst:
        console.print(
            f"export-ignore leaves out {r.export_ignored:,} entries; "
            f"export-subst expands {r.export_subst:,} files"
        )


def conversion_line(r: Result) -> str:
    """How many paths are converted and why, e.g. "converted: 43 paths (crlf 40, ident 3)"."""
    if not r.converted:
        return "converted: none (every blob is written as stored)"
    why = ", ".join(f"{k} {v:,}" for k, v in r.conversion_reasons.items())
    by_git = f"; {r.converted_by_git:,} by git's filters" if r.converted_by_git else ""
    return f"converted: {r.converted:,} paths ({why}){by_git}"


def clone_summary(r: CloneResult) -> str:
    """One line after ``pcheckout clone``: the clone phase, then the checkout's summary."""
    parts = [f"cloned into '{r.directory}' in {r.clone_seconds:.2f} s"]
    skipped = {
        "no-checkout": "no checkout (--no-checkout)",
        "bare": "bare: no checkout",
        "mirror": "mirror: no checkout",
        "empty": "empty repository: no checkout",
    }
    if r.checkout is not None:
        parts.append(summary(r.checkout))
    elif r.skipped is not None:
        parts.append(skipped.get(r.skipped, r.skipped))
    if r.submodules:
        parts.append(f"{_count_submodules(r.submodules)} submodules")
    return "; ".join(parts)


def _count_submodules(subs: Sequence[SubmoduleResult]) -> int:
    return sum(1 + _count_submodules(s.submodules) for s in subs)
