"""git clone's command line, read as its parse-options reads it.

Every git clone option reaches git unchanged; ``parse_args`` only reads them to
know where the clone goes and whether ``git clone`` would have checked anything
out (the checkout phase), and takes pcheckout's own options out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pcheckout.errors import UsageError

# git clone's options as builtin/clone.c (git 2.39, builtin_clone_options[])
# declares them, plus the few later gits added (--ref-format 2.45, --revision
# 2.49), so that a value given as a separate word is never taken for the URL.
#: Long options that take a value ("--depth 1" or "--depth=1").
GIT_VALUE_LONG = frozenset(
    {
        "jobs",
        "template",
        "reference",
        "reference-if-able",
        "origin",
        "branch",
        "upload-pack",
        "depth",
        "shallow-since",
        "shallow-exclude",
        "separate-git-dir",
        "config",
        "server-option",
        "filter",
        "bundle-uri",
        "ref-format",
        "revision",
    }
)
#: Long options whose value is optional and only given as "--opt=value".
GIT_OPTIONAL_LONG = frozenset({"recurse-submodules", "recursive"})
#: Long options without a value (each also accepted negated, as parse-options does).
GIT_FLAG_LONG = frozenset(
    {
        "verbose",
        "quiet",
        "progress",
        "reject-shallow",
        "no-checkout",
        "bare",
        "mirror",
        "local",
        "no-hardlinks",
        "shared",
        "dissociate",
        "single-branch",
        "no-tags",
        "shallow-submodules",
        "ipv4",
        "ipv6",
        "also-filter-submodules",
        "remote-submodules",
        "sparse",
    }
)
#: Short options: those taking a value, and flags (builtin/clone.c).
GIT_VALUE_SHORT = {"j": "jobs", "o": "origin", "b": "branch", "u": "upload-pack", "c": "config"}
GIT_FLAG_SHORT = {
    "v": "verbose",
    "q": "quiet",
    "n": "no-checkout",
    "l": "local",
    "s": "shared",
    "4": "ipv4",
    "6": "ipv6",
}

#: pcheckout's own options of ``clone`` (never passed to git).  ``-j`` is not
#: among them: in git clone ``-j`` is ``--jobs`` (submodules fetched at once).
OWN_VALUE_LONG = frozenset({"workers"})
OWN_FLAG_LONG = frozenset({"no-adapt", "no-hooks", "json", "debug", "help"})

_ALL_LONG = GIT_VALUE_LONG | GIT_OPTIONAL_LONG | GIT_FLAG_LONG | OWN_VALUE_LONG | OWN_FLAG_LONG


def _negation(name: str) -> str:
    """parse-options' other form of a boolean: --no-X for X, --X for no-X."""
    return name[3:] if name.startswith("no-") else f"no-{name}"


def _canonical(word: str) -> tuple[str, bool] | None:
    """The option a long word names, and whether it is negated; as git's
    parse-options reads it (exact name, its negation, or an unambiguous prefix
    of either).  None: unknown or ambiguous (git will say which)."""
    forms: dict[str, tuple[str, bool]] = {}
    for name in _ALL_LONG:
        forms[name] = (name, False)
        if name not in GIT_VALUE_LONG | OWN_VALUE_LONG | {"help"}:
            forms.setdefault(_negation(name), (name, True))
    if word in forms:
        return forms[word]
    found = {v for k, v in forms.items() if k.startswith(word)}
    return found.pop() if len(found) == 1 else None


@dataclass
class CloneArgs:
    """``pcheckout clone``'s command line, split into git's words and ours."""

    url: str
    directory: str | None  # as given; None: git's guess (see guess_dir_name)
    git_options: list[str] = field(default_factory=list)  # verbatim, in order
    workers: str | None = None
    adapt: bool = True
    hooks: bool = True  # --no-hooks: False
    json: bool = False
    debug: bool = False
    help: bool = False
    # what git clone will do, read from git_options (the last word wins, as in git)
    no_checkout: bool = False
    bare: bool = False
    mirror: bool = False
    quiet: bool = False
    verbosity: int = 0
    progress: bool | None = None
    recurse_submodules: list[str] = field(default_factory=list)
    jobs: str | None = None
    shallow_submodules: bool = False
    remote_submodules: bool = False
    also_filter_submodules: bool = False
    filters: list[str] = field(default_factory=list)
    single_branch: bool | None = None
    separate_git_dir: str | None = None
    borrows_objects: bool = False  # --shared, --reference, --reference-if-able
    dissociate: bool = False


