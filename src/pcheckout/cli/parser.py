"""The command line's grammar and its words: one source for ``--help``, the manual pages
(``cli/manpage.py``) and the shell completions (``cli/completion.py``).

Each command is a :class:`Command`: its one-line summary, its description, examples and exit
statuses; each argument carries its help and, for completion, what its value is
(:data:`COMPLETE`).  ``--help`` prints them through argparse; the manual pages and the
completion scripts are generated from the same parsers, so neither can drift from it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NoReturn

from pcheckout import __version__
from pcheckout.errors import UsageError

PROG = "pcheckout"

#: What a value completes to, set on an argparse action as ``action.complete``: a revision,
#: a directory, any path, a file; or a tuple of the words allowed.
COMPLETE = ("rev", "dir", "path", "file")


class Command(NamedTuple):
    """One command's words, for ``--help``, its manual page and its completion."""

    name: str
    summary: str  # one line (the command list, the manual page's NAME)
    description: str  # paragraphs, blank-line separated
    examples: tuple[tuple[str, str], ...]  # (command line, what it does)
    exit_status: tuple[tuple[str, str], ...]  # (code, meaning)


EXIT_COMMON = (
    ("0", "success"),
    ("1", "an error, said in one line on stderr ('pcheckout: error: ...')"),
    ("2", "a usage error: an unknown command or option, a bad value"),
    ("130, 143", "interrupted (SIGINT, SIGTERM)"),
)

EXIT_WRITES = (
    ("0", "written (with --dry-run: reported, nothing written)"),
    (
        "1",
        "an error, said in one line on stderr (an unknown revision, local changes a switch "
        "would lose, a destination that is not empty); "
        "nothing is half-recorded: the index is written last, and running the same command "
        "again finishes an interrupted checkout",
    ),
    ("2", "a usage error: an unknown option, a bad value"),
    (
        "128",
        "where git's checkout dies, with git's message: not a repository, no work tree, the "
        "index or HEAD locked by another git process, a tree or a blob as REV, a branch "
        "checked out in another worktree, a corrupt object, a required filter that fails",
    ),
    ("130, 143", "interrupted (SIGINT, SIGTERM): run the same command again to finish"),
)

MAIN = Command(
    PROG,
    "filesystem-aware parallel checkout for git",
    "Write a git working tree as fast as the filesystem under it allows. pcheckout detects "
    "where the destination lives (NFS, SMB, FUSE and other network filesystems, tmpfs, local "
    "and virtual disks), chooses the writer (its own engine of long-lived 'git cat-file' "
    "processes with many files in flight, or git's own parallel checkout where writing is "
    "CPU-bound) and the worker count, and leaves files, index and HEAD exactly as git would.\n\n"
    "Global options go before the command, as in git; -q and --debug are also accepted after "
    "it. 'git pcheckout COMMAND' is the same tool as a git subcommand.",
    (
        ("pcheckout clone https://example.org/big.git /mnt/nfs/big", "clone, checkout in parallel"),
        ("pcheckout -C work checkout v2.40.0", "check out a revision in ./work"),
        ("pcheckout checkout --dry-run", "what would be written, by whom, and why"),
        ("pcheckout detect /mnt/nfs", "which filesystem, and is it latency-bound?"),
        ("pcheckout tune /mnt/nfs --git-config", "measure a mount; plain git uses the count too"),
    ),
    (*EXIT_COMMON[:3], ("128", "git's own error passed through"), EXIT_COMMON[3]),
)

