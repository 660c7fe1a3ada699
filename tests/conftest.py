"""Fixtures every test module shares; helper functions live in ``helpers.py``."""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import GIT_ENV, make_repo


@pytest.fixture(autouse=True)
def _isolated_git(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No user or system git config, and a private tune cache, for every test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("PCHECKOUT_WORKERS", raising=False)
    # pcheckout's engine unless a test asks for git's writer (the ``writer`` fixture) or for
    # the policy's choice: most tests look at the engine (faults, processes, adapting).
    monkeypatch.setenv("PCHECKOUT_WRITER", "pcheckout")
    monkeypatch.delenv("GIT_DIR", raising=False)
    monkeypatch.delenv("GIT_WORK_TREE", raising=False)
    monkeypatch.delenv("GIT_INDEX_FILE", raising=False)


@pytest.fixture(autouse=True)
def single_threaded(request: pytest.FixtureRequest) -> Iterator[None]:
    """No watchdog thread, in every test: writers fork only while no other thread runs,
    and pytest's ``faulthandler_timeout`` keeps one (a C thread) beside every test, so
    the suite would never see the forked writers outside test_forked.py.  The same dump
    of every thread's traceback on a hang comes from SIGALRM instead (a fork does not
    inherit the alarm)."""
    timeout = float(request.config.getini("faulthandler_timeout") or 0)
    faulthandler.cancel_dump_traceback_later()
    deadline = time.monotonic() + 10.0  # the watchdog exits at once; a bound only
    while len(os.listdir("/proc/self/task")) > 1 and time.monotonic() < deadline:
        time.sleep(0.002)  # the watchdog exits shortly after its cancel
    if timeout:
        faulthandler.register(signal.SIGALRM)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        if timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)
            faulthandler.unregister(signal.SIGALRM)


@pytest.fixture(params=["pcheckout", "git"])
def writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each writer in turn, as a user picks it (PCHECKOUT_WRITER): a module runs its checkout
    cases with both by ``pytestmark = pytest.mark.usefixtures("writer")``."""
    name = str(request.param)
    monkeypatch.setenv("PCHECKOUT_WRITER", name)
    return name


@pytest.fixture(scope="module")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[bytes, bytes]]]:
    """~5,000 files on tmpfs (/dev/shm when there is one): a checkout takes a while."""
    base = Path(
        tempfile.mkdtemp(
            prefix="pcheckout-faults-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
        )
    )
    files = {b"d%02d/f%05d" % (i % 50, i): b"x%d\n" % i * 200 for i in range(5000)}
    mp = pytest.MonkeyPatch()
    for k, v in GIT_ENV.items():
        mp.setenv(k, v)
    try:
        yield make_repo(base, files), files
    finally:
        mp.undo()
        shutil.rmtree(base, ignore_errors=True)
