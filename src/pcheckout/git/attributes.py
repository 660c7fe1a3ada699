"""Which attributes apply to a path of a tree, looked up as git's checkout and archive do.

The lookup side of conversion (gitoxide's ``gix-attributes``); what the values do to the
bytes is ``git/convert.py``.

* ``conversion_sources``: can anything set an attribute at all (a ``.gitattributes`` in
  the tree, ``$GIT_DIR/info/attributes``, the global or system file,
  ``core.autocrlf=true``)?  If not, nothing converts and no git process is asked
  anything (the common case pays nothing).
* ``TreeAttributes.lookup``: one ``git check-attr --stdin -z`` for every path, the
  attributes read from the tree being written (``--source`` on git >= 2.40; on older
  gits a temporary index holding the tree's ``.gitattributes`` and ``--cached``), so no
  working tree is consulted.
* ``fetch_attributes``/``known_attributes``: in a partial clone, the tree's
  ``.gitattributes`` blobs a lookup reads are fetched first in one batch (check-attr
  would fetch each one lazily), or, for a run that fetches nothing, the paths whose
  lookup needs none of the missing ones.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import IO, TYPE_CHECKING

from pcheckout.errors import GitError
from pcheckout.git.config import autocrlf, config_bool
from pcheckout.git.promisor import fetch, missing_objects
from pcheckout.git.runner import GIT_CHECK_ATTR_SOURCE, Git, Repo
from pcheckout.git.tree import MODE_EXEC, MODE_FILE, Entry

if TYPE_CHECKING:
    import tempfile

GITATTRIBUTES = b".gitattributes"

#: The attributes ``archive.c: get_archive_attrs()`` reads.
ARCHIVE_ATTRS = ("export-ignore", "export-subst")

#: An attribute's state as check-attr prints it: None (unspecified), True
#: (set), False (unset) or the value.  check-attr prints a value of "set",
#: "unset" or "unspecified" exactly as those states, so such values are read
#: as the states (git's own output cannot tell them apart).
AttrValue = bool | str | None


def is_gitattributes(path: bytes) -> bool:
    return path == GITATTRIBUTES or path.endswith(b"/" + GITATTRIBUTES)


def convertible(e: Entry) -> bool:
    """Only regular files convert (symlinks and gitlinks never: entry.c)."""
    return e.mode in (MODE_FILE, MODE_EXEC)


def _global_attributes_file(config: Mapping[str, str], environ: Mapping[str, str]) -> Path | None:
    configured = config.get("core.attributesfile")
    if configured:
        return Path(os.path.expanduser(configured))
    home = environ.get("HOME") or os.path.expanduser("~")
    xdg = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return Path(xdg) / "git" / "attributes"


def _nonempty(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def conversion_sources(
    entries: Sequence[Entry],
    config: Mapping[str, str],
    common_dir: Path,
    environ: Mapping[str, str] | None = None,
    *,
    has_gitattributes: bool | None = None,
) -> list[str]:
    """Where attributes or eol settings could come from (empty: nothing converts);
    ``has_gitattributes``: whether the tree has a ``.gitattributes``, where the caller
    knows (None: looked up in ``entries``).

    ``core.autocrlf=input`` converts only when adding, and ``core.eol`` or
    ``filter.*`` alone select nothing without an attribute, so they are not
    sources here (``classify`` still reads them for the paths that have one)."""
    env = os.environ if environ is None else environ
    sources: list[str] = []
    if has_gitattributes is None:
        has_gitattributes = _has_gitattributes(entries)
    if has_gitattributes:
        sources.append("the tree has .gitattributes")
    if autocrlf(config) == "true":
        sources.append("core.autocrlf=true")
    for what, path in other_attribute_files(config, common_dir, env):
        if _nonempty(path):
            sources.append(what)
    return sources


#: the system's attribute file: git's ETC_GITATTRIBUTES, ``$(prefix)/etc/gitattributes``
#: with the prefix /usr made /etc (as Debian's git is built; ``git var GIT_ATTR_SYSTEM``
#: says it from git 2.42)
SYSTEM_ATTRIBUTES = Path("/etc/gitattributes")


def other_attribute_files(
    config: Mapping[str, str], common_dir: Path, environ: Mapping[str, str]
) -> list[tuple[str, Path]]:
    """The attribute files git reads besides the tree's ``.gitattributes`` (attr.c
    bootstrap_attr_stack), each with how a report names it: ``$GIT_DIR/info/attributes``,
    the global one (``core.attributesFile``, else XDG's), the system one (unless
    ``GIT_ATTR_NOSYSTEM``)."""
    info = common_dir / "info" / "attributes"
    files = [("$GIT_DIR/info/attributes exists", info)]
    glob = _global_attributes_file(config, environ)
    if glob is not None:
        files.append((f"global attributes file {glob}", glob))
    if not config_bool(environ.get("GIT_ATTR_NOSYSTEM"), False):
        files.append((f"system attributes file {SYSTEM_ATTRIBUTES}", SYSTEM_ATTRIBUTES))
    return files


def may_say(
    word: bytes,
    work_tree: Path,
    gitattributes: Sequence[bytes],
    others: Sequence[tuple[str, Path]],
) -> bool:
    """Whether an attribute source could say ``word`` (False: none has it written, so no
    path's attribute is ``word``: an attribute's value, a macro's too, is the source's own
    text, with no quoting).  The sources are the tree's ``gitattributes`` (their paths),
    read from the work tree git's checkout has just written them to, and the ``others``
    (:func:`other_attribute_files`).  Letters' case is not told apart; a ``.gitattributes``
    not in the work tree (outside a sparse checkout) or any file that cannot be read may
    say it: True."""
    needle = word.lower()
    top = os.fsencode(work_tree)
    for path in gitattributes:
        try:
            with open(top + b"/" + path, "rb") as f:
                if needle in f.read().lower():
                    return True
        except OSError:
            return True
    for _what, other in others:
        try:
            with open(other, "rb") as f:
                if needle in f.read().lower():
                    return True
        except FileNotFoundError:
            continue  # (git reads none there either)
        except OSError:
            return True
    return False


#: Paths joined at a time to look for a .gitattributes (250,000 paths joined at once
#: were 42 MiB, held at the run's peak).
JOIN_CHUNK = 1 << 13


def _has_gitattributes(entries: Sequence[Entry]) -> bool:
    """Whether an entry is a ``.gitattributes`` (in any directory).  A join and two
    searches in C per chunk of paths: a Python call per entry was ~70 ms for 40k entries
    (load ~14) before git's writer could start."""
    framed = (b"\0" + GITATTRIBUTES + b"\0", b"/" + GITATTRIBUTES + b"\0")
    path = attrgetter("path")
    for start in range(0, len(entries), JOIN_CHUNK):
        chunk = entries[start : start + JOIN_CHUNK]
        joined = b"\0" + b"\0".join(map(path, chunk)) + b"\0"
        if any(f in joined for f in framed):
            return True
    return False


