"""Sparse checkout: which tree entries are in the working tree, decided as git decides.

Where things live (git's ``dir.c: get_sparse_checkout_filename()``, ``environment.c``):

* ``core.sparseCheckout`` turns it on, ``core.sparseCheckoutCone`` (false when unset) picks
  cone matching; ``git sparse-checkout set`` writes both to ``config.worktree``, which
  ``git config --list`` merges in (so :func:`pcheckout.git.config.read_config` sees them).
* The patterns are the worktree's own ``info/sparse-checkout``, in its own git dir
  (what ``git rev-parse --git-path info/sparse-checkout`` names); no file means a full checkout
  (``unpack-trees.c: populate_from_existing_patterns()``).

The decision walks each path's directories top-down as ``unpack-trees.c:
clear_ce_flags_1()`` / ``clear_ce_flags_dir()`` do:

* cone mode (``dir.c: add_pattern_to_hashsets()``, ``path_matches_pattern_list()``): a
  directory that is recursively in takes everything below it, one that is out takes
  nothing, otherwise each file decides: top-level files are always in, files whose
  directory is a "parent" are in, files below a recursive directory are in;
* non-cone mode (gitignore syntax): a directory's match only sets the default for what
  is below it; every file is matched on its own, the last matching pattern wins, and an
  undecided path inherits its directory's result (out at the top).

A pattern cone mode does not recognize makes git warn ("unrecognized pattern", then
"disabling cone pattern matching") and match all lines in non-cone mode; so does this.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pcheckout.git.config import config_bool
from pcheckout.git.index import (
    EXT_FLAG_SKIP_WORKTREE,
    MODE_SPARSE_DIR,
    NO_STAT,
    IndexEntry,
    sort_key,
)
from pcheckout.git.runner import Git
from pcheckout.git.tree import Entry, list_tree

__all__ = [
    "Pattern",
    "Sparsity",
    "expand_sparse_directories",
    "from_patterns",
    "load",
    "parse",
    "pattern_file",
    "split",
]

# dir.c pattern_match_result
UNDECIDED, NOT_MATCHED, MATCHED, MATCHED_RECURSIVE = -1, 0, 1, 2
# dir.h PATTERN_FLAG_*
FLAG_NODIR, FLAG_ENDSWITH, FLAG_MUSTBEDIR, FLAG_NEGATIVE = 1, 4, 8, 16
#: internal: a cone-mode directory that is out together with everything below it
_OUT_BELOW = 3
#: wildmatch's special characters (dir.c is_glob_special without the pathspec magic)
GLOB_SPECIAL = b"*?[\\"
#: Mode of a gitlink (ce_to_dtype: a gitlink is a directory to the matcher)
_MODE_GITLINK = 0o160000


@dataclass(frozen=True)
class Pattern:
    """One line of the pattern file as ``dir.c: parse_path_pattern()`` leaves it."""

    text: bytes  # without "!" and a trailing "/"
    flags: int
    regex: re.Pattern[bytes]


def _translate(pattern: bytes, pathname: bool) -> bytes:
    """A regular expression for wildmatch(pattern) (wildmatch.c).  With ``pathname``
    (WM_PATHNAME) ``*`` and ``?`` stop at "/" and ``**`` between slashes (or at an
    end) crosses directories; without it ``*`` matches anything."""
    out: list[bytes] = []
    i, n = 0, len(pattern)
    star_any = b".*"
    star_seg = b"[^/]*" if pathname else b".*"
    one = b"[^/]" if pathname else b"."
    while i < n:
        c = pattern[i : i + 1]
        if c == b"\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1 : i + 2]))
            i += 2
        elif c == b"*":
            j = i
            while j < n and pattern[j : j + 1] == b"*":
                j += 1
            double = j - i >= 2
            at_start = i == 0 or pattern[i - 1 : i] == b"/"
            at_end = j == n or pattern[j : j + 1] == b"/"
            if pathname and double and at_start and at_end:
                if j < n:  # "**/": zero or more whole directories
                    out.append(b"(?:.*/)?")
                    j += 1
                else:
                    out.append(star_any)
            else:
                out.append(star_seg)
            i = j
        elif c == b"?":
            out.append(one)
            i += 1
        elif c == b"[":
            cls, i = _bracket(pattern, i + 1, pathname)
            if cls is None:  # unterminated: wildmatch fails the whole match
                return b"(?!)"
            out.append(cls)
        else:
            out.append(re.escape(c))
            i += 1
    return b"".join(out)


#: POSIX classes wildmatch knows inside brackets
_CLASSES = {
    b"alnum": b"a-zA-Z0-9",
    b"alpha": b"a-zA-Z",
    b"blank": b" \\t",
    b"cntrl": b"\\x00-\\x1f\\x7f",
    b"digit": b"0-9",
    b"graph": b"!-~",
    b"lower": b"a-z",
    b"print": b" -~",
    b"punct": b"!-/:-@\\[-`{-~",
    b"space": b" \\t\\n\\r\\f\\v",
    b"upper": b"A-Z",
    b"xdigit": b"0-9a-fA-F",
}


def _bracket(pattern: bytes, i: int, pathname: bool) -> tuple[bytes | None, int]:
    """The regex class for the bracket expression starting after "[" at ``i``, and
    the index after its "]" (None when it is not closed)."""
    n = len(pattern)
    negate = i < n and pattern[i : i + 1] in (b"!", b"^")
    if negate:
        i += 1
    parts: list[bytes] = []
    first = True
    while i < n:
        c = pattern[i : i + 1]
        if c == b"]" and not first:
            head = b"[^/" if negate and pathname else b"[^" if negate else b"["
            return head + b"".join(parts) + b"]", i + 1
        first = False
        if c == b"\\" and i + 1 < n:
            parts.append(re.escape(pattern[i + 1 : i + 2]))
            i += 2
        elif c == b"[" and pattern[i + 1 : i + 2] == b":":
            end = pattern.find(b":]", i + 2)
            if end < 0:
                return None, n
            parts.append(_CLASSES.get(pattern[i + 2 : end], b""))
            i = end + 2
        elif c == b"-" and parts and i + 1 < n and pattern[i + 1 : i + 2] != b"]":
            parts.append(b"-")
            i += 1
        else:
            parts.append(re.escape(c))
            i += 1
    return None, n


def _parse_line(line: bytes, ignore_case: bool) -> Pattern:
    """dir.c parse_path_pattern(): "!" negates, a trailing "/" means directories only,
    no "/" at all means the basename is matched (NODIR)."""
    flags = 0
    if line.startswith(b"!"):
        flags |= FLAG_NEGATIVE
        line = line[1:]
    if line.endswith(b"/") and len(line) > 0:
        flags |= FLAG_MUSTBEDIR
        line = line[:-1]
    if b"/" not in line:
        flags |= FLAG_NODIR
    if line.startswith(b"*") and not any(ch in GLOB_SPECIAL for ch in line[1:]):
        flags |= FLAG_ENDSWITH
    text = line
    if flags & FLAG_NODIR:
        rx = _translate(text, pathname=False)  # match_basename: fnmatch without WM_PATHNAME
    else:
        body = text[1:] if text.startswith(b"/") else text  # match_pathname drops a leading "/"
        rx = _translate(body, pathname=True)
    return Pattern(text, flags, re.compile(rx, re.DOTALL | (re.IGNORECASE if ignore_case else 0)))


def _trim_trailing_spaces(line: bytes) -> bytes:
    """dir.c trim_trailing_spaces(): unescaped trailing spaces go."""
    last_space = -1
    i = 0
    while i < len(line):
        ch = line[i : i + 1]
        if ch == b" ":
            if last_space < 0:
                last_space = i
        elif ch == b"\\":
            i += 1
            if i >= len(line):
                return line
            last_space = -1
        else:
            last_space = -1
        i += 1
    return line[:last_space] if last_space >= 0 else line


def _lines(data: bytes) -> list[bytes]:
    """dir.c add_patterns_from_buffer(): BOM, "#" comments, empty lines, CR LF."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    out = []
    for raw in data.split(b"\n"):
        if not raw or raw.startswith(b"#"):
            continue
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        line = _trim_trailing_spaces(raw)
        if line:
            out.append(line)
    return out


