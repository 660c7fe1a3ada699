"""Which paths git's checkout converts, and how: decided per path, as ``convert.c`` does.

Conversion (eol/text/crlf, ident, working-tree-encoding, filter drivers) is
driven by attributes and a little config.  Three steps, cheapest first:

1. ``conversion_sources``: can anything set an attribute at all (a
   ``.gitattributes`` in the tree, ``$GIT_DIR/info/attributes``, the global
   or system file, ``core.autocrlf=true``)?  If not, every blob is written as
   stored and no git process is asked anything (the common case pays nothing).
2. ``read_attributes``: one ``git check-attr --stdin -z`` for every path to
   write, the attributes read from the tree being written (``--source`` on
   git >= 2.40; on older gits a temporary index holding the tree's
   ``.gitattributes`` and ``--cached``), so no working tree is consulted.
3. ``classify``: ``convert.c: convert_attrs()`` on those values and the
   config, giving ``None`` (the bytes cannot change: written from the plain
   ``cat-file --batch``) or a :class:`Conversion`.  Filter drivers and
   working-tree encodings go to git's ``cat-file --filters``; ident and CRLF
   are done here, byte for byte as git's checkout does them (see
   :meth:`Conversion.apply`), which needs no git process per path.
"""

from __future__ import annotations

import enum
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

from pcheckout.errors import GitError
from pcheckout.git.config import config_bool, parse_bool
from pcheckout.git.promisor import fetch, missing_objects
from pcheckout.git.runner import GIT_CHECK_ATTR_SOURCE, Git, Repo
from pcheckout.git.tree import MODE_EXEC, MODE_FILE, Entry

GITATTRIBUTES = b".gitattributes"

#: The attributes ``convert.c: convert_attrs()`` reads (order is ours).
CONVERT_ATTRS = ("text", "eol", "crlf", "ident", "filter", "working-tree-encoding")
#: The attributes ``archive.c: get_archive_attrs()`` reads.
ARCHIVE_ATTRS = ("export-ignore", "export-subst")

#: An attribute's state as check-attr prints it: None (unspecified), True
#: (set), False (unset) or the value.  check-attr prints a value of "set",
#: "unset" or "unspecified" exactly as those states, so such values are read
#: as the states (git's own output cannot tell them apart).
AttrValue = bool | str | None


def is_gitattributes(path: bytes) -> bool:
    return path == GITATTRIBUTES or path.endswith(b"/" + GITATTRIBUTES)


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
) -> list[str]:
    """Where attributes or eol settings could come from (empty: nothing converts).

    ``core.autocrlf=input`` converts only when adding, and ``core.eol`` or
    ``filter.*`` alone select nothing without an attribute, so they are not
    sources here (``classify`` still reads them for the paths that have one)."""
    env = os.environ if environ is None else environ
    sources: list[str] = []
    # One join and two searches in C: a Python call per entry was ~70 ms for 40k entries
    # (load ~14) before git's writer could start.
    joined = b"\0" + b"\0".join(map(attrgetter("path"), entries)) + b"\0"
    if b"\0" + GITATTRIBUTES + b"\0" in joined or b"/" + GITATTRIBUTES + b"\0" in joined:
        sources.append("the tree has .gitattributes")
    if autocrlf(config) == "true":
        sources.append("core.autocrlf=true")
    if _nonempty(common_dir / "info" / "attributes"):
        sources.append("$GIT_DIR/info/attributes exists")
    glob = _global_attributes_file(config, env)
    if glob is not None and _nonempty(glob):
        sources.append(f"global attributes file {glob}")
    system = Path("/etc/gitattributes")
    if not config_bool(env.get("GIT_ATTR_NOSYSTEM"), False) and _nonempty(system):
        sources.append(f"system attributes file {system}")
    return sources


#: The old name (checkout and switch call it until they move to plan_conversion).
conversion_reasons = conversion_sources