CHECKOUT = Command(
    "checkout",
    "write a commit's tree and index",
    "Write every file of REV into the working tree, in parallel, then the index; HEAD ends "
    "where 'git checkout REV' puts it (a branch, or detached at a commit), and the files, "
    "modes, symlinks and index are git's.\n\n"
    "Into a working tree holding only .git (a 'git clone --no-checkout', a 'git worktree add "
    "--no-checkout') everything is written. In a populated working tree it switches: only "
    "what differs between HEAD and REV is written or deleted, and local changes that would "
    "be lost stop it, as in git (--force discards them). An interrupted checkout is "
    "finished by running the same command again.\n\n"
    "The worker count comes from, in order: --workers, PCHECKOUT_WORKERS, git config "
    "pcheckout.workers, git config checkout.workers, a 'pcheckout tune' result for the mount, "
    "then the policy for the filesystem. The writer comes from --writer, PCHECKOUT_WRITER, "
    "git config pcheckout.writer, a tune result, then the policy.",
    (
        ("pcheckout -C work checkout", "every file of HEAD into ./work, plus the index"),
        ("pcheckout checkout v2.40.0", "a tag: HEAD ends detached there, as in git"),
        ("pcheckout checkout main", "in a populated tree: writes only what changed"),
        ("pcheckout checkout -n --json", "the plan as JSON; nothing written"),
        ("pcheckout checkout -j 32 --writer pcheckout", "32 workers of pcheckout's engine"),
    ),
    EXIT_WRITES,
)

EXPORT = Command(
    "export",
    "write a tree alone (no .git, no index)",
    "Write REV's tree into DEST, as 'git archive REV | tar -x' would: attributes "
    "(export-ignore, export-subst, eol, filters) applied as git archive applies them, the "
    "modes and times tar leaves, no .git, no index; run in a subdirectory, that subtree "
    "alone. What DEST holds stays; a path the export writes that DEST already holds "
    "(other than a directory) is refused, where tar would replace it.",
    (
        ("pcheckout export -C /srv/repo.git v2.40.0 /tmp/src", "a release's tree"),
        ("pcheckout export HEAD out --worktree-attributes", "attributes of the working tree"),
        ("pcheckout export v1 out -n --json", "the plan as JSON; nothing written"),
    ),
    EXIT_WRITES[:3] + EXIT_WRITES[4:],
)

DETECT = Command(
    "detect",
    "which filesystem holds PATH, and what that means for parallel writes",
    "Say which filesystem holds PATH (the mount table, statfs, the block devices in sysfs), "
    "its kind (nfs, smb, network, fuse, tmpfs, ssd, hdd, virtual, overlay), whether each file "
    "create waits on a round trip there, and how sure the answer is. A PATH that does not "
    "exist yet is judged by its nearest existing parent.",
    (
        ("pcheckout detect", "the current directory"),
        ("pcheckout detect --json /mnt/nfs/build", "the same, as JSON"),
        ("pcheckout detect --mountinfo saved.txt /mnt/build", "from a mount table saved elsewhere"),
    ),
    EXIT_COMMON,
)

CLONE = Command(
    "clone",
    "git clone, then the parallel checkout",
    "Clone a repository as 'git clone' does, with the checkout written in parallel: runs 'git "
    "clone --no-checkout' with every git clone option given, then checks out what git clone "
    "would have (the remote HEAD or --branch, the sparse cone of --sparse), and with "
    "--recurse-submodules clones and checks out the submodules side by side. The result is "
    "git clone's: files, index, HEAD, refs, config, reflog, .git/shallow. --no-checkout, "
    "--bare and --mirror write no files, as in git. DIR defaults to the name git clone "
    "guesses from URL.\n\n"
    "Every option not listed below is git clone's and means what it means there, among them "
    "-n/--no-checkout, --bare, --mirror, -b/--branch, --depth, --shallow-since, "
    "--single-branch, --filter, --sparse, -o/--origin, -c/--config key=value, --reference, "
    "--dissociate, --shared, --template, --separate-git-dir, --recurse-submodules, "
    "-q/--quiet and --progress. -j/--jobs keeps git clone's meaning (submodules cloned at "
    "once): the checkout's worker count is --workers.",
    (
        ("pcheckout clone https://example.org/big.git /mnt/nfs/big", "clone, checkout in parallel"),
        ("pcheckout clone --filter=blob:none --sparse -b release URL", "blobless, sparse"),
        ("pcheckout clone --depth 1 --workers 64 URL dir", "64 checkout workers"),
    ),
    (
        ("0", "cloned and checked out"),
        (
            "1",
            "the checkout failed; the clone is complete and 'pcheckout checkout -C DIR' "
            "finishes it",
        ),
        ("2", "a usage error"),
        ("128", "git clone failed (git's message, git's code); nothing is left behind"),
        ("130, 143", "interrupted (SIGINT, SIGTERM)"),
    ),
)