def _unescape(text: bytes) -> bytes:
    """dir.c dup_and_filter_pattern(): backslashes go; a trailing "/*" is cut."""
    out = re.sub(rb"\\(.)", rb"\1", text, flags=re.DOTALL)
    if len(out) > 2 and out.endswith(b"/*"):
        out = out[:-2]
    return out


@dataclass
class Sparsity:
    """The sparse-checkout rules of one worktree.  ``includes(path, mode)`` says
    whether a tree entry is written; everything else goes in the index with the
    skip-worktree bit."""

    patterns: list[Pattern]
    cone: bool
    ignore_case: bool = False
    full_cone: bool = False
    recursive: set[bytes] = field(default_factory=set)  # "/a/b" (cone: all below is in)
    parents: set[bytes] = field(default_factory=set)  # "/a" (cone: files directly in it)
    warnings: list[str] = field(default_factory=list)  # git's warning texts, in order
    sparse_index: bool = False  # index.sparse in cone mode: git keeps the index collapsed
    _dirs: dict[bytes, int] = field(default_factory=dict, repr=False)

    # -- the matcher ---------------------------------------------------------------
    def _key(self, path: bytes) -> bytes:
        return path.lower() if self.ignore_case else path

    def _match_cone(self, path: bytes) -> int:
        """dir.c path_matches_pattern_list() with use_cone_patterns."""
        if self.full_cone:
            return MATCHED
        slashed = self._key(b"/" + path)
        if slashed in self.recursive:
            return MATCHED_RECURSIVE
        parent = slashed.rpartition(b"/")[0]
        if not parent:
            return MATCHED  # top-level: "include every file in root"
        if parent in self.parents:
            return MATCHED
        while parent:
            if parent in self.recursive:
                return MATCHED_RECURSIVE
            parent = parent.rpartition(b"/")[0]
        return NOT_MATCHED

    def _match_list(self, path: bytes, is_dir: bool) -> int:
        """dir.c last_matching_pattern_from_list(): the last matching line decides."""
        basename = path.rpartition(b"/")[2]
        for p in reversed(self.patterns):
            if p.flags & FLAG_MUSTBEDIR and not is_dir:
                continue
            subject = basename if p.flags & FLAG_NODIR else path
            if p.regex.fullmatch(subject):
                return NOT_MATCHED if p.flags & FLAG_NEGATIVE else MATCHED
        return UNDECIDED

    def _match(self, path: bytes, is_dir: bool) -> int:
        return self._match_cone(path) if self.cone else self._match_list(path, is_dir)

    def _dir_default(self, d: bytes) -> int:
        """What directory ``d`` hands down: MATCHED_RECURSIVE (all in) or NOT_MATCHED in
        cone mode end the walk; otherwise the default for undecided paths below."""
        got = self._dirs.get(d)
        if got is not None:
            return got
        parent = d.rpartition(b"/")[0]
        default = self._dir_default(parent) if parent else NOT_MATCHED
        if self.cone and parent and default in (MATCHED_RECURSIVE, _OUT_BELOW):
            result = default  # decided above: clear_ce_flags_dir never looks further
        else:
            r = self._match(d, True)
            if self.cone and r == NOT_MATCHED:
                result = _OUT_BELOW  # out, whatever lies below
            elif r == UNDECIDED:
                result = default
            else:
                result = r
        self._dirs[d] = result
        return result

    def includes(self, path: bytes, mode: int = 0o100644) -> bool:
        """Is the entry at ``path`` in the sparse checkout (written, no skip-worktree)?"""
        parent = path.rpartition(b"/")[0]
        default = self._dir_default(parent) if parent else NOT_MATCHED
        if self.cone and default == MATCHED_RECURSIVE:
            return True
        if self.cone and default == _OUT_BELOW:
            return False
        r = self._match(path, mode == _MODE_GITLINK)
        if r == UNDECIDED:
            r = default
        return r in (MATCHED, MATCHED_RECURSIVE)

    def select(self, entries: Iterable[tuple[bytes, int]]) -> list[bool]:
        """``includes`` for each ``(path, mode)``."""
        return [self.includes(p, m) for p, m in entries]

    def split_entries(
        self, entries: Sequence[Entry], todo: Iterable[int]
    ) -> tuple[list[int], list[bool]]:
        """``includes`` for ``entries[i]``, i in ``todo``: the indexes of those in, and per
        entry of ``entries`` whether it is out (recorded with skip-worktree only).  In cone
        mode a directory wholly in or out decides once for the run of entries directly
        in it (tree order keeps them together): ~4000 of a cone's entries are out."""
        skip = [False] * len(entries)
        wanted: list[int] = []
        append = wanted.append
        last: bytes | None = None
        verdict: bool | None = None  # the directory's answer; None: each entry decides
        for i in todo:
            e = entries[i]
            path = e[0]
            parent = path.rpartition(b"/")[0]
            if parent != last:
                last = parent
                default = self._dir_default(parent) if parent else NOT_MATCHED
                verdict = None
                if self.cone and default == MATCHED_RECURSIVE:
                    verdict = True
                elif self.cone and default == _OUT_BELOW:
                    verdict = False
            if verdict if verdict is not None else self.includes(path, e[1]):
                append(i)
            else:
                skip[i] = True
        return wanted, skip


