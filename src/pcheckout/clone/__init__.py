"""``pcheckout clone``: ``git clone --no-checkout``, then the parallel checkout.

``clone(opts, ui)`` does what ``git clone`` with the same options does, in two
phases in one process:

1. ``git clone <the user's options> --no-checkout -- URL DIR``: git fetches,
   writes refs, config, ``.git/shallow``, the sparse-checkout file, the
   reflog ("clone: from URL") and HEAD exactly as it would have (its own
   progress on stderr).  Every git clone option reaches git unchanged;
   ``parse_args`` only reads them to know where the clone goes and whether
   ``git clone`` would have checked anything out.
2. ``checkout.checkout()`` of HEAD: the files and the index, in parallel.
   HEAD is already where git clone leaves it, so nothing is added to the
   reflog (git clone's own checkout adds nothing either).
3. With ``--recurse-submodules``: what ``git submodule update --init
   --recursive`` (which git clone runs) does, each submodule cloned and
   checked out on its own thread (see ``submodules``).

No checkout phase for ``--no-checkout``, ``--bare``, ``--mirror`` or an empty
repository, as in git clone.

The modules: ``args`` (git clone's command line), ``dirname`` (the directory
git clone creates), ``run`` (the two phases), ``submodules``, ``stage`` (the
git dir written on local scratch space and copied to a latency-bound
destination) and ``reporter``.
"""

from typing import TYPE_CHECKING

from pcheckout.clone.args import CloneArgs, parse_args
from pcheckout.clone.dirname import destination, guess_dir_name
from pcheckout.clone.reporter import CloneReporter
from pcheckout.clone.run import (
    CloneOptions,
    CloneResult,
    clone,
    run_git_clone,
)

if TYPE_CHECKING:
    from pcheckout.clone.submodules import SubmoduleResult, SubmoduleRun, update_submodules

__all__ = [
    "CloneArgs",
    "CloneOptions",
    "CloneReporter",
    "CloneResult",
    "SubmoduleResult",
    "SubmoduleRun",
    "clone",
    "destination",
    "guess_dir_name",
    "parse_args",
    "run_git_clone",
    "update_submodules",
]

#: Imported on first use (and by run.py where it clones submodules): a clone without
#: --recurse-submodules runs none of their code.
_SUBMODULES = frozenset({"SubmoduleResult", "SubmoduleRun", "update_submodules"})


def __getattr__(name: str) -> object:
    if name in _SUBMODULES:
        from pcheckout.clone import submodules  # only a clone of submodules needs it

        return getattr(submodules, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
