"""The writers' plain cat-files started ahead (git/catfile.py ``Prestarted``): taken by
the writers, killed if never taken or if the run fails before it writes."""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, make_repo
from partialhelp import blobless_clone, serve

from pcheckout import checkout as checkout_mod
from pcheckout.decide import checkout as decide_mod
from pcheckout.errors import PcheckoutError
from pcheckout.git.catfile import CatFile, Prestarted
from pcheckout.git.runner import MIN_GIT, Git
from pcheckout.options import CheckoutOptions

FILES = {b"d%02d/f%04d" % (i % 8, i): b"%d\n" % i for i in range(400)}


class Recorder:
    """A spawn seam running the real git, remembering each process and the thread that
    started it."""

    def __init__(self) -> None:
        self.started: list[tuple[str, list[str], subprocess.Popen[bytes]]] = []

    def __call__(self, argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        proc: subprocess.Popen[bytes] = subprocess.Popen(argv, **kw)
        self.started.append((threading.current_thread().name, argv, proc))
        return proc

    def plain(self) -> list[tuple[str, subprocess.Popen[bytes]]]:
        return [(t, p) for t, argv, p in self.started if argv[-1] == "--batch"]

    def wait_for(self, n: int) -> None:
        """Until ``n`` plain cat-files are started (10 s at most), and a moment more for
        the last to be handed to its pool."""
        deadline = time.monotonic() + 10
        while len(self.plain()) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)


def _engine_opts(ours: Path, rec: Recorder) -> CheckoutOptions:
    """Four writer threads, pcheckout's engine, no adapting: every writer takes work."""
    return CheckoutOptions(ours, workers=4, writer="pcheckout", adapt=False, processes=False,
                           spawn=rec)  # fmt: skip


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return make_repo(tmp_path, FILES)


def test_the_writers_take_the_catfiles_started_ahead(src: Path, tmp_path: Path) -> None:
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_with_git(src, tmp_path / "theirs")
    rec = Recorder()
    checkout_mod.checkout(_engine_opts(ours, rec))
    plain = rec.plain()
    # one per writer in all, started ahead unless a writer came first; none left
    assert len(plain) == 4
    assert "pcheckout-prestart" in [t for t, _ in plain]
    assert all(p.poll() is not None for _, p in plain)
    assert_same_as_git(ours, theirs)