def parse(data: bytes, *, cone: bool, ignore_case: bool = False) -> Sparsity:
    """The rules in pattern-file ``data``; cone mode falls back to non-cone (with
    git's warnings) on a line it does not recognize."""
    lines = _lines(data)
    patterns = [_parse_line(line, ignore_case) for line in lines]
    sp = Sparsity(patterns, cone, ignore_case)
    if cone:
        _build_cone(sp)
    return sp


def _build_cone(sp: Sparsity) -> None:
    """dir.c add_pattern_to_hashsets(), line by line, warnings included."""

    def give_up() -> None:
        sp.warnings.append("disabling cone pattern matching")
        sp.cone = False
        sp.recursive.clear()
        sp.parents.clear()

    for p in sp.patterns:
        text = p.text
        negative = bool(p.flags & FLAG_NEGATIVE)
        mustbedir = bool(p.flags & FLAG_MUSTBEDIR)
        shown = text.decode("utf-8", "backslashreplace")
        if negative and mustbedir and text == b"/*":
            sp.full_cone = False
            continue
        if not negative and not mustbedir and text == b"/*":
            sp.full_cone = True
            continue
        if (
            len(text) < 2
            or text.startswith(b"*")
            or b"**" in text
            or not mustbedir  # not a directory: no cone pattern (git 2.39 checks this too)
            or not text.startswith(b"/")  # cone patterns are anchored
        ):
            sp.warnings.append(f"unrecognized pattern: '{shown}'")
            give_up()
            return
        bad = False
        for k in range(1, len(text)):
            cur = text[k : k + 1]
            if cur not in (b"*", b"?", b"[", b"\\"):
                continue
            prev = text[k - 1 : k]
            nxt = text[k + 1 : k + 2]
            if prev == b"\\":
                continue
            if cur == b"\\" and nxt and nxt in (b"*", b"?", b"[", b"\\"):
                continue
            if prev == b"/" and cur == b"*" and not nxt:
                continue
            bad = True
            break
        if bad:
            sp.warnings.append(f"unrecognized pattern: '{shown}'")
            give_up()
            return
        if len(text) > 2 and text.endswith(b"/*"):
            if not negative:
                sp.warnings.append(f"unrecognized pattern: '{shown}'")
                give_up()
                return
            key = sp._key(_unescape(text))
            if key not in sp.recursive:
                sp.warnings.append(f"unrecognized negative pattern: '{shown}'")
                give_up()
                return
            sp.parents.add(key)
            sp.recursive.discard(key)
            continue
        if negative:
            sp.warnings.append(f"unrecognized negative pattern: '{shown}'")
            give_up()
            return
        key = sp._key(_unescape(text))
        sp.recursive.add(key)
        if key in sp.parents:
            sp.warnings.append(
                f"your sparse-checkout file may have issues: pattern '{shown}' is repeated"
            )
            give_up()  # verified on git 2.39.5: a repeated pattern disables cone mode
            return


