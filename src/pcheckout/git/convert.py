"""What git's checkout does to a path's bytes, decided per path as ``convert.c`` does.

The conversion side (gitoxide's ``gix-filter``): eol/text/crlf, ident,
working-tree-encoding and filter drivers, from the attribute values
``git/attributes.py`` looks up and a little config.

* ``classify``: ``convert.c: convert_attrs()`` + ``classify_conv_attrs()`` on those
  values and the config, giving ``None`` (the bytes cannot change: written from the
  plain ``cat-file --batch``) or a :class:`Conversion`.  Filter drivers and
  working-tree encodings go to git's ``cat-file --filters``; ident and CRLF are done
  here, byte for byte as git's checkout does them (see :meth:`Conversion.apply`), which
  needs no git process per path.
* ``plan_conversion``: every entry's :class:`Conversion` for one write, from one
  check-attr (:class:`ConversionPlan`).
"""

from __future__ import annotations

import enum
import os
import re
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from pcheckout.git.attributes import AttrValue, TreeAttributes, conversion_sources, convertible
from pcheckout.git.config import autocrlf, config_bool
from pcheckout.git.runner import Git, Repo
from pcheckout.git.tree import Entry

if TYPE_CHECKING:  # (git/lfs.py is imported where a plan is made: git's writer makes none)
    from pcheckout.git.lfs import LfsPlan, Smudge

#: The attributes ``convert.c: convert_attrs()`` reads (order is ours).
CONVERT_ATTRS = ("text", "eol", "crlf", "ident", "filter", "working-tree-encoding")


# -- config -------------------------------------------------------------------
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
    #: git-lfs's smudge done here: the local object written in the pointer's place
    #: (``git/lfs.py``); still ``by_git`` for every other use of the plan
    lfs: Smudge | None = None

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
    streamable = (
        not (drv is not None and (drv.process or drv.smudge or drv.clean))
        and encoding is None
        and action not in (Crlf.AUTO, Crlf.AUTO_CRLF)
    )
    # A required driver with no command fails only where git converts in core (convert.c
    # apply_filter finds no command: "smudge filter <x> failed"); a streamed path never
    # meets the driver (entry.c write_entry: get_stream_filter).
    driver = None
    if drv is not None and (drv.applies or (drv.required and not streamable)):
        driver = drv.name
    if driver is None and encoding is None and not ident and not to_crlf:
        return None
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


#: :func:`classify`'s reason for a path git-lfs's filter converts (``filter=`` and the
#: driver's name, ``git/lfs.py`` FILTER; a plan's ``counts`` key)
LFS_REASON = "filter=lfs"


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


class Repository(Protocol):
    """The repository a conversion is planned in (a run's ``Context`` is one)."""

    @property
    def git(self) -> Git: ...
    @property
    def repo(self) -> Repo: ...
    @property
    def config(self) -> Mapping[str, str]: ...
    @property
    def environ(self) -> Mapping[str, str] | None: ...


class ConversionPlan:
    """The conversion of every entry to write (a plain class: a dataclass cost ~0.24 ms
    to create at import, on every checkout)."""

    __slots__ = ("by_git", "converted", "counts", "lfs", "per_entry", "sources", "unknown")

    def __init__(self, sources: list[str], per_entry: list[Conversion | None]) -> None:
        self.sources = sources  # where attributes could come from (empty: nothing converts)
        self.per_entry = per_entry  # aligned with the entries
        self.counts: dict[str, int] = {}  # reason -> paths
        self.converted = 0  # paths whose bytes may change
        self.by_git = 0  # of them, paths git's filters convert
        self.unknown = 0  # paths not looked up: their .gitattributes are not local (a dry run)
        self.lfs: LfsPlan | None = None  # the LFS pointers among them (None: no filter=lfs)

    @property
    def any(self) -> bool:
        return self.converted > 0

    def _count(self, conv: Conversion) -> None:
        self.converted += 1
        self.by_git += conv.by_git
        for r in conv.reasons:
            self.counts[r] = self.counts.get(r, 0) + 1

    def smudge_here(self, smudges: Mapping[int, Smudge]) -> None:
        """Entries whose LFS object is now local (fetched): written from it."""
        for i, smudge in smudges.items():
            conv = self.per_entry[i]
            if conv is not None:
                self.per_entry[i] = conv._replace(lfs=smudge)

    def take(self, indexes: Sequence[int]) -> ConversionPlan:
        """The plan for ``[entries[i] for i in indexes]`` (a write round of some entries)."""
        part = ConversionPlan(self.sources, [self.per_entry[i] for i in indexes])
        for conv in part.per_entry:
            if conv is not None:
                part._count(conv)
        return part


