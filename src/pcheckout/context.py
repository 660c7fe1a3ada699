"""What every stage of a checkout needs, carried in one object.

``Context`` bundles the git runner, the repository, its configuration, the
reporter and the environment, so the stages (planning, writing, index output,
HEAD update) take one argument instead of six to nine.  ``concurrently`` runs
independent steps side by side: on a network mount each git process spends
tens of round trips finding the repository before it answers.
``collector_paused`` keeps the cyclic garbage collector out of a run.

This module sits just above ``git/``: the writers (``write/``) and the
orchestration (``checkout``, ``switch``, ``export``) import it.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar, cast

from pcheckout.git.runner import Git, Repo

if TYPE_CHECKING:  # catfile (and its imports) only where a writer runs
    from pcheckout.git.catfile import Spawn
    from pcheckout.options import Result

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")


class Reporter(Protocol):
    """Where progress goes (the CLI draws it; tests and library users may ignore it)."""

    def debug(self, message: str) -> None: ...
    def start(self, files: int, nbytes: int, workers: int) -> None: ...
    def update(self, files: int, nbytes: int) -> None: ...
    def finish(self) -> None: ...
    def fetch(self, objects: int, total: int, nbytes: int) -> None:
        """Blobs a partial clone fetched so far (of ``total``), ``nbytes`` of packs."""

    def moved(self, result: Result) -> None:
        """The run is written and HEAD has moved (``result.head``), before any hook runs
        (git says where HEAD went at that moment)."""

    def git_message(self, line: str) -> None:
        """A line git printed (``warning: ...``, ``error: ...``) or pcheckout says in git's
        words where git would: shown on stderr as it is, whatever the verbosity."""


class NullReporter:
    """A reporter that shows nothing."""

    def debug(self, message: str) -> None:
        pass

    def start(self, files: int, nbytes: int, workers: int) -> None:
        pass

    def update(self, files: int, nbytes: int) -> None:
        pass

    def finish(self) -> None:
        pass

    def fetch(self, objects: int, total: int, nbytes: int) -> None:
        pass

    def moved(self, result: Result) -> None:
        pass

    def git_message(self, line: str) -> None:
        pass


class Context(NamedTuple):
    """One run's shared state: read once, passed to every stage."""

    git: Git
    repo: Repo
    config: Mapping[str, str]  # read_config(): lower-cased keys, last value wins
    ui: Reporter
    environ: Mapping[str, str]
    spawn: Spawn | None = None  # test seam: a stand-in cat-file process


def concurrently(*calls: Callable[[], T]) -> list[T]:
    """Each call's result, the calls run on threads side by side; the first
    call's exception (in argument order) is raised after all have finished."""
    return cast("list[T]", _side_by_side(calls))


def both(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """``concurrently`` for two calls whose results differ in type."""
    a, b = _side_by_side((first, second))
    return cast(A, a), cast(B, b)


def _side_by_side(calls: Sequence[Callable[[], object]]) -> list[object]:
    if len(calls) == 1:
        return [calls[0]()]
    results: list[object] = [None] * len(calls)
    errors: list[BaseException | None] = [None] * len(calls)

    def run(k: int) -> None:
        try:
            results[k] = calls[k]()
        except BaseException as exc:  # handed to the caller below
            errors[k] = exc

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(1, len(calls))]
    for t in threads:
        t.start()
    run(0)
    for t in threads:
        t.join()
    for exc in errors:
        if exc is not None:
            raise exc
    return results


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (reference counting still frees what a run lets
    go).  A run allocates millions of objects that live as long as it does (the listing,
    the index, the plan), so each full collection walks all of them to free nothing: at
    250,000 entries an engine switch spent 0.5-0.7 s of its ~6 s there, in passes that
    land wherever an allocation crosses the threshold (4,188 lstats, 15 ms alone, took
    0.57 s).  Nested uses leave it as the outermost found it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