def load(
    git: Git, config: Mapping[str, str], git_dir: str | os.PathLike[str] | None = None
) -> Sparsity | None:
    """The worktree's sparse-checkout rules, or None for a full checkout
    (core.sparseCheckout off, or no pattern file).  ``git_dir``: the worktree's own git
    dir (``rev-parse --git-dir``), where git keeps the pattern file; without it git is
    asked (``rev-parse --git-path``: a git process, ~50 ms on the 1 ms latency filesystem)."""
    if not config_bool(config.get("core.sparsecheckout"), False):
        return None
    if git_dir is not None:
        path = pattern_file(git_dir)
    else:
        out = git.out("rev-parse", "--git-path", "info/sparse-checkout").rstrip(b"\n")
        path = out if os.path.isabs(out) else os.fsencode(git.cwd) + b"/" + out
    return from_patterns(config, _read_patterns(path))


def _read_patterns(path: bytes) -> bytes | None:
    """The pattern file's bytes; None if it cannot be read (a full checkout, as git)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def from_patterns(config: Mapping[str, str], data: bytes | None) -> Sparsity | None:
    """:func:`load` for a pattern file already read (``data``; None: there is none)."""
    if data is None or not config_bool(config.get("core.sparsecheckout"), False):
        return None
    cone = config_bool(config.get("core.sparsecheckoutcone"), False)
    sp = parse(data, cone=cone, ignore_case=config_bool(config.get("core.ignorecase"), False))
    sp.sparse_index = sp.cone and config_bool(config.get("index.sparse"), False)
    return sp


def pattern_file(git_dir: str | os.PathLike[str]) -> bytes:
    """``git rev-parse --git-path info/sparse-checkout`` without a git process: the file is
    per worktree (``path.c: common_list[]`` excepts it from the shared ``info/``, and no
    environment variable moves it), so it is in the worktree's own git dir."""
    return os.path.join(os.fsencode(git_dir), b"info", b"sparse-checkout")