def parse_args(argv: Sequence[str]) -> CloneArgs:
    """Split ``argv`` (the words after ``clone``) as git clone's parse-options
    would: options anywhere, ``--opt=value`` and ``--opt value``, bundled short
    options (``-qn``, ``-bmain``, ``-j4``), unambiguous abbreviations, ``--``."""
    reader = _Reader(list(argv))
    reader.read()
    args, positional = reader.args, reader.positional
    if args.help:
        return args
    if not positional:
        raise UsageError("clone: you must specify a repository to clone")
    if len(positional) > 2:
        raise UsageError("clone: too many arguments (expected URL [DIR])")
    args.url = positional[0]
    args.directory = positional[1] if len(positional) > 1 else None
    args.git_options = reader.git_options
    return args


class _Reader:
    """parse_args' walk over the words: each option read into ``args`` (git's also kept
    verbatim, in order, in ``git_options``), the other words into ``positional``."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.i = 0  # the word being read
        self.args = CloneArgs(url="", directory=None)
        self.git_options: list[str] = []
        self.positional: list[str] = []

    def read(self) -> None:
        words = self.words
        while self.i < len(words):
            word = words[self.i]
            if word == "--":
                self.positional.extend(words[self.i + 1 :])
                return
            if word.startswith("--"):
                self._long(word)
            elif word.startswith("-") and word != "-":
                self._short(word)
            else:
                self.positional.append(word)
            self.i += 1

    def _value(self, opt: str) -> str:
        """The next word, as the value of ``opt``."""
        if self.i + 1 >= len(self.words):
            raise UsageError(f"clone: option '{opt}' requires a value")
        self.i += 1
        return self.words[self.i]

    def _long(self, word: str) -> None:
        """``--name``, ``--name=value`` or ``--name value``; negated or abbreviated."""
        args = self.args
        name, eq, inline = word[2:].partition("=")
        found = _canonical(name)
        if found is None:  # unknown to us: git decides (and explains)
            self.git_options.append(word)
            return
        canon, negated = found
        if canon in OWN_VALUE_LONG:
            args.workers = inline if eq else self._value(word)
        elif canon in OWN_FLAG_LONG:
            if eq:
                raise UsageError(f"clone: option '--{canon}' takes no value")
            if canon == "no-adapt":
                args.adapt = negated
            elif canon == "no-hooks":
                args.hooks = negated
            else:
                setattr(args, canon, not negated)
        elif canon in GIT_VALUE_LONG and not negated:
            value = inline if eq else self._value(word)
            self.git_options.extend([word] if eq else [word, value])
            _note_git(args, canon, value, False)
        else:
            self.git_options.append(word)
            _note_git(args, canon, inline if eq else None, negated)

    def _short(self, word: str) -> None:
        """Bundled short options: flags until one that takes a value, which takes
        the rest of the word or the next word."""
        for k in range(1, len(word)):
            letter = word[k]
            if letter == "h":
                self.args.help = True
            elif letter in GIT_VALUE_SHORT:
                rest = word[k + 1 :]
                value = rest or self._value(f"-{letter}")
                self.git_options.extend([f"-{letter}{rest}"] if rest else [f"-{letter}", value])
                _note_git(self.args, GIT_VALUE_SHORT[letter], value, False)
                return
            else:
                self.git_options.append(f"-{letter}")
                if letter in GIT_FLAG_SHORT:
                    _note_git(self.args, GIT_FLAG_SHORT[letter], None, False)


def _note_git(args: CloneArgs, canon: str, value: str | None, negated: bool) -> None:
    """Remember what a git clone option means for the checkout phase."""
    on = not negated
    if canon == "no-checkout":
        args.no_checkout = on
    elif canon == "bare":
        args.bare = on
    elif canon == "mirror":
        args.mirror = on
    elif canon == "quiet":
        args.verbosity = args.verbosity - 1 if on else 0
    elif canon == "verbose":
        args.verbosity = args.verbosity + 1 if on else 0
    elif canon == "progress":
        args.progress = on
    elif canon in ("recurse-submodules", "recursive"):
        if negated:
            args.recurse_submodules = []
        else:
            args.recurse_submodules.append(value if value is not None else ".")
    elif canon == "jobs":
        args.jobs = value
    elif canon == "shallow-submodules":
        args.shallow_submodules = on
    elif canon == "remote-submodules":
        args.remote_submodules = on
    elif canon == "also-filter-submodules":
        args.also_filter_submodules = on
    elif canon == "filter":
        if negated:
            args.filters = []
        elif value is not None:
            args.filters.append(value)
    elif canon == "single-branch":
        args.single_branch = on
    elif canon == "separate-git-dir":
        args.separate_git_dir = value if on else None
    elif canon in ("shared", "reference", "reference-if-able"):
        args.borrows_objects = on
    elif canon == "dissociate":
        args.dissociate = on
    args.quiet = args.verbosity < 0
