"""Check a commit out into a working tree: ``checkout(options, reporter)``.

It never reads ``sys.argv`` or prints.  Three steps:

1. open the run (``session.py``): the repository, its config and REV resolved side by
   side, ``index.lock`` taken before the work tree is looked at (``git/lock.py``), what
   the work tree holds;
2. decide (``decide/checkout.py``): a fresh checkout, the resume of an interrupted one,
   or a switch of a populated work tree; what is written, deleted and kept, how each
   path converts, the blobs to fetch, the writers, where HEAD goes (``decide/plan.py``);
   ``--dry-run`` reports this plan;
3. apply (``apply/``): the journal, the writer (pcheckout's engine or git's own
   checkout), the index, HEAD, the report.

``index.lock`` is held from step 1 until the index is renamed into place in step 3, for a
checkout, a resume and a switch alike: a second run fails at once with git's message.
"""

from __future__ import annotations

import contextlib
import shlex

from pcheckout.apply.run import apply
from pcheckout.apply.warm import Warm
from pcheckout.context import NullReporter, Reporter, collector_paused
from pcheckout.decide.checkout import decide
from pcheckout.errors import finished_by
from pcheckout.options import CheckoutOptions, ExportOptions, Result
from pcheckout.session import IN_PROGRESS, Ahead, Run, open_checkout

__all__ = ["IN_PROGRESS", "CheckoutOptions", "ExportOptions", "Result", "checkout"]


def checkout(opts: CheckoutOptions, ui: Reporter | None = None) -> Result:
    with collector_paused():  # (the run's tables live as long as it does)
        return _checkout(opts, ui or NullReporter())


def _checkout(opts: CheckoutOptions, ui: Reporter) -> Result:
    ahead = Ahead(opts)
    try:
        run = open_checkout(opts, ui, ahead)
    except BaseException:
        ahead.close()
        raise
    # From here an interruption names what finishes it, up to the last clean-up: a
    # SIGINT that lands while the cat-files are closed after the index was written
    # says the same as one that lands while files are written.
    with finished_by(again(run)), contextlib.ExitStack() as stack:
        stack.callback(ahead.close)
        if run.lock is not None:  # unless committed with the index: then nothing is left
            stack.callback(run.lock.rollback)
        warm = Warm(run.ctx, opts.dry_run)  # the writers' cat-files, started meanwhile
        stack.callback(warm.close)
        plan = decide(run, warm)
        # The listing beside round 1 is the plan's now, parsed or not: git's output it
        # holds (36 MiB at 250,000 entries) is not kept for the writers' whole run.
        run = run._replace(found=run.found._replace(listed=None))
        return apply(run.ctx, plan, run.lock, warm)


def again(run: Run) -> str:
    """What finishes ``run`` once it was interrupted: the same checkout, by absolute
    directory (the journal it left tells the re-run what to finish)."""
    words = ["pcheckout", "checkout"]
    if run.opts.force:
        words.append("--force")
    words += ["-C", str(run.root)]
    if run.opts.rev != "HEAD":
        words += ["--", run.opts.rev] if run.opts.rev.startswith("-") else [run.opts.rev]
    return "to finish, run: " + shlex.join(words)
