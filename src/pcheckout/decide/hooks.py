"""The hooks a checkout's plan runs once it is carried out: git's ``post-checkout``
(``git/hooks.py``), unless the run asks for none (``--no-hooks``)."""

from __future__ import annotations

from pcheckout.git import hooks
from pcheckout.session import Run

__all__ = ["after_checkout"]


def after_checkout(run: Run) -> tuple[hooks.Hook, ...]:
    """``post-checkout`` from the HEAD the run found (the null id for git clone's
    checkout, or an unborn HEAD) to the commit it checks out.  It is looked for again
    when it runs (it may appear meanwhile: git-lfs's filter installs its hooks as it
    writes)."""
    if not run.opts.hooks:
        return ()
    ctx, target, clone = run.ctx, run.target, run.opts.clone
    old = None if clone else target.head_commit
    return (hooks.post_checkout(ctx.repo, ctx.config, old, target.commit, clone=clone),)
