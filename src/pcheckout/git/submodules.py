"""Submodules as git records them, read through git: the gitlinks of the index or of a
tree, the sections of a ``.gitmodules`` (git's own config parser: ``git config -f``), the
repository's ``submodule.<name>.*`` settings, and which submodules are active and populated.

The rules are git's (submodule-config.c, submodule.c): a gitlink's submodule is the
``.gitmodules`` section whose ``path`` names it (a later section naming the same path
wins); it is active as ``is_submodule_active`` decides and populated as
``is_submodule_populated_gently`` decides.  Paths are bytes, as git stores them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from pcheckout.git.config import parse_bool
from pcheckout.git.runner import Git
from pcheckout.git.tree import MODE_GITLINK, Entry


class Gitlink(NamedTuple):
    """A submodule's entry in the index or in a tree: its path and the commit recorded."""

    path: bytes
    commit: str  # hex


def index_gitlinks(git: Git) -> list[Gitlink]:
    """The index's gitlinks in index order (``git ls-files -s -z``; an unmerged path once
    per stage)."""
    links: list[Gitlink] = []
    for record in git.out("ls-files", "-s", "-z").split(b"\0"):
        if record.startswith(b"160000 "):
            meta, _, path = record.partition(b"\t")
            links.append(Gitlink(path, meta.split()[1].decode("ascii")))
    return links


def tree_gitlinks(entries: Iterable[Entry]) -> list[Gitlink]:
    """The gitlinks among a tree's entries (:func:`pcheckout.git.tree.list_tree`), in
    tree order."""
    return [Gitlink(e.path, e.oid) for e in entries if e.mode == MODE_GITLINK]


class Gitmodule(NamedTuple):
    """One ``[submodule "NAME"]`` section of a ``.gitmodules``; None: not set (or set
    without a value)."""

    name: str
    path: bytes | None
    url: str | None
    update: str | None  # checkout, rebase, merge, none or !command
    branch: str | None  # what --remote follows
    shallow: bool  # "shallow = true": cloned with --depth=1


#: The ``shallow`` values read as true (git's text booleans, and 1).
_SHALLOW_TRUE = frozenset({b"true", b"yes", b"on", b"1"})


def read_gitmodules(git: Git, blob: str | None = None) -> dict[str, Gitmodule]:
    """The sections of the work tree's ``.gitmodules`` by name, in file order: ``git
    config -z -f .gitmodules --list`` (with ``blob``, e.g. ``REV:.gitmodules``: that blob,
    the file as a commit records it, through ``--blob``)."""
    source = "--file=.gitmodules" if blob is None else f"--blob={blob}"
    out = git.run("config", "-z", source, "--list", ok_codes=(0, 1)).stdout
    sections: dict[bytes, dict[bytes, bytes | None]] = {}
    for item in out.split(b"\0"):
        key, sep, value = item.partition(b"\n")
        # git lists "submodule.NAME.VAR", section and variable lower-cased; NAME may hold dots
        name, dot, var = key.removeprefix(b"submodule.").rpartition(b".")
        if key.startswith(b"submodule.") and dot:
            sections.setdefault(name, {})[var] = value if sep else None
    return {os.fsdecode(name): _gitmodule(os.fsdecode(name), s) for name, s in sections.items()}


def _gitmodule(name: str, section: dict[bytes, bytes | None]) -> Gitmodule:
    def text(var: bytes) -> str | None:
        value = section.get(var)
        return None if value is None else os.fsdecode(value)

    shallow = section.get(b"shallow")
    return Gitmodule(
        name,
        section.get(b"path"),
        text(b"url"),
        text(b"update"),
        text(b"branch"),
        shallow is not None and shallow.lower() in _SHALLOW_TRUE,
    )


def by_path(modules: Mapping[str, Gitmodule]) -> dict[bytes, Gitmodule]:
    """Each path's section (submodule-config.c: a later section naming a path wins)."""
    return {m.path: m for m in modules.values() if m.path is not None}


class SubmoduleConfig(NamedTuple):
    """The repository's ``submodule.<name>.*``: what ``git submodule init`` registered
    (None: not set)."""

    url: str | None
    update: str | None
    active: str | None  # git's boolean, as written (see active_paths)


def submodule_config(config: Mapping[str, str], name: str) -> SubmoduleConfig:
    """``submodule.<name>.*`` from the repository's config as
    :func:`pcheckout.git.config.read_config` reads it."""
    key = f"submodule.{name}."
    return SubmoduleConfig(
        config.get(key + "url"), config.get(key + "update"), config.get(key + "active")
    )