TUNE = Command(
    "tune",
    "measure the best worker count for the filesystem holding PATH and remember it",
    "Measure the mount holding PATH once: in a scratch directory under PATH, write a "
    "checkout-like tree of small files with N threads for N halving from --max-workers down "
    "to 1, in interleaved rounds, and pick the knee (the smallest count within 5% of the best "
    "median). Then time pcheckout's engine against git's own parallel checkout on a probe "
    "tree there (not with --no-writers). The result is stored for that mount and used by every "
    "later checkout there; the scratch directory is removed, also on Ctrl-C.\n\n"
    "With --git-config, plain git uses the count too: an includeIf section in the global git "
    "config points at a file pcheckout owns that sets checkout.workers for every repository "
    "under the mount. It is shown before it is written; writing twice changes nothing.",
    (
        ("pcheckout tune /mnt/nfs/scratch", "measure this mount (10-20 s), remember it"),
        ("pcheckout tune --json .", "the same, the result as JSON"),
        ("pcheckout tune /mnt/nfs --git-config", "plain git under /mnt/nfs gets the count"),
        ("pcheckout tune /mnt/nfs --git-config --remove", "take that out again"),
        ("pcheckout tune /mnt/nfs --forget", "drop the stored result"),
    ),
    EXIT_COMMON,
)

COMPLETION = Command(
    "completion",
    "print a shell completion script (bash, zsh, fish)",
    "Print the completion script for SHELL on stdout: commands, options, their values, "
    "revisions where a revision goes and paths where a path goes. It completes "
    "'git pcheckout' as well where git's own completion is loaded (bash).",
    (
        (
            "echo 'eval \"$(pcheckout completion bash)\"' >> ~/.bashrc",
            "bash: load it in every new shell",
        ),
        (
            "pcheckout completion zsh > ~/.zfunc/_pcheckout",
            "zsh: with fpath=(~/.zfunc $fpath) before compinit in ~/.zshrc",
        ),
        (
            "pcheckout completion fish > ~/.config/fish/completions/pcheckout.fish",
            "fish: loaded on first use",
        ),
    ),
    (("0", "printed"), ("2", "a usage error: an unknown shell")),
)

COMMANDS = (CHECKOUT, EXPORT, DETECT, CLONE, TUNE, COMPLETION)
SHELLS = ("bash", "zsh", "fish")

WRITER_HELP = (
    "who writes: pcheckout's engine, git's own parallel checkout, or 'auto' "
    "(default: git where writing is CPU-bound, pcheckout where calls wait)"
)
WORKERS_HELP = (
    "worker count: a number, or 'auto' (default: detect the filesystem, "
    "use a tuned value or the policy, and adapt while writing)"
)


class Formatter(argparse.HelpFormatter):
    """Paragraphs filled one by one; indented lines (examples) kept as they are; an option's
    value named once, as git's help does (``-j, --workers N|auto``)."""

    def __init__(self, prog: str, *args: Any, **kwargs: Any) -> None:
        # argparse makes a formatter for every add_argument(), and HelpFormatter's own
        # width imports shutil (with zlib, bz2, lzma: ~4 ms of a start in a plain venv)
        # for its get_terminal_size(), whose answer terminal_columns() gives.
        if not args and kwargs.get("width") is None:
            kwargs["width"] = terminal_columns() - 2  # (HelpFormatter's margin)
        super().__init__(prog, *args, **kwargs)

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        value = self._format_args(action, self._get_default_metavar_for_optional(action))
        return ", ".join(action.option_strings) + " " + value

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap  # only when help is printed

        out = []
        for para in text.split("\n\n"):
            lines = para.splitlines()
            if any(line.startswith(" ") for line in lines):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(
                    textwrap.fill(para, width, initial_indent=indent, subsequent_indent=indent)
                )
        return "\n\n".join(out)


