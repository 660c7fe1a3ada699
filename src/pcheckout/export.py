"""Write a tree alone into a directory: ``export(options, reporter)``.

No .git, no index, no HEAD: like ``git archive REV | tar -x``.  The decision
(``decide/export.py``: export-ignore, export-subst, each path's conversion, the writers;
``--dry-run`` reports it), then the apply step (``apply/``) writes it.
"""

from __future__ import annotations

from pcheckout.apply.run import apply
from pcheckout.context import NullReporter, Reporter
from pcheckout.decide.export import decide
from pcheckout.options import ExportOptions, Result

__all__ = ["ExportOptions", "export"]


def export(opts: ExportOptions, ui: Reporter | None = None) -> Result:
    ctx, plan = decide(opts, ui or NullReporter())
    attrs = plan.export.attributes if plan.export is not None else None
    try:
        return apply(ctx, plan)
    finally:
        if attrs is not None:
            attrs.close()