def split(
    entries: Sequence[tuple[bytes, int]], sparsity: Sparsity | None
) -> tuple[list[int], list[int]]:
    """Indexes of the entries written and of those only recorded (skip-worktree)."""
    if sparsity is None:
        return list(range(len(entries))), []
    inside: list[int] = []
    outside: list[int] = []
    for k, (path, mode) in enumerate(entries):
        (inside if sparsity.includes(path, mode) else outside).append(k)
    return inside, outside


def expand_sparse_directories(git: Git, entries: Sequence[IndexEntry]) -> list[IndexEntry]:
    """A sparse index's entries with every sparse-directory entry (mode 040000, path
    ending in "/") replaced by the files of its tree, each skip-worktree with zero stat
    data, as git's ``sparse-index.c: ensure_full_index()`` expands them (one
    ``ls-tree`` per directory, run side by side)."""
    dirs = [e for e in entries if e.mode == MODE_SPARSE_DIR]
    if not dirs:
        return list(entries)

    def expand(d: IndexEntry) -> list[IndexEntry]:
        return [
            IndexEntry(
                d.path + t.path,
                t.mode,
                bytes.fromhex(t.oid),
                *NO_STAT,
                extended_flags=EXT_FLAG_SKIP_WORKTREE,
            )
            for t in list_tree(git, d.oid.hex())
        ]

    with ThreadPoolExecutor(max_workers=min(EXPAND_THREADS, len(dirs))) as pool:
        expanded = dict(zip((d.path for d in dirs), pool.map(expand, dirs), strict=True))
    out: list[IndexEntry] = []
    for e in entries:
        if e.mode == MODE_SPARSE_DIR:
            out.extend(expanded[e.path])
        else:
            out.append(e)
    out.sort(key=sort_key)
    return out


#: ls-tree processes run side by side to expand a sparse index (each is a git start-up,
#: tens of round trips on a network mount before it answers).
EXPAND_THREADS = 8
