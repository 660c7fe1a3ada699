"""What a switch must know of the work tree before it decides: local changes to tracked
files, and untracked files in the way of what it would create.

Local modifications are found the way git finds them: stat data first (an entry whose
stat data matches the index and is not racily clean is clean), then git's own verdict on
the rest (``git ls-files -m`` over a scratch index holding them: clean filters and eol
apply, with the index at hand as git's checkout has it).  ``--force`` asks git itself:
``update-index --refresh`` re-hashes only files whose stat data changed, then
``diff-files``, both on a scratch copy of the index (the switch holds ``index.lock``,
which ``update-index`` would take).  Every lstat runs in parallel where each is a round
trip (``fs/parallel.py``).
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
import tempfile
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from pcheckout.errors import UNTRACKED, GitDiedError, UntrackedInTheWayError, refusal
from pcheckout.fs.detect import FsInfo
from pcheckout.fs.files import full_path
from pcheckout.fs.parallel import MIN_PATHS_PER_THREAD, lstat_many
from pcheckout.git import index as ix
from pcheckout.git.config import config_bool
from pcheckout.git.ignored import ignored
from pcheckout.git.objects import blob_oid
from pcheckout.git.runner import Git
from pcheckout.git.tree import MODE_GITLINK, MODE_SYMLINK, Entry

SKIP = ix.EXT_FLAG_SKIP_WORKTREE

__all__ = [
    "SKIP",
    "Look",
    "StatRules",
    "Threads",
    "Way",
    "by_stat",
    "content_oids",
    "dirty_paths",
    "folded_index",
    "index_seconds",
    "modified",
    "present_paths",
    "racily_clean_changed",
    "refuse_untracked_in_the_way",
    "stat_rules",
    "stat_threads",
]


class Threads(NamedTuple):
    """How many threads stat and unlink, and the least share worth a thread."""

    workers: int
    min_share: int = MIN_PATHS_PER_THREAD


def stat_threads(fs: FsInfo, workers: int, explicit: int | None) -> Threads:
    """Threads for lstat: ``explicit`` if given (every path may get its own
    thread), else the writers' count where a call waits on a server, else one
    (on tmpfs or a disk an lstat is a microsecond of CPU)."""
    if explicit is not None:
        return Threads(explicit, 1)
    return Threads(workers if fs.latency_bound else 1)


def _lstat_many(root_b: bytes, paths: list[bytes], t: Threads) -> list[os.stat_result | None]:
    """``lstat`` of each path under ``root_b`` (None: absent), in parallel where
    each is a round trip (fs/parallel.py)."""
    return lstat_many(root_b, paths, t.workers, t.min_share)


def dirty_paths(git: Git, index_path: Path) -> set[bytes]:
    """The tracked paths ``git checkout -f`` writes again although the switch keeps them:
    those whose file does not match the index by its stat data (unpack-trees.c
    oneway_merge: ie_match_stat after the index's preload, no refresh: a file touched
    but not changed is written again too; a racily clean one is hashed).  That is
    ``git diff-files`` without a refresh first, over the index as it is (read only)."""
    env = dict(os.environ if git.env is None else git.env)
    env["GIT_INDEX_FILE"] = os.fspath(index_path)
    g = Git(git.cwd, debug=git.debug, env=env, exe=git.exe, version=git.version)
    out = g.out("diff-files", "--name-only", "-z", "--ignore-submodules")
    return {p for p in out.split(b"\0") if p}


class StatRules(NamedTuple):
    """The settings git's ``ie_match_stat`` reads (read-cache.c): ``core.symlinks``
    (false: a symlink entry may be a plain file holding its target), ``core.fileMode``
    (false: the x bit is no change), ``core.trustCtime``, ``core.checkStat``
    (``minimal``: only mtime seconds and size)."""

    symlinks: bool = True
    file_mode: bool = True
    trust_ctime: bool = True
    check_stat: bool = True


def stat_rules(config: Mapping[str, str]) -> StatRules:
    """:class:`StatRules` from the repository's config (git's defaults where unset)."""
    return StatRules(
        config_bool(config.get("core.symlinks"), True),
        config_bool(config.get("core.filemode"), True),
        config_bool(config.get("core.trustctime"), True),
        (config.get("core.checkstat") or "default").lower() != "minimal",
    )


class Look(NamedTuple):
    """Where a switch looks: the work tree, its index file, the repository's object
    format, the threads its lstats run on and the stat rules of its config."""

    git: Git
    root_b: bytes
    index_path: Path
    hash_name: str
    threads: Threads
    rules: StatRules = StatRules()


def modified(look: Look, entries: list[ix.IndexEntry]) -> set[bytes]:
    """Which of ``entries`` differ in the work tree, as git's checkout decides it
    (unpack-trees.c verify_uptodate: ie_match_stat after a refresh): an absent file is
    no local change (git writes it again); stat data that matches (and is not racy)
    means clean; a changed x bit (``core.fileMode``) or kind means changed; otherwise
    git decides (``_by_content``)."""
    index_mtime = index_seconds(look)
    dirty: set[bytes] = set()
    suspects: list[ix.IndexEntry] = []
    promised: list[ix.IndexEntry] = []
    stats = _lstat_many(look.root_b, [e.path for e in entries], look.threads)
    for e, st in zip(entries, stats, strict=True):
        verdict = by_stat(e, st, index_mtime, look.rules)
        if verdict is True:
            dirty.add(e.path)
        elif verdict is None:
            (promised if _promised(e) else suspects).append(e)
    # An assume-unchanged or skip-worktree entry is not refreshed (read-cache.c
    # refresh_cache_ent marks it up to date): its stat data alone decides, as
    # verify_uptodate_1's ie_match_stat does (its racy content check included).
    return dirty | _by_content(look, suspects) | _by_git(look, promised, STAT_ALONE)


def racily_clean_changed(look: Look, entries: list[ix.IndexEntry]) -> set[bytes]:
    """Which of the ``entries`` a switch keeps git would smudge when it writes the index
    (read-cache.c ce_smudge_racily_clean_entry): racily clean ones (modified in the index
    file's second or later, a gitlink never) whose file still matches their stat data but
    not their content.  git records them with size 0, so that the next ``git status``
    sees the change once the new index is from a later second."""
    index_mtime = index_seconds(look)
    if not index_mtime:
        return set()
    # (an assume-unchanged or skip-worktree entry is marked up to date, never smudged)
    racy = [
        e
        for e in entries
        if e.mode != MODE_GITLINK and e.mtime_s >= index_mtime and not _promised(e)
    ]
    if not racy:
        return set()
    stats = _lstat_many(look.root_b, [e.path for e in racy], look.threads)
    same = [e for e, st in zip(racy, stats, strict=True) if _stat_matches(e, st, look.rules)]
    return _by_content(look, same)


def _stat_matches(e: ix.IndexEntry, st: os.stat_result | None, rules: StatRules) -> bool:
    """read-cache.c ce_match_stat_basic finds nothing changed, as git is usually built
    (without USE_NSEC: times in seconds; without USE_STDEV: no device)."""
    if st is None or _kind_changed(e.mode, st.st_mode, rules):
        return False
    c_s, _c_ns, m_s, _m_ns, _dev, ino, uid, gid, size = ix.fields_of_stat(st)
    if (e.mtime_s, e.size) != (m_s, size):
        return False
    if rules.check_stat and (e.ino, e.uid, e.gid) != (ino, uid, gid):
        return False
    return not (rules.check_stat and rules.trust_ctime and e.ctime_s != c_s)


def present_paths(look: Look, paths: list[bytes]) -> set[bytes]:
    """Which of ``paths`` exist in the work tree (any kind), as sparse-index.c path_found
    finds them: a path below an absent directory is not looked at (outside a sparse
    checkout's cone most directories are absent): the directories are looked at level by
    level, each level's in parallel, below those that are there."""
    parents = {p.rpartition(b"/")[0] for p in paths}
    dirs: set[bytes] = set()
    for d in parents:
        while d and d not in dirs:
            dirs.add(d)
            d = d.rpartition(b"/")[0]
    there = {b""}
    for depth in range(max((d.count(b"/") for d in dirs), default=-1) + 1):
        level = [d for d in dirs if d.count(b"/") == depth and d.rpartition(b"/")[0] in there]
        stats = _lstat_many(look.root_b, level, look.threads)
        there.update(d for d, st in zip(level, stats, strict=True) if _is_dir(st))
    maybe = [p for p in paths if p.rpartition(b"/")[0] in there]
    stats = _lstat_many(look.root_b, maybe, look.threads)
    return {p for p, st in zip(maybe, stats, strict=True) if st is not None}


def _is_dir(st: os.stat_result | None) -> bool:
    return st is not None and stat_mod.S_ISDIR(st.st_mode)


def index_seconds(look: Look) -> int:
    """The index file's mtime in seconds (git's racy-clean check compares with it)."""
    try:
        return os.stat(look.index_path).st_mtime_ns // ix.NS_PER_S
    except OSError:
        return 0


def by_stat(
    e: ix.IndexEntry, st: os.stat_result | None, index_mtime: int, rules: StatRules
) -> bool | None:
    """Whether ``e``'s file is changed by its stat data alone: True (changed), False
    (clean, and not racily so; or absent) or None (its content decides), as git's
    ce_match_stat_basic and match_stat_data (read-cache.c) decide."""
    if st is None:
        return False  # verify_uptodate_1: ENOENT is up to date
    if e.mode == MODE_GITLINK:
        return not stat_mod.S_ISDIR(st.st_mode)
    if _kind_changed(e.mode, st.st_mode, rules):
        return True
    c_s, c_ns, m_s, m_ns, _dev, ino, uid, gid, size = ix.fields_of_stat(st)
    recorded = [e.mtime_s, e.mtime_ns, e.size]
    seen = [m_s, m_ns, size]
    if rules.check_stat:
        recorded += [e.ino, e.uid, e.gid]
        seen += [ino, uid, gid]
        if rules.trust_ctime:
            recorded += [e.ctime_s, e.ctime_ns]
            seen += [c_s, c_ns]
    if recorded == seen and e.mtime_s < index_mtime:
        return False  # clean by stat data, and not racily so
    return None


def _kind_changed(entry_mode: int, st_mode: int, rules: StatRules) -> bool:
    """TYPE_CHANGED or MODE_CHANGED (ce_match_stat_basic): a symlink entry is a symlink,
    or a plain file where ``core.symlinks`` is false; a file entry is a regular file
    whose owner x bit matches where ``core.fileMode`` is true."""
    if entry_mode == MODE_SYMLINK:
        return not (stat_mod.S_ISLNK(st_mode) or (not rules.symlinks and stat_mod.S_ISREG(st_mode)))
    if not stat_mod.S_ISREG(st_mode):
        return True
    return rules.file_mode and bool((entry_mode ^ st_mode) & 0o100)


#: git's verdicts on a scratch index: ie_modified (stat data, then content), as its
#: checkout's refresh_cache asks it; ie_match_stat alone (diff-files without a refresh).
BY_CONTENT = ("ls-files", "-m", "-z", "--full-name")
STAT_ALONE = ("diff-files", "--name-only", "-z")


def _at_root(look: Look, env: Mapping[str, str] | None = None) -> Git:
    """``look.git`` run at the work tree's root (it may run in a subdirectory), where the
    paths it is given and prints are the index's."""
    git = look.git
    root = Path(os.fsdecode(look.root_b))
    env = git.env if env is None else env
    return Git(root, debug=git.debug, env=env, exe=git.exe, version=git.version)


def _promised(e: ix.IndexEntry) -> bool:
    """Assume-unchanged or skip-worktree: the user promised the file does not matter."""
    return bool(e.flags & ix.FLAG_ASSUME_VALID or e.extended_flags & SKIP)


def _by_content(look: Look, suspects: list[ix.IndexEntry]) -> set[bytes]:
    """Which of ``suspects`` git finds modified (read-cache.c ie_modified)."""
    return _by_git(look, suspects, BY_CONTENT)


def _by_git(look: Look, suspects: list[ix.IndexEntry], command: tuple[str, ...]) -> set[bytes]:
    """Which of ``suspects`` git's ``command`` lists, run over a scratch index holding just
    them, dated as the index is (its racy check compares with that date).  git compares
    with the index at hand: a path whose indexed blob has a CR is never converted under
    ``text=auto`` (convert.c has_crlf_in_index), which ``git hash-object`` (no index)
    would convert.  Assume-unchanged and skip-worktree bits are dropped there: git's
    checkout looks at those files too (verify_uptodate_1)."""
    if not suspects:
        return set()
    from dataclasses import replace  # (imported already: git/index.py built the entries)

    drop = ix.FLAG_ASSUME_VALID
    entries = [
        replace(e, flags=e.flags & ~drop, extended_flags=e.extended_flags & ~SKIP)
        if e.flags & drop or e.extended_flags & SKIP
        else e
        for e in suspects
    ]
    # Beside the index (the git dir, where a checkout writes anyway), not in /tmp.
    where = os.path.dirname(os.path.abspath(look.index_path))
    fd, copy = tempfile.mkstemp(prefix="pcheckout-modified-", dir=where)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(ix.encode_index(entries, version=3, hash_name=look.hash_name))
        with contextlib.suppress(OSError):  # (no index: nothing is racily clean)
            st = os.stat(look.index_path)
            os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
        env = dict(os.environ if look.git.env is None else look.git.env)
        env["GIT_INDEX_FILE"] = copy
        # (an fsmonitor would answer for the real index, not this one)
        args = ["-c", "core.fsmonitor=false", *command]
        proc = _at_root(look, env).run(*args, ok_codes=(0, GitDiedError.exit_code))
    finally:
        os.unlink(copy)
    if proc.returncode:  # git's checkout dies of it too (a clean filter that fails)
        message = proc.stderr.decode("utf-8", "backslashreplace").strip().splitlines()
        raise GitDiedError(message[-1].removeprefix("fatal: ") if message else "git died")
    return {p for p in proc.stdout.split(b"\0") if p}


def content_oids(look: Look, paths: list[bytes], links: Collection[bytes]) -> dict[bytes, str]:
    """The blob id each path's work-tree content would be stored as (a symlink's target
    for those in ``links``; a file through ``git hash-object``, so clean filters and eol
    apply); a path that cannot be read is left out."""
    oids: dict[bytes, str] = {}
    files = []
    for path in paths:
        if path in links:
            try:
                oids[path] = blob_oid(os.readlink(full_path(look.root_b, path)), look.hash_name)
            except OSError:
                continue
        else:
            files.append(path)
    plain = [p for p in files if b"\n" not in p]
    if plain:
        out = look.git.out("hash-object", "--stdin-paths", input=b"".join(p + b"\n" for p in plain))
        oids.update(zip(plain, (o.decode() for o in out.split()), strict=True))
    for path in files:
        if b"\n" in path:
            oids[path] = look.git.out("hash-object", "--", os.fsdecode(path)).strip().decode()
    return oids


class Way(NamedTuple):
    """What a checkout writes, for the check of what is in its way."""

    write: list[bytes]  # the paths it writes
    delete: Collection[bytes] = ()  # tracked paths it removes first
    tracked: Collection[bytes] = ()  # the index's paths
    target: Mapping[bytes, Entry] = {}  # the entries it writes, by path
    #: with --force a tracked path it writes is looked at too (a directory there may hold
    #: untracked files; without --force it is a local change already)
    force: bool = False
    gitlinks: Collection[bytes] = ()  # tracked paths that are gitlinks (their own checks)
    #: with ``core.ignorecase``, the index's entries by their folded path, for git's rule
    #: that a file found under another spelling of a tracked entry, whose stat data (or
    #: content) it has, is that entry's, not an untracked file (unpack-trees.c
    #: ``check_ok_to_remove`` -> ``icase_exists``)
    folded: Mapping[bytes, ix.IndexEntry] | None = None


def refuse_untracked_in_the_way(look: Look, way: Way) -> list[bytes]:
    """Untracked files in the way of what the checkout writes refuse it: pcheckout never
    deletes or overwrites them.  Ignored ones do not: git's checkout overwrites them
    (unpack-trees.c check_ok_to_remove: is_excluded), a directory holding nothing else
    too (verify_clean_subdirectory).  Returned: the paths in the way to remove before
    writing (files, and directories whole)."""
    gone = set(way.delete)
    obstacles: list[tuple[bytes, list[bytes]]] = []  # (path, the untracked files it holds)
    checked_dirs: dict[bytes, bool] = {}
    looked = _look_up(look, way)
    theirs = _Spelled(look, way.folded)
    for path in way.write:
        # leading directories must be real directories, or absent, or tracked files we delete
        parts = path.split(b"/")
        for k in range(1, len(parts)):
            d = b"/".join(parts[:k])
            if d not in checked_dirs:
                st = looked[d]
                checked_dirs[d] = _dir_ok(st, d in gone) or theirs.tracked(d, st)
                if not checked_dirs[d]:
                    obstacles.append((d, [d]))
        if path in looked and path not in way.gitlinks and not theirs.tracked(path, looked[path]):
            got = _in_the_way(look.root_b, path, looked[path], way)
            if got is not None:
                obstacles.append((path, got))
    if not obstacles:
        return []
    held = [f for _path, files in obstacles for f in files]
    kept = set(held) - ignored(_at_root(look), held)
    if kept:
        note = " (pcheckout never removes untracked files, even with --force)"
        raise UntrackedInTheWayError(refusal(UNTRACKED, sorted(kept)) + note * way.force)
    return sorted({path for path, _files in obstacles})


class _Spelled:
    """git's ``icase_exists``: a file found at a path the index does not have is a tracked
    entry's, found under another spelling, if the index has the path in another case
    and its stat data matches the file (ie_match_stat: racily clean, its content)."""

    def __init__(self, look: Look, folded: Mapping[bytes, ix.IndexEntry] | None) -> None:
        self.look = look
        self.folded = folded
        self.index_mtime: int | None = None

    def tracked(self, path: bytes, st: os.stat_result | None) -> bool:
        if self.folded is None or st is None or stat_mod.S_ISDIR(st.st_mode):
            return False
        e = self.folded.get(path.lower())
        if e is None or e.path == path:
            return False
        if self.index_mtime is None:
            self.index_mtime = index_seconds(self.look)
        verdict = by_stat(e, st, self.index_mtime, self.look.rules)
        if verdict is None:
            verdict = bool(_by_content(self.look, [e]))
        return verdict is False


def folded_index(entries: Iterable[ix.IndexEntry]) -> dict[bytes, ix.IndexEntry]:
    """The index's entries by their path folded as ``core.ignorecase`` folds it (ASCII),
    the first in index order for each (name-hash.c ``index_file_exists``)."""
    folded: dict[bytes, ix.IndexEntry] = {}
    for e in entries:
        folded.setdefault(e.path.lower(), e)
    return folded


def _dir_ok(st: os.stat_result | None, deleted: bool) -> bool:
    """Whether a leading directory of a path to write is no obstacle: absent, a real
    directory, or a tracked file the switch deletes."""
    if st is None:
        return True
    if stat_mod.S_ISLNK(st.st_mode):
        return deleted
    return stat_mod.S_ISDIR(st.st_mode) or deleted


def _in_the_way(
    root_b: bytes, path: bytes, st: os.stat_result | None, way: Way
) -> list[bytes] | None:
    """What writing ``path`` would overwrite (None: nothing): an untracked file there, or
    a directory where a file goes, with the untracked files in it (a tracked one that
    stays makes it untouchable: it is listed as if untracked).  A gitlink's directory is
    fine."""
    if st is None:
        return None
    if not stat_mod.S_ISDIR(st.st_mode):
        return None if path in way.tracked else [path]
    if way.target[path].mode == MODE_GITLINK:
        return None
    below = path + b"/"
    staying = [p for p in way.tracked if p.startswith(below) and p not in way.delete]
    return _untracked_below(root_b, path, way.tracked) + staying


def _look_up(look: Look, way: Way) -> dict[bytes, os.stat_result | None]:
    """lstat of every leading directory of what is written and of each new path that is
    not tracked (with --force, of every path written): what the check of what is in the
    way needs, asked in parallel."""
    wanted: dict[bytes, None] = {}
    for path in way.write:
        d = path.rpartition(b"/")[0]
        chain = []
        while d and d not in wanted:
            chain.append(d)
            d = d.rpartition(b"/")[0]
        wanted.update(dict.fromkeys(reversed(chain)))
        if way.force or path not in way.tracked:
            wanted[path] = None
    paths = list(wanted)
    return dict(zip(paths, _lstat_many(look.root_b, paths, look.threads), strict=True))


def _untracked_below(root_b: bytes, d: bytes, tracked: Collection[bytes]) -> list[bytes]:
    found: list[bytes] = []
    for dirpath, dirnames, filenames in os.walk(full_path(root_b, d)):
        rel = os.path.relpath(dirpath, root_b)
        for name in filenames + [n for n in dirnames if os.path.islink(os.path.join(dirpath, n))]:
            p = os.path.join(rel, name)
            if p not in tracked:
                found.append(p)
    return found
