"""Plain git tuned per mount: the includeIf section, read back by git itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import git, run_cli

from pcheckout.errors import GitError
from pcheckout.git.runner import Git
from pcheckout.tune import gitconfig as includeif


def _origin(repo: Path, key: str) -> str:
    """``git config --show-origin KEY`` in ``repo``: "file:PATH<TAB>VALUE", or "" if unset."""
    return git(repo, "config", "--show-origin", "--get", key, check=False).decode().strip()


@pytest.fixture
def mount(tmp_path: Path) -> Path:
    """A directory standing for a mount point (includeIf matches on paths only); its name
    has a space and a glob character, which the pattern must escape."""
    m = tmp_path / "mnt x[1]"
    m.mkdir()
    return m


def _write(mount: Path, workers: int = 16) -> includeif.GitConfigChange:
    g = Git(mount)
    content = includeif.render(str(mount), workers, 100, "tuned on 2026-12-01", "2026-12-01")
    change = includeif.plan(g, str(mount), content)
    includeif.apply(g, change)
    return change


def test_written_include_applies_under_the_mount_only(tmp_path: Path, mount: Path) -> None:
    change = _write(mount)
    inside = mount / "deep" / "repo"
    inside.mkdir(parents=True)
    git(inside, "init", "-q")
    outside = tmp_path / "elsewhere"
    git(tmp_path, "init", "-q", str(outside))
    assert _origin(inside, "checkout.workers") == f"file:{change.owned}\t16"
    assert _origin(inside, "checkout.thresholdForParallelism") == f"file:{change.owned}\t100"
    assert _origin(outside, "checkout.workers") == ""
    # the include lives in the user's global file, which git chose
    home = Path(os.environ["HOME"])
    assert str(change.owned) in (home / ".gitconfig").read_text()
    assert change.owned.read_text().startswith(includeif.MARKER)


def test_writing_is_idempotent_and_updates_the_count(tmp_path: Path, mount: Path) -> None:
    first = _write(mount)
    assert first.needed
    again = includeif.plan(Git(mount), str(mount), first.content)
    assert not again.needed and "already there" in again.describe()
    assert not includeif.apply(Git(mount), again)
    _write(mount, workers=32)
    home = Path(os.environ["HOME"])
    assert (home / ".gitconfig").read_text().count("path = ") == 1
    repo = mount / "r"
    git(mount, "init", "-q", "r")
    assert _origin(repo, "checkout.workers").endswith("\t32")


def test_remove_takes_everything_out(tmp_path: Path, mount: Path) -> None:
    home = Path(os.environ["HOME"])
    git(tmp_path, "config", "--global", "user.name", "Someone")
    before = (home / ".gitconfig").read_text()
    change = _write(mount)
    removed = includeif.remove(Git(mount), str(mount))
    assert len(removed) == 2 and not change.owned.exists()
    assert (home / ".gitconfig").read_text() == before  # no empty section left behind
    repo = mount / "r"
    git(mount, "init", "-q", "r")
    assert _origin(repo, "checkout.workers") == ""
    assert includeif.remove(Git(mount), str(mount)) == []  # removing twice is fine


def test_remove_keeps_what_the_user_added_to_the_section(tmp_path: Path, mount: Path) -> None:
    _write(mount)
    key = includeif.config_key(str(mount)).rsplit(".", 1)[0] + ".path"
    git(tmp_path, "config", "--global", "--add", key, str(tmp_path / "mine.gitconfig"))
    includeif.remove(Git(mount), str(mount))
    assert git(tmp_path, "config", "--global", "--get-all", key).decode().strip() == str(
        tmp_path / "mine.gitconfig"
    )


def test_remove_refuses_a_file_pcheckout_did_not_write(mount: Path) -> None:
    owned = includeif.owned_path(str(mount))
    owned.parent.mkdir(parents=True)
    owned.write_text("[checkout]\n\tworkers = 3\n")
    with pytest.raises(GitError, match="not written by pcheckout"):
        includeif.remove(Git(mount), str(mount))
    assert owned.exists()


def test_cli_shows_before_writing_and_removes(tmp_path: Path, mount: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    shown = run_cli("tune", str(mount), "--git-config", "--no-measure", "--dry-run", env=env)
    assert shown.returncode == 0, shown.stderr
    listed = git(tmp_path, "config", "--global", "--list", check=False).decode()
    assert "includeif" not in listed.lower()
    assert "workers = " in shown.stdout and "includeIf" in shown.stdout
    done = run_cli("tune", str(mount), "--git-config", "--no-measure", env=env)
    assert done.returncode == 0, done.stderr
    repo = mount / "r"
    git(mount, "init", "-q", "r")
    assert _origin(repo, "checkout.workers") != ""
    gone = run_cli("tune", str(mount), "--git-config", "--remove", env=env)
    assert gone.returncode == 0, gone.stderr
    assert _origin(repo, "checkout.workers") == ""
