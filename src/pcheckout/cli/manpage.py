"""The manual pages, generated from the parsers and their words (``cli/parser.py``): the same
descriptions, options, examples and exit statuses as ``--help``, so the two cannot drift.

``scripts/gen_man.py`` writes them to ``man/man1/`` (installed as
``<prefix>/share/man/man1``: ``man pcheckout``, ``man pcheckout-checkout``, and
``git pcheckout --help``, which opens ``git-pcheckout(1)``); the suite checks that the
committed pages are what this module makes now, and that ``man -l`` renders them.
"""

from __future__ import annotations

import argparse

from pcheckout import __version__
from pcheckout.cli import parser as grammar
from pcheckout.cli.parser import PROG, Command

#: Text width of the synopsis (argparse's usage is wrapped at it, whatever the terminal).
WIDTH = 78

#: Environment variables a checkout reads (docs/filesystems.md, docs/tuning.md).
ENVIRONMENT = (
    ("PCHECKOUT_WORKERS", "the worker count (a number or 'auto'), below --workers"),
    ("PCHECKOUT_WRITER", "the writer (pcheckout, git or auto), below --writer"),
    (
        "XDG_CACHE_HOME",
        "where 'pcheckout tune' stores its results: $XDG_CACHE_HOME/pcheckout/tuned.json "
        "(default ~/.cache/pcheckout/tuned.json)",
    ),
    (
        "XDG_CONFIG_HOME",
        "where 'pcheckout tune --git-config' writes the files it owns: "
        "$XDG_CONFIG_HOME/pcheckout/git/ (default ~/.config/pcheckout/git/)",
    ),
)


def escape(text: str) -> str:
    """Text for roff: backslashes, hyphens (so options copy as ASCII), a leading dot."""
    out = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line[:1] in ".'" else line for line in out.split("\n"))


def _usage(p: argparse.ArgumentParser) -> str:
    f = grammar.Formatter(prog=p.prog, width=WIDTH)
    f.add_usage(p.usage, p._actions, p._mutually_exclusive_groups, prefix="")
    return f.format_help().strip("\n")


def _invocation(a: argparse.Action) -> str:
    if not a.option_strings:
        return f"\\fI{escape(str(a.metavar or a.dest))}\\fR"
    flags = ", ".join(f"\\fB{escape(s)}\\fR" for s in a.option_strings)
    if a.nargs == 0:
        return flags
    return f"{flags} \\fI{escape(str(a.metavar or a.dest.upper()))}\\fR"


def _actions(p: argparse.ArgumentParser, positional: bool) -> list[str]:
    out = []
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction) or a.help == argparse.SUPPRESS:
            continue
        if bool(a.option_strings) == positional:
            continue
        out += [".TP", _invocation(a), escape(a.help or "")]
    return out


def _section(title: str, lines: list[str]) -> list[str]:
    return [f".SH {title}", *lines] if lines else []


def page(name: str, cmd: Command, p: argparse.ArgumentParser, extra: list[str]) -> str:
    """One manual page: NAME, SYNOPSIS, DESCRIPTION, ARGUMENTS, OPTIONS, ``extra``
    sections, EXAMPLES, EXIT STATUS, SEE ALSO."""
    lines = [
        f'.TH {name.upper()} 1 "" "{PROG} {__version__}" "{PROG} manual"',
        ".nh",  # no hyphenation: option names and paths stay whole
        ".ad l",
        ".SH NAME",
        f"{escape(name)} \\- {escape(cmd.summary)}",
        ".SH SYNOPSIS",
        ".nf",
        escape(_usage(p)),
        ".fi",
        ".SH DESCRIPTION",
    ]
    for para in cmd.description.split("\n\n"):
        lines += [".PP", escape(para)]
    lines += _section("ARGUMENTS", _actions(p, positional=True))
    lines += _section("OPTIONS", _actions(p, positional=False))
    lines += extra
    lines.append(".SH EXAMPLES")
    for example, what in cmd.examples:
        lines += [".PP", escape(what) + ":", ".RS", ".nf", escape(example), ".fi", ".RE"]
    lines.append(".SH EXIT STATUS")
    for code, meaning in cmd.exit_status:
        lines += [".TP", f"\\fB{escape(code)}\\fR", escape(meaning)]
    see = [f"{PROG}(1)"] if name != PROG else [f"{PROG}-{c.name}(1)" for c in grammar.COMMANDS]
    lines += [".SH SEE ALSO", escape(", ".join([*see, "git(1)"]))]
    return "\n".join(lines) + "\n"


def _main_extra() -> list[str]:
    lines = [".SH COMMANDS"]
    for c in grammar.COMMANDS:
        lines += [".TP", f"\\fB{PROG}\\-{escape(c.name)}\\fR(1)", escape(c.summary)]
    lines.append(".SH ENVIRONMENT")
    for var, meaning in ENVIRONMENT:
        lines += [".TP", f"\\fB{escape(var)}\\fR", escape(meaning)]
    return lines


def pages() -> dict[str, str]:
    """Every page by file name: ``pcheckout.1``, ``git-pcheckout.1`` and one per command."""
    p = grammar.parser()
    subs = grammar.subparsers(p)
    main = page(PROG, grammar.MAIN, p, _main_extra())
    out = {f"{PROG}.1": main, f"git-{PROG}.1": page(f"git-{PROG}", grammar.MAIN, p, _main_extra())}
    for c in grammar.COMMANDS:
        out[f"{PROG}-{c.name}.1"] = page(f"{PROG}-{c.name}", c, subs[c.name], [])
    return out