# -- config -------------------------------------------------------------------
def autocrlf(config: Mapping[str, str]) -> str:
    """``core.autocrlf`` as git reads it (config.c): "input", "true" or "false"."""
    value = config.get("core.autocrlf")
    if value is None:
        return "false"
    if value.lower() == "input":
        return "input"
    return "true" if parse_bool("core.autocrlf", value) else "false"


def core_eol(config: Mapping[str, str]) -> str:
    """``core.eol``: "lf", "crlf", "native" or "unset" (anything else)."""
    value = (config.get("core.eol") or "").lower()
    return value if value in ("lf", "crlf", "native") else "unset"


class Driver(NamedTuple):
    """``filter.<name>.*`` (convert.c: read_convert_config)."""

    name: str
    smudge: str | None = None
    clean: str | None = None
    process: str | None = None
    required: bool = False

    @property
    def applies(self) -> bool:
        """apply_filter() runs a command on checkout (``cmd && *cmd``)."""
        return bool(self.process) or bool(self.smudge)


def drivers(config: Mapping[str, str]) -> dict[str, Driver]:
    """Every configured driver; any ``filter.<name>.<key>`` makes one exist."""
    found: dict[str, Driver] = {}
    for key, value in config.items():
        if not key.startswith("filter."):
            continue
        name, dot, var = key[len("filter.") :].rpartition(".")
        if not dot or not name:
            continue
        drv = found.get(name) or Driver(name)
        if var == "smudge":
            drv = drv._replace(smudge=value)
        elif var == "clean":
            drv = drv._replace(clean=value)
        elif var == "process":
            drv = drv._replace(process=value)
        elif var == "required":
            drv = drv._replace(required=config_bool(value, False))
        found[name] = drv
    return found


class Settings(NamedTuple):
    """The config convert.c consults besides attributes."""

    autocrlf: str = "false"  # "false" | "true" | "input"
    eol: str = "unset"  # core.eol
    drivers: Mapping[str, Driver] = {}  # noqa: RUF012 (a read-only Mapping, never mutated)

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> Settings:
        return cls(autocrlf(config), core_eol(config), drivers(config))

    def text_eol_is_crlf(self) -> bool:
        """convert.c: text_eol_is_crlf() (native is LF on every platform we run on)."""
        if self.autocrlf == "true":
            return True
        if self.autocrlf == "input":
            return False
        return self.eol == "crlf"


# -- classification -------------------------------------------------------------
class Crlf(enum.Enum):
    """convert.c: enum convert_crlf_action."""

    UNDEFINED = 0
    BINARY = 1
    TEXT = 2
    TEXT_INPUT = 3
    TEXT_CRLF = 4
    AUTO = 5
    AUTO_INPUT = 6
    AUTO_CRLF = 7


_AUTO = frozenset({Crlf.AUTO, Crlf.AUTO_INPUT, Crlf.AUTO_CRLF})


def _check_crlf(value: AttrValue) -> Crlf:
    """convert.c: git_path_check_crlf()."""
    if value is True:
        return Crlf.TEXT
    if value is False:
        return Crlf.BINARY
    if value == "input":
        return Crlf.TEXT_INPUT
    if value == "auto":
        return Crlf.AUTO
    return Crlf.UNDEFINED


def _utf8(name: str) -> bool:
    return name.lower() in ("utf-8", "utf8")