def index_may_name_gitattributes(index: bytes) -> bool:
    """Whether the index file's bytes ``index`` may hold a ``.gitattributes`` entry: False
    only where none can be there.  A version 2 or 3 index holds each name whole, followed
    by at least one NUL, so a search for the framed name finds every one (and perhaps a
    ``x.gitattributes`` too: then True, as for an index this cannot read that way, a
    version 4 one whose names are cut to what differs from the one before)."""
    if index[:4] != b"DIRC" or index[4:8] not in (b"\0\0\0\2", b"\0\0\0\3"):
        return True
    return GITATTRIBUTES + b"\0" in index


def _value(raw: bytes) -> AttrValue:
    if raw == b"unspecified":
        return None
    if raw == b"set":
        return True
    if raw == b"unset":
        return False
    return raw.decode("utf-8", "surrogateescape")


#: check-attr's answers read at a time: its output (path, name, value for every path and
#: name: 153 MiB for 250,000 paths x 6 names) is parsed as it comes, never held whole.
ANSWER_CHUNK = 1 << 20


def _check_attr_rows(
    runner: Git, args: list[str], paths: Sequence[bytes], width: int
) -> list[tuple[AttrValue, ...]]:
    """The values of ``check-attr -z`` run with ``args`` on ``paths``: one row of
    ``width`` values per path.  Equal rows are one tuple, equal values one object (most
    paths share every attribute)."""
    count = len(paths)
    import tempfile  # (here and below: a run that looks nothing up need not pay ~3 ms)

    with tempfile.TemporaryFile(prefix="pcheckout-check-attr-") as err:
        try:
            proc = runner.popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        except OSError as exc:
            raise GitError(f"cannot run git: {exc}") from None
        assert proc.stdin is not None and proc.stdout is not None
        feeder = threading.Thread(target=_feed, args=(proc.stdin, paths), daemon=True)
        feeder.start()
        values: dict[bytes, AttrValue] = {}
        shared: dict[tuple[AttrValue, ...], tuple[AttrValue, ...]] = {}
        rows: list[tuple[AttrValue, ...]] = []
        row: list[AttrValue] = []
        pending = b""
        with proc.stdout:
            while chunk := proc.stdout.read(ANSWER_CHUNK):
                parts = (pending + chunk).split(b"\0")
                cut = (len(parts) - 1) // 3 * 3  # whole (path, name, value) triples
                pending = b"\0".join(parts[cut:])
                for raw in parts[2:cut:3]:
                    if raw in values:
                        value = values[raw]
                    else:
                        value = values[raw] = _value(raw)
                    row.append(value)
                    if len(row) == width:
                        t = tuple(row)
                        rows.append(shared.setdefault(t, t))
                        row = []
        code = proc.wait()
        feeder.join()
        if code != 0:
            err.seek(0)
            raise GitError("git check-attr failed", cmd=runner.argv(args), stderr=err.read())
    if pending or row or len(rows) != count:
        raise GitError(f"git check-attr answered {len(rows)} of {count} paths x {width}")
    return rows


