#!/usr/bin/env python3
"""Plot wall time against worker count from a bench.py JSON file.

Usage::

    python3 scripts/plot_bench.py bench-out/run.json docs/bench-workers.png

One panel per destination filesystem (fresh-checkout tables), one line per tool: pcheckout
``--workers N`` and git ``checkout.workers=N`` (git's default is N=1); pcheckout auto and
``git archive | tar -x`` are horizontal reference lines. Both axes are logarithmic. Needs
matplotlib (the optional ``bench`` extra: ``pip install -e .[bench]``).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

# Panel size in inches and output resolution: readable on a laptop screen and in a README.
PANEL_INCHES = (4.6, 3.6)
DPI = 120


def _series(table: dict[str, Any], tool: str) -> list[tuple[int, float]]:
    pts = []
    for r in table["rows"]:
        if r["tool"] != tool or r["median_s"] is None:
            continue
        if tool == "pcheckout" and r["workers"] is None:
            continue
        pts.append((r["workers"] or 1, r["median_s"]))
    return sorted(pts)


def _ref(table: dict[str, Any], tool: str) -> float | None:
    for r in table["rows"]:
        if r["tool"] == tool and r["workers"] is None:
            return r["median_s"]  # type: ignore[no-any-return]
    return None


def plot(run: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    tables = [t for t in run["tables"] if t["kind"] == "fresh"]
    if not tables:
        raise SystemExit("no fresh-checkout tables in the JSON file")
    cols = min(2, len(tables))
    rows = math.ceil(len(tables) / cols)
    fig, axes = plt.subplots(
        rows, cols, squeeze=False, figsize=(PANEL_INCHES[0] * cols, PANEL_INCHES[1] * rows)
    )
    for ax, t in zip(axes.flat, tables, strict=False):
        for tool, style in (("pcheckout", "o-"), ("git", "s--")):
            pts = _series(t, tool)
            if pts:
                label = "pcheckout --workers N" if tool == "pcheckout" else "git checkout.workers=N"
                ax.plot([w for w, _ in pts], [s for _, s in pts], style, label=label)
        for tool, label, color in (
            ("pcheckout", "pcheckout auto", "C0"),
            ("archive", "git archive | tar -x", "C2"),
        ):
            y = _ref(t, tool)
            if y:
                ax.axhline(y, color=color, linestyle=":", label=label)
        if not ax.get_lines():
            ax.text(
                0.5, 0.5, "no successful rows", ha="center", va="center", transform=ax.transAxes
            )
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_yscale("log")
        ax.set_xlabel("workers")
        ax.set_ylabel("wall time, s (median)")
        lat = f", {t['latency_ms']:g} ms/op" if t.get("latency_ms") else ""
        ax.set_title(f"{t['dest']} ({t['fs_type']}{lat}), {t['entries']} files", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(tables) :]:
        ax.set_visible(False)
    m = run.get("machine", {})
    fig.suptitle(
        f"checkout wall time vs workers - {m.get('nproc', '?')} CPUs, "
        f"{run.get('git_version', '')}, {run.get('date', '')[:10]}",
        fontsize=10,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    plot(json.loads(Path(args[0]).read_text()), Path(args[1]))
    print(f"wrote {args[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