def terminal_columns(fallback: int = 80) -> int:
    """``shutil.get_terminal_size().columns``: ``$COLUMNS`` where it is a positive number,
    else the width of the terminal on standard output, else ``fallback``."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else fallback


def epilog(cmd: Command) -> str:
    """The examples and exit statuses, as ``--help`` shows them after the options."""
    import textwrap  # only when help is printed

    lines = ["examples:"]
    for line, what in cmd.examples:
        lines += [f"  {line}", f"      {what}"]
    lines += ["", "exit status:"]
    for code, meaning in cmd.exit_status:
        lines += textwrap.wrap(
            meaning,
            78,
            initial_indent=f"  {code:<10}",
            subsequent_indent=" " * 12,
            break_on_hyphens=False,
        )
    return "\n".join(lines)


class ArgParser(argparse.ArgumentParser):
    """Usage errors as :class:`UsageError` (one line, exit 2), never argparse's own exit;
    the examples and exit statuses made only when help is shown (``doc``)."""

    doc: Command | None = None

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def format_help(self) -> str:
        if self.doc is not None and self.epilog is None:
            self.epilog = epilog(self.doc)
        return super().format_help()


def _arg(p: argparse.ArgumentParser, *flags: str, complete: Any = None, **kw: Any) -> None:
    """``add_argument``, noting what the value completes to (``COMPLETE`` or the choices)."""
    action = p.add_argument(*flags, **kw)
    action.complete = complete  # type: ignore[attr-defined]


def _global(p: argparse.ArgumentParser, default: object) -> None:
    """-q and --debug: before the command (``default`` False) and after it (SUPPRESS, so a
    subcommand's copy does not reset a value given before the command)."""
    p.add_argument(
        "-q", "--quiet", action="store_true", default=default, help="no progress, no summary"
    )
    p.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="print each git command run (and other details), and a traceback on errors",
    )


NO_HOOKS_HELP = (
    "run no git hook afterwards (git runs post-checkout; git's own way to run none: "
    "git -c core.hooksPath=/dev/null)"
)


def _sub(sub: Any, cmd: Command, **kw: Any) -> ArgParser:
    parser: ArgParser = sub.add_parser(
        cmd.name,
        prog=f"{PROG} {cmd.name}",
        help=cmd.summary,
        description=cmd.description,
        formatter_class=Formatter,
        **kw,
    )
    parser.doc = cmd
    return parser


def workers_value(value: str) -> int | None:
    """``--workers N|auto``, parsed once: None for auto (a bad value is a usage error)."""
    from pcheckout.plan import policy  # only where a value is given: detect does not pay

    return policy.parse_workers(value)


def writer_value(value: str) -> str | None:
    """``--writer``: checked before any work starts (a bad value is a usage error)."""
    from pcheckout.plan import policy  # only where a value is given

    chosen = policy.explicit_writer(value, {}, {})
    return None if chosen is None else chosen.writer


def _types() -> tuple[Any, Any]:
    return workers_value, writer_value


def parser(only: str | None = None) -> ArgParser:
    """The whole command line: global options, then one subparser per command; ``only``:
    that command's options alone are declared, the others' subparsers are their names
    and summaries (what parsing a ``checkout`` line needs: ~3 ms less of every start)."""
    p = ArgParser(
        prog=PROG,
        usage=f"{PROG} [-C DIR] [-q] [--debug] COMMAND [ARGS]",
        description=MAIN.description,
        formatter_class=Formatter,
    )
    p.doc = MAIN
    _arg(
        p,
        "-C",
        dest="chdir",
        action="append",
        default=[],
        metavar="DIR",
        complete="dir",
        help="run as if started in DIR (as git -C: relative paths are then relative to DIR; "
        "several -C add up)",
    )
    _global(p, False)
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", parser_class=ArgParser
    )
    for cmd, add in _COMMANDS:
        if only is None or only == cmd.name:
            add(sub)
        else:
            _sub(sub, cmd)
    return p


