"""The progress bar: written/total bytes, a labelled ETA, and a line that fits any width
(drawn through rich as the terminal sees it, captured at each width)."""

from __future__ import annotations

import io
import time

import pytest
from rich.console import Console

from pcheckout.cli.console import BAR_MIN, Line, _bars, progress_line


def _drawn(width: int, line: Line) -> list[str]:
    """The bar as rich draws it on a ``width``-column terminal, one task ``line``."""
    console = Console(file=io.StringIO(), width=width, force_terminal=True, record=True)
    bars = _bars(console)
    fields = {"unit": line.unit, "nbytes": line.nbytes, "total_bytes": line.total_bytes}
    task = bars.add_task(line.label, total=line.total, t0=time.monotonic() - line.elapsed, **fields)
    bars.update(task, completed=line.done)
    console.print(bars.get_renderable())
    return console.export_text().splitlines()


MID = Line("writing", 1234, 5000, "files", 12_900_000, 47_800_000, 3.0)


@pytest.mark.parametrize("width", [60, 70, 80, 200])
def test_the_line_fits_and_keeps_count_bytes_and_eta(width: int) -> None:
    (line,) = _drawn(width, MID)
    assert len(line) <= width
    assert "1,234/5,000 files" in line
    assert "12.3 MiB/45.6 MiB" in line
    assert "ETA 0:00:09" in line  # 3,766 files left at 411 files/s
    assert "━" * BAR_MIN in line


def test_wide_lines_show_the_label_and_the_rate() -> None:
    (line,) = _drawn(200, MID)
    assert line.startswith("writing ━")
    assert "411 files/s, 4.1 MiB/s" in line
    (narrow,) = _drawn(60, MID)
    assert "files/s" not in narrow and not narrow.startswith("writing")


@pytest.mark.parametrize("width", [10, 20, 30, 45])
def test_narrow_terminals_drop_fields_before_the_count(width: int) -> None:
    text = progress_line(MID, width).plain
    assert len(text) <= width
    if width >= len("1,234/5,000 files"):
        assert "1,234/5,000 files" in text


def test_git_writer_has_no_bytes_and_an_unknown_eta_is_labelled() -> None:
    (line,) = _drawn(80, Line("writing", 0, 40_000, "files", 0, 0, 0.0))
    assert "0/40,000 files" in line and "ETA -:--:--" in line and "MiB" not in line
    (fetch,) = _drawn(80, Line("fetching", 10, 200, "blobs", 2_000_000, 0, 1.0))
    assert "10/200 blobs" in fetch and "1.9 MiB" in fetch