#: Paths joined at a time for check-attr's input (250,000 paths joined at once, and once
#: more with the last NUL, were 41 MiB, held at the run's peak).
FEED_CHUNK = 1 << 13


def _feed(pipe: IO[bytes], paths: Sequence[bytes]) -> None:
    """Write ``paths``, each NUL-terminated, to ``pipe`` and close it (a thread: git
    answers as it reads)."""
    with contextlib.suppress(OSError), pipe:  # (git died: its exit status says why)
        for start in range(0, len(paths), FEED_CHUNK):
            pipe.write(b"\0".join(paths[start : start + FEED_CHUNK]) + b"\0")


def _attr_git(git: Git, repo: Repo, extra_env: Mapping[str, str], *, worktree: bool = False) -> Git:
    """A runner for check-attr, with GIT_FLUSH=0 (check-attr
    otherwise flushes after every path when its output is a pipe: write-or-die.c).

    Attributes of a tree need no work tree: git runs with ``GIT_DIR`` set from a local
    directory, so it neither searches for the repository nor stats anything on the way
    (on the 1 ms latency filesystem that took the temporary index's update-index and
    check-attr of a 1,000-file tree from ~300 to ~100 ms, docs/benchmarks.md
    "Attributes"; the index is now written in-process).  The work tree's own
    attributes (``worktree``) need its top as the current directory (paths are relative
    to it)."""
    base = dict(os.environ if git.env is None else git.env)
    base.update({"GIT_FLUSH": "0", **extra_env})
    if worktree:
        top = repo.work_tree if repo.work_tree is not None else repo.git_dir
        return Git(top, debug=git.debug, env=base, exe=git.exe, version=git.version)
    base["GIT_DIR"] = str(repo.git_dir)
    base.pop("GIT_WORK_TREE", None)
    import tempfile

    return Git(
        Path(tempfile.gettempdir()), debug=git.debug, env=base, exe=git.exe, version=git.version
    )


def lookup_in_index(
    git: Git, repo: Repo, paths: Sequence[bytes], names: Sequence[str]
) -> list[tuple[AttrValue, ...]]:
    """``names`` for each of ``paths`` as the index's ``.gitattributes`` (and the
    repository's info, global and system files) set them: ``check-attr --cached``, for
    a tree git has just checked out into the index."""
    if not paths:
        return []
    args = ["check-attr", "--stdin", "-z", "--cached", *names]
    return _check_attr_rows(_attr_git(git, repo, {}), args, paths, len(names))


def _dir_of(path: bytes) -> bytes:
    return path.rpartition(b"/")[0]


def attribute_files(entries: Sequence[Entry], only: Sequence[int] | None = None) -> list[int]:
    """The ``.gitattributes`` entries (indexes into ``entries``) that looking up the paths of
    ``only`` (default: all) reads: the one in each of their directories, the top level's
    included (``attr.c: prepare_attr_stack()`` reads a path's directories and no other)."""
    dirs: set[bytes] = set()
    for i in range(len(entries)) if only is None else only:
        d = _dir_of(entries[i].path)
        while d not in dirs:
            dirs.add(d)
            if not d:
                break
            d = _dir_of(d)
    return [
        i
        for i, e in enumerate(entries)
        if is_gitattributes(e.path) and convertible(e) and _dir_of(e.path) in dirs
    ]


def fetch_attributes(
    git: Git,
    entries: Sequence[Entry],
    remotes: Sequence[str],
    only: Sequence[int] | None = None,
) -> list[str]:
    """A partial clone's missing .gitattributes blobs that looking up the paths of ``only``
    (indexes into ``entries``; default: all) reads, in one fetch (check-attr reads them
    from the tree and would fetch each one lazily, a git fetch per blob); the ids fetched."""
    if not remotes:
        return []
    oids = sorted({entries[i].oid for i in attribute_files(entries, only)})
    missing = missing_objects(git, oids) if oids else []
    if missing:
        fetch(git, remotes, missing)
    return missing


