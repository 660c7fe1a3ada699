"""What a clone reports: the checkout's reporter, plus a line between phases."""

from __future__ import annotations

from typing import Protocol

from pcheckout.context import NullReporter, Reporter


class CloneReporter(Reporter, Protocol):
    """The checkout's reporter, plus a line for a human between phases."""

    def note(self, message: str) -> None: ...


class QuietReporter(NullReporter):
    """A reporter for checkouts running side by side: one progress bar cannot
    show them all, so they report only debug lines (and the clone a line each)."""

    def __init__(self, ui: CloneReporter) -> None:
        self._ui = ui

    def debug(self, message: str) -> None:
        self._ui.debug(message)

    def git_message(self, line: str) -> None:
        self._ui.git_message(line)