def build_plan(
    sources: list[str],
    count: int,
    rows: Iterable[tuple[int, Sequence[AttrValue]]],
    settings: Settings,
) -> ConversionPlan:
    """The plan for ``count`` entries from each convertible entry's CONVERT_ATTRS values
    (``rows``: (entry index, values) pairs; entries without a row are written as stored)."""
    plan = ConversionPlan(sources, [None] * count)
    memo: dict[tuple[AttrValue, ...], Conversion | None] = {}
    for i, values in rows:
        row = tuple(values[: len(CONVERT_ATTRS)])
        if row in memo:
            conv = memo[row]
        else:
            conv = memo[row] = classify(row, settings)
        if conv is not None:
            plan.per_entry[i] = conv
            plan._count(conv)
    return plan


def plan_conversion(
    where: Repository,
    tree: str,
    entries: Sequence[Entry],
    *,
    tree_entries: Sequence[Entry] | None = None,
    only: Sequence[int] | None = None,
    local: Callable[[str], bool] | None = None,
) -> ConversionPlan:
    """Per-entry conversion for writing ``entries`` of ``tree`` (a checkout, or a switch
    writing some of ``tree_entries``: the whole tree, whose .gitattributes count);
    ``only``: the indexes actually written (a sparse checkout's cone); ``local``: whether
    a blob is in the repository (a partial clone's missing pointers are not read)."""
    whole = entries if tree_entries is None else tree_entries
    sources = conversion_sources(whole, where.config, where.repo.common_dir, where.environ)
    if not sources:
        return ConversionPlan(sources, [None] * len(entries))
    # (indexes in an array and rows paired as they are read, not a list of ints and a
    # dict: 250,000 of each were ~20 MiB at the run's peak)
    todo = array(
        "q", (i for i in (range(len(entries)) if only is None else only) if convertible(entries[i]))
    )
    with TreeAttributes(where.git, where.repo, tree, whole) as attrs:
        rows = attrs.lookup([entries[i].path for i in todo], CONVERT_ATTRS)
    settings = Settings.from_config(where.config)
    plan = build_plan(sources, len(entries), zip(todo, rows, strict=True), settings)
    _plan_lfs(where, whole, entries, plan, local)
    return plan


def _plan_lfs(
    where: Repository,
    whole: Sequence[Entry],
    entries: Sequence[Entry],
    plan: ConversionPlan,
    local: Callable[[str], bool] | None,
) -> None:
    """Mark the paths whose git-lfs smudge is done here (``git/lfs.py``)."""
    per_entry = plan.per_entry
    lfs_only = (LFS_REASON,)  # the reasons of a path git-lfs's filter alone converts
    candidates = [i for i, c in enumerate(per_entry) if c is not None and c.reasons == lfs_only]
    if not candidates:
        return
    from pcheckout.git.lfs import Where, smudge_plan  # (LFS pointers only: ~2 ms to import)

    repo = where.repo
    environ = where.environ if where.environ is not None else os.environ
    work_tree = None if repo.work_tree is None else os.fspath(repo.work_tree)
    at = Where(where.git, where.config, os.fspath(repo.common_dir), work_tree, environ)
    lfs = plan.lfs = smudge_plan(at, entries, candidates, local, whole)
    for i, smudge in lfs.local.items():
        conv = per_entry[i]
        assert conv is not None
        per_entry[i] = conv._replace(lfs=smudge)
    for i in lfs.plain:
        per_entry[i] = None