def known_attributes(
    git: Git,
    entries: Sequence[Entry],
    only: Sequence[int],
    remotes: Sequence[str],
    missing: set[str],
) -> tuple[list[int], list[str]]:
    """For a run that must fetch nothing (a dry run in a partial clone): those of ``only``
    whose attributes can be read without a fetch (none of their ``.gitattributes`` is
    missing), and the missing ``.gitattributes`` blobs the lookup of the others would read.
    ``missing``: the blobs of ``only`` known to be missing (others are looked for)."""
    if not remotes:
        return list(only), []
    files = attribute_files(entries, only)
    written = set(only)
    others = [entries[i].oid for i in files if i not in written]
    gone = missing | set(missing_objects(git, others)) if others else missing
    absent = {_dir_of(entries[i].path): entries[i].oid for i in files if entries[i].oid in gone}
    if not absent:
        return list(only), []
    known: list[int] = []
    for i in only:
        d = _dir_of(entries[i].path)
        while d not in absent and d:
            d = _dir_of(d)
        if d not in absent or not convertible(entries[i]):
            known.append(i)
    return known, sorted(set(absent.values()))


class TreeAttributes:
    """Attributes read from one tree, as git reads them at checkout or archive:
    the tree's ``.gitattributes`` (never a working tree's) and the repository's
    info, global and system files.

    git >= 2.40: ``check-attr --source=TREE``.  Older gits: a temporary index
    in a local temporary directory holding only the tree's ``.gitattributes``
    entries (attributes are looked up by path; no other entry is read), and
    ``check-attr --cached`` (GIT_ATTR_INDEX).  ``index_file`` is that index
    (None on newer gits): ``cat-file --filters`` run with it and an empty work
    tree also reads the tree's attributes (attr.c: GIT_ATTR_CHECKIN falls back
    to the index).

    ``worktree=True`` is ``git archive --worktree-attributes``: the working
    tree's files (git's default direction), with an empty index to fall back to
    (archive does not read the index then; check-attr would)."""

    def __init__(
        self,
        git: Git,
        repo: Repo,
        tree: str,
        entries: Sequence[Entry],
        *,
        worktree: bool = False,
    ) -> None:
        self.git = git
        self.repo = repo
        self.tree = tree
        self.worktree = worktree  # archive --worktree-attributes: git's default direction
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self.index_file: str | None = None
        if not worktree and git.has(GIT_CHECK_ATTR_SOURCE):
            return
        import tempfile

        self._scratch = tempfile.TemporaryDirectory(prefix="pcheckout-attr-")
        self.index_file = os.path.join(self._scratch.name, "index")
        attrs = [e for e in entries if is_gitattributes(e.path)] if not worktree else []
        if attrs:
            # Written here, as `git update-index --index-info` would write it (zero stat
            # data): a git process started on a latency mount costs tens of round trips.
            # (Imported here: a tree without .gitattributes need not pay its ~3 ms.)
            from pcheckout.git import index as ix

            rows = [ix.IndexEntry(e.path, e.mode, bytes.fromhex(e.oid), *ix.NO_STAT) for e in attrs]
            with open(self.index_file, "wb") as f:
                f.write(ix.encode_index(rows, hash_name=repo.object_format))

    @property
    def scratch(self) -> str:
        """A private temporary directory, removed by ``close()`` (made on first use: git
        2.40 has ``check-attr --source`` but not ``--attr-source``, and export's filtered
        cat-file then needs a private work tree)."""
        if self._scratch is None:
            import tempfile

            self._scratch = tempfile.TemporaryDirectory(prefix="pcheckout-attr-")
        return self._scratch.name

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def __enter__(self) -> TreeAttributes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lookup(self, paths: Sequence[bytes], names: Sequence[str]) -> list[tuple[AttrValue, ...]]:
        """``names`` for each of ``paths`` (one check-attr process)."""
        if not paths:
            return []
        args = ["check-attr", "--stdin", "-z"]
        env: dict[str, str] = {}
        if self.index_file is None:
            args.append(f"--source={self.tree}")
        else:
            if not self.worktree:
                args.append("--cached")
            env["GIT_INDEX_FILE"] = self.index_file
        runner = _attr_git(self.git, self.repo, env, worktree=self.worktree)
        return _check_attr_rows(runner, [*args, *names], paths, len(names))