def active_paths(
    git: Git,
    config: Mapping[str, str],
    modules: Mapping[str, Gitmodule],
    paths: Sequence[bytes],
    tree: str | None = None,
) -> set[bytes]:
    """Those of the gitlink ``paths`` whose submodule is active (submodule.c:
    is_submodule_active): none without a ``modules`` section; else
    ``submodule.<name>.active``; else, where ``submodule.active`` is set, whether its
    pathspecs match the path; else whether ``submodule.<name>.url`` is set.

    git matches the pathspecs (``git ls-files -- PATHSPEC``): a path must be in the index,
    or in ``tree`` when given (``--with-tree``), to be matched."""
    sections = by_path(modules)
    matched: set[bytes] | None = None
    if "submodule.active" in config:
        matched = _matching(git, tree)
    active: set[bytes] = set()
    for path in paths:
        module = sections.get(path)
        if module is None:
            continue
        own = submodule_config(config, module.name)
        if own.active is not None:
            on = parse_bool(f"submodule.{module.name}.active", own.active)
        elif matched is not None:
            on = path in matched
        else:
            on = own.url is not None
        if on:
            active.add(path)
    return active


def _matching(git: Git, tree: str | None) -> set[bytes]:
    """The index's paths (and ``tree``'s) that ``submodule.active``'s pathspecs match."""
    specs = git.out("config", "-z", "--get-all", "submodule.active").split(b"\0")[:-1]
    with_tree = [] if tree is None else [f"--with-tree={tree}"]
    out = git.out("ls-files", "-z", *with_tree, "--", *map(os.fsdecode, specs))
    return set(out.split(b"\0")[:-1])


def populated(git: Git, path: bytes) -> bool:
    """Whether the submodule at ``path`` (below ``git``'s directory, the work tree's top)
    is populated (submodule.c: is_submodule_populated_gently): ``PATH/.git`` is a git
    dir, or a ``.git`` file naming one (``git rev-parse --resolve-git-dir``, run only
    where ``PATH/.git`` exists)."""
    dotgit = os.path.join(os.fsencode(git.cwd), path, b".git")
    if not os.path.lexists(dotgit):
        return False
    proc = git.run("rev-parse", "--resolve-git-dir", os.fsdecode(dotgit), ok_codes=(0, 128))
    return proc.returncode == 0


def recurses(config: Mapping[str, str]) -> bool:
    """``submodule.recurse``: whether checkout, switch and read-tree move submodules
    (git's default: no)."""
    value = config.get("submodule.recurse")
    return value is not None and parse_bool("submodule.recurse", value)


#: The repository-local variables git drops from a submodule's environment
#: (environment.c ``local_repo_env``; ``git rev-parse --local-env-vars``), but for the
#: ``-c`` settings (``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG_COUNT``), which it passes on.
LOCAL_REPO_ENV = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CONFIG",
        "GIT_OBJECT_DIRECTORY",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_GRAFT_FILE",
        "GIT_INDEX_FILE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_REPLACE_REF_BASE",
        "GIT_PREFIX",
        "GIT_SHALLOW_FILE",
        "GIT_COMMON_DIR",
    }
)


def submodule_git(git: Git, environ: Mapping[str, str], path: bytes) -> Git:
    """A runner inside the submodule at ``path`` in the environment git gives it
    (submodule.c ``prepare_submodule_repo_env``: the local variables dropped,
    ``GIT_DIR=.git``)."""
    env = {k: v for k, v in environ.items() if k not in LOCAL_REPO_ENV}
    env["GIT_DIR"] = ".git"
    cwd = git.cwd / os.fsdecode(path)
    return Git(cwd, debug=git.debug, env=env, exe=git.exe, version=git.version)


def uses_gitfile(root: bytes, path: bytes) -> bool:
    """Whether ``PATH/.git`` is a file (a gitfile naming the submodule's git dir in the
    superproject), not the git dir itself (submodule.c ``submodule_uses_gitfile``)."""
    return os.path.isfile(os.path.join(root, path, b".git"))


def module_git_dir(git: Git, name: str) -> str:
    """Where the submodule ``name`` keeps its git dir: ``$GIT_DIR/modules/NAME``
    (submodule.c ``submodule_name_to_gitdir``), absolute."""
    out = os.fsdecode(git.out("rev-parse", "--git-path", f"modules/{name}").rstrip(b"\n"))
    return os.path.join(git.cwd, out)  # (relative to the directory git ran in, if not absolute)
