"""The command's entry point (``pcheckout``, ``git pcheckout``, ``python -m pcheckout``).

The process is one run of the command, so it runs without the cyclic garbage collector:
none of what the imports create is garbage yet (their collections were 2.9 ms of a start
that imports the CLI and a checkout's modules: 44.1 against 41.3 ms, plain venv, 11 runs),
and a run's tables live as long as it does (``context.collector_paused``, which a library
caller of ``checkout()`` or ``export()`` gets too).  Reference counting still frees what a
run lets go.
"""

from __future__ import annotations

import gc


def entrypoint() -> None:
    gc.disable()
    from pcheckout.cli.main import entrypoint as run

    run()
