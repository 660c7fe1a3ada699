"""The hooks a checkout's plan runs once it is carried out (``git/hooks.py``): git's
``post-index-change`` once the index is in place, then ``post-checkout`` once HEAD has
moved, unless the run asks for none (``--no-hooks``)."""

from __future__ import annotations

from pcheckout.git import hooks
from pcheckout.session import Run

__all__ = ["after_checkout"]


def after_checkout(run: Run) -> tuple[hooks.Hook, ...]:
    """The hooks git's checkout runs: ``post-index-change``, then ``post-checkout`` from
    the HEAD the run found (the null id for git clone's checkout, or an unborn HEAD) to
    the commit it checks out.  Each is looked for again when it runs (it may appear
    meanwhile: git-lfs's filter installs its hooks as it writes)."""
    if not run.opts.hooks:
        return ()
    ctx, target, clone = run.ctx, run.target, run.opts.clone
    old = None if clone else target.head_commit
    return (
        hooks.post_index_change(ctx.repo, ctx.config, clone=clone),
        hooks.post_checkout(ctx.repo, ctx.config, old, target.commit, clone=clone),
    )
