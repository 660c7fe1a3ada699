"""What every run builds and imports before git's writer starts (issue 24): the records
are cheap to make, and a checkout or switch by git's writer leaves the modules that only
rare branches need unimported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, git, make_repo
from lfshelp import LFS_CONFIG

import pcheckout
from pcheckout.checkout import CheckoutOptions
from pcheckout.export import ExportOptions
from pcheckout.fs.detect import FsInfo
from pcheckout.git.runner import MIN_GIT, Git
from pcheckout.options import Result
from pcheckout.plan.policy import WorkerPlan

#: Imported by a run only where it needs them: not by a checkout or switch by git's writer
#: of a tree without LFS (each costs 2-13 ms of a start in a plain venv; docs/benchmarks.md).
NOT_ON_THE_WAY = (
    "dataclasses",
    "inspect",
    "shutil",
    "tempfile",
    "pcheckout.git.lfs",
    "pcheckout.write.engine",
)

_RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pcheckout.cli.main import main
code = main(sys.argv[2:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _run_in_a_bare_interpreter(tmp_path: Path, *argv: str, lfs: bool = False) -> set[str]:
    """The modules a run of ``pcheckout ARGV`` imported, in an interpreter without site
    (``-S``: no site hook imports anything first), git's config isolated (``lfs``: a global
    config as ``git lfs install`` leaves it)."""
    config = tmp_path / "gitconfig"
    config.write_text("")
    for key, value in LFS_CONFIG.items() if lfs else ():  # (its hooks looked for, no more)
        git(tmp_path, "config", "--file", str(config), key, value)
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": str(config),
        "GIT_CONFIG_NOSYSTEM": "1",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    package_parent = str(Path(pcheckout.__file__).resolve().parent.parent)
    proc = subprocess.run(
        [sys.executable, "-S", "-c", _RUN, package_parent, *argv],
        capture_output=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["code"] == 0
    return set(out["modules"])


@pytest.mark.parametrize("lfs", [False, True], ids=["plain", "git-lfs-installed"])
def test_a_checkout_and_a_switch_by_git_s_writer_leave_the_rare_modules_unimported(
    tmp_path: Path, lfs: bool
) -> None:
    files = {f"d{i % 7}/f{i}.txt".encode(): b"%d\n" % i for i in range(200)}
    src = make_repo(tmp_path, {**files, b".gitattributes": b"*.txt text\n"})
    git(src, "tag", "v1")
    (src / "d1" / "f1.txt").write_bytes(b"changed\n")
    (src / "d3" / "f3.txt").unlink()
    git(src, "add", "-A")
    git(src, "commit", "-qm", "two")
    ours = clone_no_checkout(src, tmp_path / "ours")
    theirs = clone_with_git(src, tmp_path / "theirs", "v1")

    fresh = _run_in_a_bare_interpreter(
        tmp_path, "checkout", "-q", "--writer", "git", "-C", str(ours), "v1", lfs=lfs
    )
    assert_same_as_git(ours, theirs)
    git(theirs, "checkout", "-q", "main")
    switch = _run_in_a_bare_interpreter(
        tmp_path, "checkout", "-q", "--writer", "git", "-C", str(ours), "main", lfs=lfs
    )
    assert_same_as_git(ours, theirs)
    for run, imported in (("fresh", fresh), ("switch", switch)):
        assert not imported.intersection(NOT_ON_THE_WAY), (
            run,
            sorted(imported.intersection(NOT_ON_THE_WAY)),
        )
        assert "pcheckout.write.gitwriter" in imported  # (git's writer did run)
        assert ("pcheckout.git.lfshooks" in imported) == lfs  # (its hooks looked for)


def test_each_result_has_its_own_lists() -> None:
    # (the plan and the filesystem are only looked at by to_json)
    fs, plan = cast(FsInfo, object()), cast(WorkerPlan, object())
    a, b = Result("checkout", 1, 2, plan, fs), Result("switch", 3, 4, plan, fs)
    a.hooks.append("post-checkout")
    a.conversion_reasons["eol"] = 1
    a.collided.append("A")
    assert (b.hooks, b.conversion_reasons, b.collided) == ([], {}, [])
    assert (a.seconds, a.written, a.head, b.dry_run) == (0.0, 0, None, False)
    assert (b.mode, b.files, b.bytes) == ("switch", 3, 4)


def test_the_options_read_the_environment_the_run_starts_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opts = CheckoutOptions(tmp_path)
    monkeypatch.setenv("PCHECKOUT_START_TEST", "later")
    assert opts.environ["PCHECKOUT_START_TEST"] == "later"
    given = CheckoutOptions(tmp_path, environ={"A": "1"})._replace(rev="v1")
    assert (given.rev, dict(given.environ), given.directory) == ("v1", {"A": "1"}, tmp_path)
    export = ExportOptions(tmp_path, "HEAD", tmp_path / "out")
    assert export.environ["PCHECKOUT_START_TEST"] == "later"
    with pytest.raises(AttributeError):
        opts.rev = "v2"  # type: ignore[misc]  # (frozen, as the dataclass was)


def test_a_moved_git_runner_keeps_everything_else(tmp_path: Path) -> None:
    seen: list[str] = []
    g = Git(tmp_path, debug=seen.append, env={"A": "1"}, version=(*MIN_GIT, 0)).hooked()
    moved = g.replace(cwd=tmp_path / "sub")
    assert (moved.cwd, moved.env, moved.version, moved.hooks, moved.debug) == (
        tmp_path / "sub",
        {"A": "1"},
        (*MIN_GIT, 0),
        True,
        seen.append,
    )
    other = g.replace(env={"B": "2"})
    assert (other.cwd, other.env) == (tmp_path, {"B": "2"})
    assert g.env == {"A": "1"} and g.cwd == tmp_path