def crlf_action(values: Sequence[AttrValue], settings: Settings) -> Crlf:
    """convert.c: convert_attrs()'s crlf_action for ``values`` in CONVERT_ATTRS order."""
    text, eol, crlf = values[0], values[1], values[2]
    action = _check_crlf(text)
    if action is Crlf.UNDEFINED:
        action = _check_crlf(crlf)
    if action is not Crlf.BINARY:
        if action is Crlf.AUTO and eol == "lf":
            action = Crlf.AUTO_INPUT
        elif action is Crlf.AUTO and eol == "crlf":
            action = Crlf.AUTO_CRLF
        elif eol == "lf":
            action = Crlf.TEXT_INPUT
        elif eol == "crlf":
            action = Crlf.TEXT_CRLF
    if action is Crlf.TEXT:
        action = Crlf.TEXT_CRLF if settings.text_eol_is_crlf() else Crlf.TEXT_INPUT
    if action is Crlf.UNDEFINED:
        action = {"true": Crlf.AUTO_CRLF, "input": Crlf.AUTO_INPUT}.get(
            settings.autocrlf, Crlf.BINARY
        )
    return action


def _output_crlf(action: Crlf, settings: Settings) -> bool:
    """convert.c: output_eol(action) == EOL_CRLF."""
    if action in (Crlf.TEXT_CRLF, Crlf.AUTO_CRLF, Crlf.UNDEFINED):
        return True
    if action in (Crlf.TEXT, Crlf.AUTO):
        return settings.text_eol_is_crlf()
    return False


class Conversion(NamedTuple):
    """What checkout does to one path's bytes (shared by paths with equal attributes)."""

    action: Crlf
    to_crlf: bool  # LF may become CRLF
    ident: bool
    driver: str | None  # a configured filter driver that applies (or is required)
    encoding: str | None  # working-tree-encoding other than UTF-8
    streamable: bool  # convert.c: classify_conv_attrs() == CA_CLASS_STREAMABLE
    reasons: tuple[str, ...]

    @property
    def by_git(self) -> bool:
        """Filter drivers and encodings are git's to apply (cat-file --filters)."""
        return self.driver is not None or self.encoding is not None

    def describe(self) -> str:
        """What converts it, for messages: "filter 'lfs'", "working-tree-encoding 'UTF-16'"."""
        parts = []
        if self.driver is not None:
            parts.append(f"filter '{self.driver}'")
        if self.encoding is not None:
            parts.append(f"working-tree-encoding '{self.encoding}'")
        return ", ".join(parts) or ", ".join(self.reasons)

    def apply(self, data: bytes, oid: str) -> bytes:
        """The working-tree bytes of blob ``oid`` holding ``data`` (not ``by_git``).

        git's checkout (entry.c: write_entry) streams a streamable path through
        ``convert.c``'s stream filters (ident_filter, lf_to_crlf_filter) and
        converts the rest in core (ident_to_worktree, crlf_to_worktree); the two
        ident implementations differ on malformed keywords, so both are here."""
        if self.ident:
            data = ident_stream(data, oid) if self.streamable else ident_incore(data, oid)
        if self.to_crlf:
            if self.action in _AUTO and not auto_converts(data):
                return data
            data = lf_to_crlf(data)
        return data


def classify(values: Sequence[AttrValue], settings: Settings) -> Conversion | None:
    """convert.c: convert_attrs() + classify_conv_attrs() for one path; None when
    no step can change a byte (the blob is written as stored)."""
    action = crlf_action(values, settings)
    ident = values[3] is True
    drv: Driver | None = None
    flt = values[4]
    if isinstance(flt, str):
        drv = settings.drivers.get(flt)
    enc_value = values[5]
    encoding: str | None = None
    if enc_value is True:
        encoding = "true"  # git dies ("true/false are no valid working-tree-encodings")
    elif isinstance(enc_value, str) and enc_value and not _utf8(enc_value):
        encoding = enc_value
    to_crlf = _output_crlf(action, settings)
    driver = drv.name if drv is not None and (drv.applies or drv.required) else None
    if driver is None and encoding is None and not ident and not to_crlf:
        return None
    streamable = (
        not (drv is not None and (drv.process or drv.smudge or drv.clean))
        and encoding is None
        and action not in (Crlf.AUTO, Crlf.AUTO_CRLF)
    )
    reasons: list[str] = []
    if to_crlf:
        reasons.append("crlf")
    if ident:
        reasons.append("ident")
    if driver is not None:
        reasons.append(f"filter={driver}")
    if encoding is not None:
        reasons.append(f"working-tree-encoding={encoding}")
    return Conversion(action, to_crlf, ident, driver, encoding, streamable, tuple(reasons))