def test_catfiles_started_ahead_die_with_a_run_that_fails_before_writing(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = clone_no_checkout(src, tmp_path / "ours")
    rec = Recorder()

    def fails(*args: object, **kw: object) -> object:
        raise PcheckoutError("conversion planning failed")

    monkeypatch.setattr(decide_mod, "plan_conversion", fails)
    with pytest.raises(PcheckoutError, match="conversion planning failed"):
        checkout_mod.checkout(_engine_opts(ours, rec))
    assert rec.plain(), "nothing was started ahead"
    assert all(p.poll() is not None for _, p in rec.plain())
    assert not (ours / ".git" / "index.lock").exists()


def test_close_kills_what_was_never_taken(src: Path) -> None:
    rec = Recorder()
    g = Git(src, version=(*MIN_GIT, 0))
    pool = Prestarted(g, 3, spawn=rec)
    rec.wait_for(3)
    taken = pool.take(g)
    assert taken is not None
    pool.close()
    assert pool.take(g) is None
    alive = [p for _, p in rec.plain() if p.poll() is None]
    assert alive == [taken.proc]  # the one taken is its taker's to close; the rest are gone
    taken.kill()


def test_close_while_starting_leaves_nothing_running(src: Path) -> None:
    rec = Recorder()
    pool = Prestarted(Git(src, version=(*MIN_GIT, 0)), 50, spawn=rec)
    pool.close()
    assert len(rec.plain()) < 50
    assert all(p.poll() is not None for _, p in rec.plain())


def test_a_writer_waits_for_the_one_being_started(src: Path) -> None:
    # (rather than start one more: there are never more than the count in all)
    rec = Recorder()
    slow = threading.Event()

    def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        slow.wait(10)  # the pool is slow to start its first
        return rec(argv, **kw)

    g = Git(src, version=(*MIN_GIT, 0))
    pool = Prestarted(g, 1, spawn=spawn)
    got: list[CatFile | None] = []
    taker = threading.Thread(target=lambda: got.append(pool.take(g)))
    deadline = time.monotonic() + 10
    while not pool._starting and time.monotonic() < deadline:  # noqa: SLF001 - the test's clock
        time.sleep(0.01)
    taker.start()
    taker.join(0.3)
    assert taker.is_alive() and not rec.plain()  # waiting for the one being started
    slow.set()
    taker.join(10)
    (taken,) = got
    assert taken is not None and taken.proc is rec.plain()[0][1]
    assert pool.take(g) is None  # the count is used up: a writer starts its own now
    pool.close()
    assert len(rec.plain()) == 1
    taken.kill()


def test_only_one_writer_waits_for_the_one_being_started(src: Path) -> None:
    # A second writer starts its own at once, beside it, rather than queue behind the
    # pool's one thread; there are still never more than the count in all.
    rec = Recorder()
    slow = threading.Event()

    def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        if threading.current_thread().name == "pcheckout-prestart":
            slow.wait(10)  # the pool is slow to start its first
        return rec(argv, **kw)

    g = Git(src, version=(*MIN_GIT, 0))
    pool = Prestarted(g, 3, spawn=spawn)
    deadline = time.monotonic() + 10
    while not pool._starting and time.monotonic() < deadline:  # noqa: SLF001 - the test's clock
        time.sleep(0.01)
    got: list[CatFile | None] = []
    first = threading.Thread(target=lambda: got.append(pool.take(g)))
    first.start()
    while not pool._claimed and time.monotonic() < deadline:  # noqa: SLF001
        time.sleep(0.01)
    assert pool.take(g) is None  # the second writer: start your own, now
    assert first.is_alive() and not got
    slow.set()
    first.join(10)
    rec.wait_for(2)
    (taken,) = got
    assert taken is not None and taken.proc in [p for _, p in rec.plain()]
    pool.close()
    # the pool started one for the first writer and one more; the second writer's own
    # was the third of the count
    assert len(rec.plain()) == 2
    taken.kill()


def test_a_writer_running_another_git_starts_its_own(src: Path) -> None:
    # A partial clone's writers run with their own environment (a staging directory to
    # read, no lazy fetch): a cat-file started without it is not theirs.
    rec = Recorder()
    g = Git(src, version=(*MIN_GIT, 0))
    pool = Prestarted(g, 1, spawn=rec)
    rec.wait_for(1)
    other = g.replace(env={**os.environ, "GIT_NO_LAZY_FETCH": "1"})
    assert pool.take(other) is None
    taken = pool.take(g)
    assert taken is not None
    pool.close()
    taken.kill()


def test_a_blobless_clone_starts_nothing_ahead(src: Path, tmp_path: Path) -> None:
    # Its writers of fetched blobs run with their own environment: nothing is started
    # ahead for them, and the checkout is still git's.
    server = serve(src)
    ours = blobless_clone(server, tmp_path / "ours")
    theirs = clone_with_git(src, tmp_path / "theirs")
    rec = Recorder()
    checkout_mod.checkout(_engine_opts(ours, rec))
    assert "pcheckout-prestart" not in [t for t, _ in rec.plain()]
    assert all(p.poll() is not None for _, p in rec.plain())
    assert_same_as_git(ours, theirs)


def _four_writers_at_once(g: Git, rng: random.Random) -> Recorder:
    """Four writers take from a pool of four whose cat-files start after random delays;
    each starts its own where the pool says so.  What was started, all now killed."""
    rec = Recorder()
    delays = [rng.uniform(0, 0.02) for _ in range(8)]

    def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        time.sleep(delays.pop() if delays else 0)
        return rec(argv, **kw)

    pool = Prestarted(g, 4, spawn=spawn)
    taken: list[CatFile] = []

    def writer() -> None:
        cf = pool.take(g)
        taken.append(cf if cf is not None else CatFile(g, spawn=spawn, name="own"))

    writers = [threading.Thread(target=writer) for _ in range(4)]
    time.sleep(rng.uniform(0, 0.02))
    for t in writers:
        t.start()
        time.sleep(rng.uniform(0, 0.005))
    for t in writers:
        t.join(10)
    pool.close()
    assert len(taken) == 4
    for cf in taken:
        cf.kill()
    return rec


def test_writers_taking_at_once_never_start_more_than_the_count(src: Path) -> None:
    # A writer that comes while another waits for the one being started, just after a
    # ready one appeared, takes the ready one or waits: it never starts a fifth of four.
    g = Git(src, version=(*MIN_GIT, 0))
    rng = random.Random(7)
    for _ in range(25):
        assert len(_four_writers_at_once(g, rng).plain()) == 4
