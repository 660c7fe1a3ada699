"""What is drawn on the terminal while a command runs: the progress bar, notes and ``--debug``
lines (whole lines, from any thread), and consoles that do not wrap text sent to a pipe.

rich is imported only when something is drawn: its import costs more than a small
checkout's writing (docs/design.md, start-up).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console
    from rich.progress import Progress, TaskID
    from rich.text import Text

    from pcheckout.options import Result

#: The bar's width in cells, at most and at least (below the least, other fields go first).
BAR_MAX = 40
BAR_MIN = 10


def console(*, stderr: bool = False) -> Console:
    """A rich console; on a pipe or a file it never wraps nor pads lines (rich would wrap
    at 80 columns there), so what a script reads is one line per line."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, soft_wrap=not stream.isatty())


class Line(NamedTuple):
    """One progress line's facts."""

    label: str  # "writing", "fetching"
    done: int
    total: int
    unit: str  # "files", "blobs"
    nbytes: int  # bytes so far (0: not known, e.g. git's writer)
    total_bytes: int  # bytes in all (0: not known)
    elapsed: float  # seconds since the start


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _fields(line: Line) -> dict[str, str]:
    """The optional fields, by name: size, rate, eta."""
    from pcheckout.cli.render import human_bytes

    out: dict[str, str] = {}
    if line.total_bytes > 0:
        out["size"] = f"{human_bytes(line.nbytes)}/{human_bytes(line.total_bytes)}"
    elif line.nbytes > 0:
        out["size"] = human_bytes(line.nbytes)
    dt = max(line.elapsed, 1e-6)
    rate = f"{line.done / dt:,.0f} {line.unit}/s"
    if line.nbytes > 0:
        rate += f", {human_bytes(line.nbytes / dt)}/s"
    out["rate"] = rate
    if line.done > 0 and line.elapsed >= 0.2 and line.total >= line.done:
        out["eta"] = "ETA " + _clock((line.total - line.done) * line.elapsed / line.done)
    else:
        out["eta"] = "ETA -:--:--"
    return out


#: Which fields go first when the width is short: the rate, the label, the bytes, the ETA;
#: the count (done/total) always stays.
_DROP_ORDER = ("rate", "label", "size", "eta")


def progress_line(line: Line, width: int) -> Text:
    """``writing ━━━━━━━━━━━━━━━━ 1,234/5,000 files  12.3 MiB/45.6 MiB  2,345 files/s  ETA
    0:00:03``, fitted to ``width`` cells: fields are dropped (the rate first) before the bar
    is narrower than :data:`BAR_MIN`, and the count is never cut while it fits at all."""
    from rich.text import Text

    count = f"{line.done:,}/{line.total:,} {line.unit}"
    fields = {"label": line.label, **_fields(line)}
    for drop in range(len(_DROP_ORDER) + 1):
        keep = {k: v for k, v in fields.items() if k not in _DROP_ORDER[:drop]}
        tail = "  ".join(keep[k] for k in ("size", "rate", "eta") if k in keep)
        head = keep.get("label", "")
        fixed = len(head) + bool(head) + len(count) + (len(tail) + 2 if tail else 0)
        if width - fixed - 1 >= BAR_MIN or drop == len(_DROP_ORDER):
            break
    bar_cells = max(0, min(BAR_MAX, width - fixed - 1))
    filled = round(bar_cells * line.done / line.total) if line.total > 0 else 0
    text = Text(no_wrap=True, overflow="crop")
    if head:
        text.append(head + " ", style="bold")
    if bar_cells:
        text.append("━" * filled, style="magenta")
        text.append("━" * (bar_cells - filled), style="grey23")
        text.append(" ")
    text.append(count, style="green")
    if tail:
        text.append("  " + tail)
    text.truncate(width)
    return text


def _bars(out: Console) -> Progress:
    """A rich Progress whose every line is :func:`progress_line` at the console's width
    (read at each refresh: a resized terminal gets a line that fits)."""
    from rich.progress import Progress

    class Bars(Progress):
        def get_renderables(self) -> Any:
            for task in self.tasks:  # none yet while Progress itself is made
                width = self.console.width
                f = task.fields
                elapsed = time.monotonic() - f["t0"]
                done, total = int(task.completed), int(task.total or 0)
                sizes = f["nbytes"], f["total_bytes"]
                yield progress_line(
                    Line(task.description, done, total, f["unit"], *sizes, elapsed), width
                )

    return Bars(console=out, transient=True, refresh_per_second=10)


class ConsoleReporter:
    """Progress bars on a terminal (stderr), nothing otherwise; notes and ``--debug`` lines
    written whole (one write, under a lock: threads never interleave them), above the bar
    while one is drawn."""

    def __init__(self, *, quiet: bool, debug: bool, notes: bool | None = None) -> None:
        self.quiet = quiet
        self.notes = not quiet if notes is None else notes
        self.debug_on = debug
        self.progress: Progress | None = None
        self._task: TaskID | None = None
        self._fetch_task: TaskID | None = None
        self._last = 0.0
        self._lock = threading.Lock()
        #: says where HEAD went (git's lines), once the run has moved it; None: nothing
        self.on_moved: Callable[[Result], None] | None = None

    def _line(self, text: str) -> None:
        with self._lock:
            if self.progress is not None:
                self.progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
            else:
                sys.stderr.write(text + "\n")
                sys.stderr.flush()

    def debug(self, message: str) -> None:
        if self.debug_on:
            self._line(f"[debug] {message}")

    def note(self, message: str) -> None:
        if self.notes:
            self._line(message)

    def git_message(self, line: str) -> None:
        self._line(line)  # git prints its warnings and errors under -q too

    def _bars(self) -> Progress:
        if self.progress is None:
            from rich.console import Console

            self.progress = _bars(Console(stderr=True))
            self.progress.start()
        return self.progress

    def _add(self, label: str, total: int, unit: str, total_bytes: int) -> TaskID:
        bars = self._bars()
        return bars.add_task(
            label, total=total, unit=unit, nbytes=0, total_bytes=total_bytes, t0=time.monotonic()
        )

    def _shown(self, total: int) -> bool:
        return not self.quiet and sys.stderr.isatty() and total > 0

    def start(self, files: int, nbytes: int, workers: int) -> None:
        if not self._shown(files):
            return
        with self._lock:
            self._task = self._add("writing", files, "files", max(nbytes, 0))

    def moved(self, result: Result) -> None:
        if self.on_moved is not None:
            self.on_moved(result)

    def fetch(self, objects: int, total: int, nbytes: int) -> None:
        """A partial clone's blobs arriving (objects of total, bytes of packs)."""
        if not self._shown(total):
            return
        with self._lock:
            bars = self._bars()
            if self._fetch_task is None:
                self._fetch_task = self._add("fetching", total, "blobs", 0)
            bars.update(self._fetch_task, completed=objects, nbytes=nbytes)

    def update(self, files: int, nbytes: int) -> None:
        if self.progress is None or self._task is None:
            return
        now = time.monotonic()
        if now - self._last < 0.1:  # ~10 Hz is plenty for a human
            return
        self._last = now
        self.progress.update(self._task, completed=files, nbytes=nbytes)

    def finish(self) -> None:
        with self._lock:
            if self.progress is not None:
                self.progress.stop()
                self.progress = None
                self._task = self._fetch_task = None
