"""What ``pcheckout detect`` and ``pcheckout tune`` show: rich tables on a terminal.

The core returns typed results (:class:`~pcheckout.fs.detect.FsInfo`,
:class:`~pcheckout.plan.tunecache.TuneResult`); only this package turns them into text.  rich's
tables are imported where a table is drawn: ``rich.table`` costs ~5 ms (``python -X importtime``
on the dev VM, 2 vCPU; it pulls in ``fractions`` and ``decimal``), which ``detect --json``,
plain output to a pipe and a checkout's dry run without a terminal do not need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcheckout.fs.kinds import rotational_flag
from pcheckout.plan.tunecache import cache_path

if TYPE_CHECKING:
    from rich.console import Console

    from pcheckout.fs.detect import FsInfo
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