# -- the byte transformations ---------------------------------------------------
_LONE_LF = re.compile(rb"(?<!\r)\n")
#: Bytes gather_stats() counts as non-printable: controls other than BS, HT,
#: ESC, FF, CR and LF, and DEL.  ``_KEEP`` is every other byte.
_NONPRINTABLE = bytes(c for c in range(32) if c not in (8, 9, 27, 12, 10, 13)) + b"\x7f"
_KEEP = bytes(c for c in range(256) if c not in _NONPRINTABLE)


def auto_converts(data: bytes) -> bool:
    """convert.c: will_convert_lf_to_crlf() for a text=auto path: a lone LF,
    no CR at all, and not binary (convert_is_binary, with gather_stats' counts)."""
    if not data or b"\r" in data or b"\n" not in data or b"\0" in data:
        return False
    nonprintable = len(data.translate(None, _KEEP))
    lf = data.count(b"\n")
    printable = len(data) - lf - nonprintable
    if data[-1] == 0x1A:  # a trailing ^Z (EOF) is not counted
        nonprintable -= 1
    return (printable >> 7) >= nonprintable


def lf_to_crlf(data: bytes) -> bytes:
    """Every LF not preceded by CR becomes CRLF (crlf_to_worktree and the
    lf_to_crlf stream filter agree on this)."""
    return _LONE_LF.sub(b"\r\n", data)


def _keyword(oid: str) -> bytes:
    return b"$Id: " + oid.encode("ascii") + b" $"


def ident_incore(data: bytes, oid: str) -> bytes:
    """convert.c: ident_to_worktree(), step by step."""
    if b"$Id" not in data:
        return data
    out: list[bytes] = []
    n = len(data)
    src = 0
    while True:
        dollar = data.find(b"$", src)
        if dollar < 0:
            break
        out.append(data[src : dollar + 1])
        src = dollar + 1
        if n - src < 3 or data[src : src + 2] != b"Id":
            continue
        c = data[src + 2]
        if c == 0x24:  # "Id$"
            src += 3
        elif c == 0x3A:  # "Id:...$"
            end = data.find(b"$", src + 3)
            if end < 0:
                break
            if b"\n" in data[src + 3 : end]:
                continue
            # memchr(src + 4, ' ', dollar - src - 4): from the byte after "Id:x"
            spc = data.find(b" ", src + 4, end) if end > src + 3 else -1
            if 0 <= spc < end - 1:
                continue  # a foreign ident: kept
            src = end + 1
        else:
            continue
        out.append(b"Id: " + oid.encode("ascii") + b" $")
    out.append(data[src:])
    return b"".join(out)


_SPACE = b" \t\n\r"  # git's isspace() (ctype.c: GIT_SPACE)


def _foreign(keyword: bytes) -> bool:
    """convert.c: is_foreign_ident() on "$Id:...$"."""
    if not keyword.startswith(b"$Id: "):
        return False
    rest = keyword[5:]
    return any(c in _SPACE and rest[k + 1 : k + 2] != b"$" for k, c in enumerate(rest))