def _add_checkout(sub: Any) -> None:
    workers, writer = _types()
    c = _sub(sub, CHECKOUT)
    _global(c, argparse.SUPPRESS)
    rev_help = "the branch, tag or commit to check out (default: HEAD)"
    _arg(c, "rev", nargs="?", default=None, metavar="REV", complete="rev", help=rev_help)
    dir_help = "the working tree (default: the current directory; see the global -C)"
    _arg(c, "-C", dest="directory", default=".", metavar="DIR", complete="dir", help=dir_help)
    _writing_options(c, workers, writer)
    force_help = (
        "discard local changes to tracked files (untracked files are never removed; ignored "
        "ones in the way are overwritten, as git overwrites them)"
    )
    _arg(c, "-f", "--force", action="store_true", help=force_help)
    _arg(c, "--no-hooks", action="store_true", help=NO_HOOKS_HELP)


def _writing_options(p: ArgParser, workers: Any, writer: Any) -> None:
    """-j, --writer, --no-adapt, -n and --json: checkout's and export's."""
    _arg(
        p, "-j", "--workers", type=workers, metavar="N|auto", help=WORKERS_HELP, complete=("auto",)
    )
    choices = ("pcheckout", "git", "auto")
    _arg(p, "--writer", type=writer, metavar="|".join(choices), help=WRITER_HELP, complete=choices)
    adapt_help = "keep the planned worker count for the whole run (no adapting while writing)"
    _arg(p, "--no-adapt", action="store_true", help=adapt_help)
    dry_help = "write nothing; report the filesystem, the work, the plan and why"
    _arg(p, "-n", "--dry-run", action="store_true", help=dry_help)
    _arg(p, "--json", action="store_true", help="one JSON object on stdout")


def _add_export(sub: Any) -> None:
    workers, writer = _types()
    e = _sub(sub, EXPORT)
    _global(e, argparse.SUPPRESS)
    _arg(e, "rev", metavar="REV", complete="rev", help="the commit or tree to write")
    _arg(e, "destination", metavar="DEST", complete="dir", help="where (made if absent)")
    repo_help = "the repository (default: the current directory)"
    _arg(e, "-C", dest="directory", default=".", metavar="REPO", complete="dir", help=repo_help)
    attr_help = (
        "read .gitattributes from the repository's working tree, not from REV's tree "
        "(as git archive --worktree-attributes)"
    )
    _arg(e, "--worktree-attributes", action="store_true", help=attr_help)
    _writing_options(e, workers, writer)


def _add_detect(sub: Any) -> None:
    d = _sub(sub, DETECT)
    _global(d, argparse.SUPPRESS)
    path_help = "the path to examine (default: the current directory)"
    _arg(d, "path", nargs="?", default=".", metavar="PATH", complete="path", help=path_help)
    _arg(d, "--json", action="store_true", help="one JSON object on stdout")
    table_help = "classify from a mount table captured elsewhere (a copy of /proc/self/mountinfo)"
    _arg(d, "--mountinfo", metavar="FILE", complete="file", help=table_help)


def _add_clone(sub: Any) -> None:
    """Documented here, parsed by ``pcheckout.clone.parse_args`` (git clone's grammar:
    abbreviations, bundles, options after URL, which argparse cannot declare faithfully)."""
    c = _sub(
        sub,
        CLONE,
        add_help=False,
        usage=f"{PROG} clone [git clone options] [--workers N|auto] [--no-adapt] [--no-hooks]\n"
        "                       [--json] [--debug] [--] URL [DIR]",
    )
    _arg(c, "url", metavar="URL", help="the repository to clone (as git clone takes it)")
    _arg(c, "directory", nargs="?", metavar="DIR", complete="dir", help="where (git's default)")
    workers_help = "the checkout's worker count (default: auto, as for 'checkout')"
    _arg(c, "--workers", metavar="N|auto", help=workers_help, complete=("auto",))
    _arg(c, "--no-adapt", action="store_true", help="keep the planned worker count")
    _arg(c, "--no-hooks", action="store_true", help=NO_HOOKS_HELP)
    json_help = "one JSON object on stdout; git's messages stay on stderr"
    _arg(c, "--json", action="store_true", help=json_help)
    _arg(c, "--debug", action="store_true", help="print each command run, and tracebacks")
    _arg(c, "-h", "--help", action="store_true", help="show this help message and exit")
    jobs = "git clone's own: submodules cloned at once (not the checkout's workers: --workers)"
    _arg(c, "-j", "--jobs", metavar="N", help=jobs)


