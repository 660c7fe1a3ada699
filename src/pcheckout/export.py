"""Write a tree alone into a directory: ``export(options, reporter)``.

No .git, no index, no HEAD: like ``git archive REV | tar -x``.  The decision
(``decide/export.py``: export-ignore, export-subst, each path's conversion, the writers;
``--dry-run`` reports it), then the apply step (``apply/``) writes it.
"""

from __future__ import annotations

import os
import shlex

from pcheckout.apply.run import apply
from pcheckout.context import NullReporter, Reporter, collector_paused
from pcheckout.decide.export import decide
from pcheckout.errors import finished_by
from pcheckout.options import ExportOptions, Result

__all__ = ["ExportOptions", "export"]


def again(opts: ExportOptions) -> str:
    """What finishes an interrupted export: the same export, by absolute paths (the marker
    it left in the destination tells the re-run what to finish)."""
    repo, dest = os.path.abspath(opts.repository), os.path.abspath(opts.destination)
    return "to finish, run: " + shlex.join(["pcheckout", "export", "-C", repo, opts.rev, dest])


def export(opts: ExportOptions, ui: Reporter | None = None) -> Result:
    with collector_paused():  # (as a checkout: its tables live as long as it does)
        return _export(opts, ui or NullReporter())


def _export(opts: ExportOptions, ui: Reporter) -> Result:
    ctx, plan = decide(opts, ui)
    attrs = plan.export.attributes if plan.export is not None else None
    with finished_by(again(opts)):  # the clean-up included, as for a checkout
        try:
            return apply(ctx, plan)
        finally:
            if attrs is not None:
                attrs.close()
