"""Git LFS objects fetched into a local staging store, then copied into the repository's.

Where the repository is on a network mount, ``git lfs fetch`` writes every object it
fetches into the store through one directory (``lfs/tmp``: a create there, then a rename
into ``lfs/objects/aa/bb``), and a server serves the creates of one directory one at a
time: on the 1 ms latency mount 603 objects took 7.6 s whether four fetches ran at once or
sixteen.  Fetched into a local directory instead (git-lfs's ``lfs.storage``), the objects
land at local speed; the writers write the work tree's files from there, and
:func:`keep` then copies each object into the repository's store over threads, each
through a temporary name in its own directory (``aa/bb``: the creates spread over many
directories).

``lfs.storage`` is given to this repository's git-lfs alone, by an ``includeIf
"gitdir:..."`` in a private global config that includes the user's own global config
first: a ``git -c lfs.storage=...`` reaches a ``file://`` remote's git-lfs too (it reads
that repository's objects through the same configuration), which then finds nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

__all__ = ["Stage", "keep", "make"]

#: The staging directory's filesystem keeps this many times the objects' bytes free (and
#: this much more), or nothing is staged: the objects are fetched where they belong.
FREE_FACTOR = 2
FREE_SPARE = 256 * 1024 * 1024
#: Characters ``includeIf "gitdir:"`` reads as a pattern: a git dir holding one is not
#: staged (its condition could match another repository).
_GLOB = re.compile(r"[*?\[\]\\]")


class Stage(NamedTuple):
    """A local store a fetch writes into, and the environment that makes git-lfs use it."""

    root: str  # the staging directory (git-lfs's lfs.storage)
    env: dict[str, str]  # the fetch's environment: GIT_CONFIG_GLOBAL set

    @property
    def objects(self) -> str:
        """Where git-lfs puts the objects it fetches (its LocalMediaDir)."""
        return os.path.join(self.root, "objects")

    def remove(self) -> None:
        import shutil  # (shutil, tempfile: only where LFS objects are fetched; ~3 ms of a start)

        shutil.rmtree(self.root, ignore_errors=True)


def _global_configs(environ: Mapping[str, str]) -> list[str]:
    """The global config files git reads for ``environ``, in git's order."""
    if "GIT_CONFIG_GLOBAL" in environ:
        return [environ["GIT_CONFIG_GLOBAL"]] if environ["GIT_CONFIG_GLOBAL"] else []
    home = environ.get("HOME", "")
    xdg = environ.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    found = [os.path.join(xdg, "git", "config")] if xdg else []
    if home:
        found.append(os.path.join(home, ".gitconfig"))
    return [p for p in found if os.path.exists(p)]


def make(git_dir: Path, environ: Mapping[str, str], nbytes: int) -> Stage | None:
    """A staging store for ``nbytes`` of objects fetched for the repository whose git dir
    is ``git_dir`` (run in ``environ``); None where there is not room enough for them in
    the temporary directory, or the git dir cannot be named in a condition."""
    where = str(git_dir)
    configs = _global_configs(environ)
    if _GLOB.search(where) or any("\n" in p for p in (where, *configs)):
        return None
    import shutil
    import tempfile

    try:
        tmp = tempfile.gettempdir()
        if shutil.disk_usage(tmp).free < FREE_FACTOR * nbytes + FREE_SPARE:
            return None
        root = tempfile.mkdtemp(prefix="pcheckout-lfs-", dir=tmp)
    except OSError:
        return None
    stage = Stage(root, {})
    config = os.path.join(root, "global.gitconfig")
    own = os.path.join(root, "storage.gitconfig")
    includes = "".join(f"\tpath = {_quoted(p)}\n" for p in configs)
    try:
        with open(own, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(f"[lfs]\n\tstorage = {_quoted(root)}\n")
        with open(config, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(f"[include]\n{includes}" if includes else "")
            f.write(f"[includeIf {_quoted('gitdir:' + where)}]\n\tpath = {_quoted(own)}\n")
    except OSError:
        stage.remove()
        return None
    return stage._replace(env={**environ, "GIT_CONFIG_GLOBAL": config})


def _quoted(text: str) -> str:
    """``text`` as a quoted config value or subsection name (config.c's escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def keep(stage: Stage, store: str, oids: Sequence[str], threads: int) -> None:
    """Copy the objects ``oids`` from ``stage`` into the repository's ``store`` (its
    ``lfs/objects``), ``threads`` at a time, each written under a temporary name in its
    own directory and renamed into place (an interrupted copy leaves no object cut
    short under its name; one already there is left as it is)."""

    def copy(oid: str) -> None:
        rel = os.path.join(oid[0:2], oid[2:4], oid)
        dest = os.path.join(store, rel)
        if os.path.exists(dest):
            return
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        tmp = f"{dest}.pcheckout-{os.getpid()}.tmp"
        import shutil

        try:
            shutil.copyfile(os.path.join(stage.objects, rel), tmp)
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    if not oids:
        return
    if threads <= 1 or len(oids) == 1:
        for oid in oids:
            copy(oid)
        return
    # (imported here: concurrent.futures with logging is ~5 ms of every run's imports, git/lfs.py)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(threads, len(oids)), thread_name_prefix="pcheckout-lfs") as pool:
        list(pool.map(copy, oids))