def _add_tune(sub: Any) -> None:
    t = _sub(sub, TUNE)
    _global(t, argparse.SUPPRESS)
    path_help = "a directory in the mount to measure (default: the current directory)"
    _arg(t, "path", nargs="?", default=".", metavar="PATH", complete="dir", help=path_help)
    _arg(t, "--json", action="store_true", help="one JSON object on stdout")
    _arg(t, "--forget", action="store_true", help="drop the stored result for this mount")
    most = "the most workers tried (default: 64; counts halve from it down to 1)"
    _arg(t, "--max-workers", type=int, default=64, metavar="N", help=most)
    files_help = "files written per measurement (default: as many as the time budget allows)"
    _arg(t, "--files", type=int, metavar="N", help=files_help)
    budget = "the measurement's time budget (default: 10 s; half of it writes, half removes)"
    _arg(t, "--duration", type=float, metavar="SECONDS", help=budget)
    _arg(t, "--rounds", type=int, default=3, metavar="N", help="rounds, interleaved (default: 3)")
    no_writers = (
        "measure the worker count only; do not time pcheckout's engine against git's own "
        "checkout on a probe tree (then the writer follows the filesystem's kind)"
    )
    _arg(t, "--no-writers", action="store_true", help=no_writers)
    shared = (
        "also store the result in FILE by the mount's export (server:/export, //server/share, "
        "host:path), for every host that mounts it; checkouts read /etc/pcheckout/tuned.json "
        "or $PCHECKOUT_SHARED_TUNE"
    )
    _arg(t, "--shared", metavar="FILE", complete="file", help=shared)
    git_config = (
        "make plain git use this mount's count: an includeIf section in the global git config "
        "pointing at a file pcheckout owns (shown, then written)"
    )
    _arg(t, "--git-config", action="store_true", help=git_config)
    remove = "with --git-config: take that include and file out again"
    _arg(t, "--remove", action="store_true", help=remove)
    no_measure = "with --git-config: never measure; use the stored result or the policy"
    _arg(t, "--no-measure", action="store_true", help=no_measure)
    dry = "with --git-config: show what would be written, write nothing"
    _arg(t, "-n", "--dry-run", action="store_true", help=dry)


def _add_completion(sub: Any) -> None:
    c = _sub(sub, COMPLETION)
    _arg(c, "shell", metavar="SHELL", choices=SHELLS, complete=SHELLS, help="bash, zsh or fish")


def subparsers(p: argparse.ArgumentParser) -> dict[str, ArgParser]:
    """Each command's parser, by name."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def options(p: argparse.ArgumentParser) -> list[str]:
    """Every option string ``p`` takes."""
    return [s for a in p._actions for s in a.option_strings]


def suggest(word: str, candidates: Sequence[str]) -> str:
    """``; did you mean 'x'?`` for the closest candidate, or nothing."""
    import difflib  # only on a usage error

    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


#: every command, in ``--help``'s order, with what declares its options
_COMMANDS: tuple[tuple[Command, Callable[[Any], None]], ...] = (
    (CHECKOUT, _add_checkout),
    (EXPORT, _add_export),
    (DETECT, _add_detect),
    (CLONE, _add_clone),
    (TUNE, _add_tune),
    (COMPLETION, _add_completion),
)