def ident_stream(data: bytes, oid: str) -> bytes:
    """convert.c: ident_filter_fn(), the stream filter checkout uses, on a whole
    buffer.  Its state machine consumes the byte after a partial match ("$$Id$"
    and "$I$Id$" are left alone) where ident_to_worktree would look again."""
    if b"$Id" not in data:
        return data
    out: list[bytes] = []
    n = len(data)
    copied = 0  # data[:copied] is in out
    i = 0
    keyword = _keyword(oid)
    while True:
        j = data.find(b"$", i)
        if j < 0 or j + 1 >= n:
            break
        if data[j + 1] != 0x49:  # "I"
            i = j + 2  # the mismatching byte is consumed
            continue
        if j + 2 >= n:
            break
        if data[j + 2] != 0x64:  # "d"
            i = j + 3
            continue
        k = j + 3  # after "$Id"
        if k >= n:
            break
        c = data[k]
        if c == 0x24:  # "$Id$"
            out.append(data[copied:j])
            out.append(keyword)
            copied = i = k + 1
        elif c == 0x3A:  # "$Id:" skips to "$" or LF
            m = k + 1
            while m < n and data[m] not in (0x24, 0x0A):
                m += 1
            if m >= n:
                break
            if data[m] == 0x24 and not _foreign(data[j : m + 1]):
                out.append(data[copied:j])
                out.append(keyword)
                copied = m + 1
            i = m + 1
        elif c == 0:  # matches the NUL of head[] ("$Id\0"): the next byte is consumed
            i = k + 2
        else:
            i = k + 1
    out.append(data[copied:])
    return b"".join(out)


# -- asking git ------------------------------------------------------------------
def _value(raw: bytes) -> AttrValue:
    if raw == b"unspecified":
        return None
    if raw == b"set":
        return True
    if raw == b"unset":
        return False
    return raw.decode("utf-8", "surrogateescape")


def _attr_git(git: Git, repo: Repo, extra_env: Mapping[str, str], *, worktree: bool = False) -> Git:
    """A runner for check-attr and the temporary index, with GIT_FLUSH=0 (check-attr
    otherwise flushes after every path when its output is a pipe: write-or-die.c).

    Attributes of a tree need no work tree: git runs with ``GIT_DIR`` set from a local
    directory, so it neither searches for the repository nor stats anything on the way
    (on the 1 ms latency filesystem that took update-index + check-attr of a 1,000-file
    tree from ~300 to ~100 ms, docs/benchmarks.md "Attributes").  The work tree's own
    attributes (``worktree``) need its top as the current directory (paths are relative
    to it)."""
    base = dict(os.environ if git.env is None else git.env)
    base.update({"GIT_FLUSH": "0", **extra_env})
    if worktree:
        top = repo.work_tree if repo.work_tree is not None else repo.git_dir
        return Git(top, debug=git.debug, env=base, exe=git.exe, version=git.version)
    base["GIT_DIR"] = str(repo.git_dir)
    base.pop("GIT_WORK_TREE", None)
    return Git(
        Path(tempfile.gettempdir()), debug=git.debug, env=base, exe=git.exe, version=git.version
    )


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
        self._scratch = tempfile.TemporaryDirectory(prefix="pcheckout-attr-")
        self.index_file = os.path.join(self._scratch.name, "index")
        attrs = [e for e in entries if is_gitattributes(e.path)] if not worktree else []
        if attrs:
            lines = b"".join(
                b"%o %s\t%s\0" % (e.mode, e.oid.encode("ascii"), e.path) for e in attrs
            )
            _attr_git(git, repo, {"GIT_INDEX_FILE": self.index_file}).run(
                "update-index",
                "-z",
                "--index-info",
                input=lines,
                what="cannot build a temporary index of the tree's .gitattributes",
            )

    @property
    def scratch(self) -> str:
        """A private temporary directory, removed by ``close()`` (made on first use: git
        2.40 has ``check-attr --source`` but not ``--attr-source``, and export's filtered
        cat-file then needs a private work tree)."""
        if self._scratch is None:
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
        out = runner.out(
            *args, *names, input=b"\0".join(paths) + b"\0", what="git check-attr failed"
        )
        fields = out.split(b"\0")
        width = 3 * len(names)
        if len(fields) != width * len(paths) + 1:
            raise GitError(
                f"git check-attr answered {len(fields) // 3} attributes for "
                f"{len(paths)} paths x {len(names)}"
            )
        rows: list[tuple[AttrValue, ...]] = []
        cache: dict[bytes, AttrValue] = {}
        for k in range(len(paths)):
            base = k * width
            row: list[AttrValue] = []
            for a in range(len(names)):
                raw = fields[base + 3 * a + 2]
                if raw not in cache:
                    cache[raw] = _value(raw)
                row.append(cache[raw])
            rows.append(tuple(row))
        return rows


