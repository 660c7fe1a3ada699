"""The writers' plain cat-files started ahead (git/catfile.py ``Prestarted``): taken by
the writers, killed if never taken or if the run fails before it writes."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, make_repo

from pcheckout import checkout as checkout_mod
from pcheckout.errors import PcheckoutError
from pcheckout.git.catfile import Prestarted
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


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return make_repo(tmp_path, FILES)


def test_the_writers_take_the_catfiles_started_ahead(src: Path, tmp_path: Path) -> None:
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_with_git(src, tmp_path / "theirs")
    rec = Recorder()
    opts = CheckoutOptions(ours, workers=4, writer="pcheckout", adapt=False, processes=False,
                           spawn=rec)  # fmt: skip
    checkout_mod.checkout(opts)
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

    monkeypatch.setattr(checkout_mod, "_plan_conversion", fails)
    opts = CheckoutOptions(ours, workers=4, writer="pcheckout", adapt=False, processes=False,
                           spawn=rec)  # fmt: skip
    with pytest.raises(PcheckoutError, match="conversion planning failed"):
        checkout_mod.checkout(opts)
    assert rec.plain(), "nothing was started ahead"
    assert all(p.poll() is not None for _, p in rec.plain())
    assert not (ours / ".git" / "index.lock").exists()


def test_close_kills_what_was_never_taken(src: Path) -> None:
    rec = Recorder()
    pool = Prestarted(Git(src, version=(*MIN_GIT, 0)), 3, spawn=rec)
    deadline = time.monotonic() + 10
    while len(rec.plain()) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # the third handed to the pool
    taken = pool.take()
    assert taken is not None
    pool.close()
    assert pool.take() is None
    alive = [p for _, p in rec.plain() if p.poll() is None]
    assert alive == [taken.proc]  # the one taken is its taker's to close; the rest are gone
    taken.kill()


def test_close_while_starting_leaves_nothing_running(src: Path) -> None:
    rec = Recorder()
    pool = Prestarted(Git(src, version=(*MIN_GIT, 0)), 50, spawn=rec)
    pool.close()
    assert len(rec.plain()) < 50
    assert all(p.poll() is not None for _, p in rec.plain())


def test_a_writer_that_starts_its_own_means_one_fewer_started_ahead(src: Path) -> None:
    rec = Recorder()
    slow = threading.Event()

    def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        slow.wait(5)  # the pool is slow to start its first
        return rec(argv, **kw)

    pool = Prestarted(Git(src, version=(*MIN_GIT, 0)), 3, spawn=spawn)
    assert pool.take() is None  # none ready: the writer starts its own
    assert pool.take() is None
    slow.set()
    deadline = time.monotonic() + 10
    while len(rec.plain()) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    taken = pool.take()
    pool.close()
    assert len(rec.plain()) == 1 and taken is not None and taken.proc is rec.plain()[0][1]
    taken.kill()