@dataclass
class ConversionPlan:
    """The conversion of every entry to write."""

    sources: list[str]  # where attributes could come from (empty: nothing converts)
    per_entry: list[Conversion | None]  # aligned with the entries
    counts: dict[str, int] = field(default_factory=dict)  # reason -> paths
    converted: int = 0  # paths whose bytes may change
    by_git: int = 0  # of them, paths git's filters convert
    unknown: int = 0  # paths not looked up: their .gitattributes are not local (a dry run)

    @property
    def any(self) -> bool:
        return self.converted > 0

    def take(self, indexes: Sequence[int]) -> ConversionPlan:
        """The plan for ``[entries[i] for i in indexes]`` (a write round of some entries)."""
        per_entry = [self.per_entry[i] for i in indexes]
        part = ConversionPlan(self.sources, per_entry)
        for conv in per_entry:
            if conv is not None:
                part.converted += 1
                part.by_git += conv.by_git
                for r in conv.reasons:
                    part.counts[r] = part.counts.get(r, 0) + 1
        return part


def convertible(e: Entry) -> bool:
    """Only regular files convert (symlinks and gitlinks never: entry.c)."""
    return e.mode in (MODE_FILE, MODE_EXEC)


def build_plan(
    sources: list[str],
    count: int,
    rows: Mapping[int, Sequence[AttrValue]],
    settings: Settings,
) -> ConversionPlan:
    """The plan for ``count`` entries from each convertible entry's CONVERT_ATTRS values
    (``rows``: entry index -> values; entries without a row are written as stored)."""
    per_entry: list[Conversion | None] = [None] * count
    plan = ConversionPlan(sources, per_entry)
    memo: dict[tuple[AttrValue, ...], Conversion | None] = {}
    for i, values in rows.items():
        row = tuple(values[: len(CONVERT_ATTRS)])
        if row in memo:
            conv = memo[row]
        else:
            conv = memo[row] = classify(row, settings)
        if conv is None:
            continue
        per_entry[i] = conv
        plan.converted += 1
        if conv.by_git:
            plan.by_git += 1
        for r in conv.reasons:
            plan.counts[r] = plan.counts.get(r, 0) + 1
    return plan


def plan_conversion(
    git: Git,
    repo: Repo,
    config: Mapping[str, str],
    tree: str,
    entries: Sequence[Entry],
    *,
    environ: Mapping[str, str] | None = None,
    tree_entries: Sequence[Entry] | None = None,
    only: Sequence[int] | None = None,
    lookup: bool = True,
) -> ConversionPlan:
    """Per-entry conversion for writing ``entries`` of ``tree`` (a checkout, or a switch
    writing some of ``tree_entries``: the whole tree, whose .gitattributes count);
    ``only``: the indexes actually written (a sparse checkout's cone); ``lookup=False``:
    the sources only (git's own writer decides per path itself)."""
    whole = entries if tree_entries is None else tree_entries
    sources = conversion_sources(whole, config, repo.common_dir, environ)
    if not sources or not lookup:
        return ConversionPlan(sources, [None] * len(entries))
    todo = [i for i in (range(len(entries)) if only is None else only) if convertible(entries[i])]
    with TreeAttributes(git, repo, tree, whole) as attrs:
        rows = attrs.lookup([entries[i].path for i in todo], CONVERT_ATTRS)
    return build_plan(
        sources, len(entries), dict(zip(todo, rows, strict=True)), Settings.from_config(config)
    )
