"""Command line: parse, set up output, call the core, map errors to exit codes.

Colour, TTY detection and progress bars live in ``cli/`` only; the core
(``checkout.py``, ``export.py``, ``fs/detect.py``, ``tune/``) takes
typed options and never prints.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from pcheckout import __version__
from pcheckout.errors import Interrupted, PcheckoutError, UsageError

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from pcheckout.fs.detect import FsInfo
    from pcheckout.options import Result
    from pcheckout.tune.command import TuneRequest

# Each command imports the core it runs inside its function: a checkout needs the
# writers, `detect` only the detection (measured on the dev VM: `pcheckout detect
# --json` took 110 ms of CPU, 191 ms once every command's core was imported up front).

PROG = "pcheckout"


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _workers(value: str) -> int | None:
    """``--workers N|auto``, parsed once: None for auto (a bad value is a usage error)."""
    from pcheckout.plan import policy

    return policy.parse_workers(value)


def _common(default: object) -> _ArgParser:
    common = _ArgParser(add_help=False)
    common.add_argument(
        "-q", "--quiet", action="store_true", default=default, help="no progress, no summary"
    )
    common.add_argument(
        "--debug",
        action="store_true",
        default=default,
        help="print each git command run, and a traceback on errors",
    )
    return common


WRITER_HELP = (
    "who writes: pcheckout's engine, git's own parallel checkout, or 'auto' "
    "(default: git where writing is CPU-bound, pcheckout where calls wait)"
)
WORKERS_HELP = (
    "worker count: a number, or 'auto' (default: detect the filesystem, "
    "use a tuned value or the policy, and adapt while writing)"
)


def _parser() -> argparse.ArgumentParser:
    # -q/--debug work before or after the command; the subcommands' copies must
    # not reset a value given before the command, hence SUPPRESS there.
    p = _ArgParser(
        prog=PROG,
        description="Filesystem-aware parallel checkout for git.",
        parents=[_common(False)],
    )
    common = _common(argparse.SUPPRESS)
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgParser)
    _add_checkout(sub, common)
    _add_export(sub, common)
    _add_detect(sub, common)
    sub.add_parser(
        "clone", help="git clone, then the parallel checkout (see 'clone --help')", add_help=False
    )
    _add_tune(sub, common)
    return p


def _add_checkout(sub: argparse._SubParsersAction[_ArgParser], common: _ArgParser) -> None:
    c = sub.add_parser(
        "checkout",
        parents=[common],
        help="write a commit's tree and index",
        description="Write every file of REV into the working tree, in "
        "parallel, then the index; HEAD ends where 'git checkout REV' puts it.",
    )
    c.add_argument("rev", nargs="?", default="HEAD", metavar="REV", help="default: HEAD")
    c.add_argument(
        "-C",
        dest="directory",
        default=".",
        metavar="DIR",
        help="run as if started in DIR (like git -C)",
    )
    c.add_argument("-j", "--workers", type=_workers, metavar="N|auto", help=WORKERS_HELP)
    c.add_argument("--writer", type=_writer, metavar="pcheckout|git|auto", help=WRITER_HELP)
    c.add_argument(
        "--no-adapt",
        action="store_true",
        help="keep the planned worker count for the whole checkout",
    )
    c.add_argument(
        "-n",
        "--dry-run",
        action="store_true",
        help="write nothing; report the filesystem, the work and the plan",
    )
    c.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    c.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="discard local changes to tracked files (untracked files are never removed)",
    )


def _add_export(sub: argparse._SubParsersAction[_ArgParser], common: _ArgParser) -> None:
    e = sub.add_parser(
        "export",
        parents=[common],
        help="write a tree alone (no .git, no index)",
        description="Write REV's tree into DEST, like 'git archive REV | tar -x'.",
    )
    e.add_argument("rev", metavar="REV")
    e.add_argument("destination", metavar="DEST")
    e.add_argument(
        "-C",
        dest="directory",
        default=".",
        metavar="REPO",
        help="the repository (default: current directory)",
    )
    e.add_argument(
        "--worktree-attributes",
        action="store_true",
        help="read .gitattributes from the repository's working tree, not from "
        "REV's tree (as git archive --worktree-attributes)",
    )
    e.add_argument("-j", "--workers", type=_workers, metavar="N|auto", help=WORKERS_HELP)
    e.add_argument("--writer", type=_writer, metavar="pcheckout|git|auto", help=WRITER_HELP)
    e.add_argument("--no-adapt", action="store_true", help="keep the planned worker count")
    e.add_argument("-n", "--dry-run", action="store_true", help="write nothing; report the plan")
    e.add_argument("--json", action="store_true", help="machine-readable report on stdout")


def _add_detect(sub: argparse._SubParsersAction[_ArgParser], common: _ArgParser) -> None:
    d = sub.add_parser(
        "detect",
        parents=[common],
        help="which filesystem holds PATH, and what that means for parallel writes",
    )
    d.add_argument("path", nargs="?", default=".", metavar="PATH")
    d.add_argument("--json", action="store_true", help="one JSON object on stdout")
    d.add_argument(
        "--mountinfo",
        metavar="FILE",
        help="classify from a mount table captured elsewhere (a mountinfo file)",
    )


def _add_tune(sub: argparse._SubParsersAction[_ArgParser], common: _ArgParser) -> None:
    t = sub.add_parser(
        "tune",
        parents=[common],
        help="measure the best worker count for the filesystem holding PATH and remember it",
    )
    t.add_argument("path", nargs="?", default=".", metavar="PATH")
    t.add_argument("--json", action="store_true", help="one JSON object on stdout")
    t.add_argument("--forget", action="store_true", help="drop the stored result for this mount")
    t.add_argument("--max-workers", type=int, default=64, metavar="N")
    t.add_argument("--files", type=int, metavar="N", help="files written per measurement")
    t.add_argument("--duration", type=float, metavar="SECONDS", help="time budget")
    t.add_argument("--rounds", type=int, default=3, metavar="N")
    t.add_argument(
        "--no-writers",
        action="store_true",
        help="measure the worker count only; do not time pcheckout's engine against "
        "git's own checkout on a probe tree (then the writer follows the count)",
    )
    t.add_argument(
        "--git-config",
        action="store_true",
        help="make plain git use this mount's count: an includeIf section in the "
        "global git config pointing at a file pcheckout owns (shown, then written)",
    )
    t.add_argument(
        "--remove",
        action="store_true",
        help="with --git-config: take that include and file out again",
    )
    t.add_argument(
        "--no-measure",
        action="store_true",
        help="with --git-config: never measure; use the stored result or the policy",
    )
    t.add_argument(
        "-n",
        "--dry-run",
        action="store_true",
        help="with --git-config: show what would be written, write nothing",
    )


# -- output ------------------------------------------------------------------
class ConsoleReporter:
    """Progress bar on a TTY (stderr), silence otherwise; ``--debug`` lines."""

    def __init__(self, *, quiet: bool, debug: bool, notes: bool | None = None) -> None:
        self.quiet = quiet
        self.notes = not quiet if notes is None else notes
        self.debug_on = debug
        self.progress: Progress | None = None
        self._task: TaskID | None = None
        self._fetch_task: TaskID | None = None
        self._last = 0.0
        self._t0 = 0.0

    def debug(self, message: str) -> None:
        if self.debug_on:
            print(f"[debug] {message}", file=sys.stderr, flush=True)

    def note(self, message: str) -> None:
        if self.notes:
            print(message, file=sys.stderr, flush=True)

    def _bars(self) -> Progress:
        """The progress display (made on first use): a fetch line, then the writes."""
        if self.progress is None:
            # rich is imported only when a bar is drawn: its import costs more than a
            # small checkout's writing (docs/design.md, start-up).
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            # Files are the unit (the byte total is not known before writing without
            # asking git for every blob's size); bytes and rates are shown beside.
            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}  {task.fields[nbytes]}  {task.fields[rate]}"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self.progress.start()
        return self.progress

    def start(self, files: int, nbytes: int, workers: int) -> None:
        if self.quiet or not sys.stderr.isatty() or files == 0:
            return
        self._task = self._bars().add_task("writing", total=files, unit="files", nbytes="", rate="")
        self._t0 = time.monotonic()

    def fetch(self, objects: int, total: int, nbytes: int) -> None:
        """A partial clone's blobs arriving (objects of total, bytes of packs)."""
        if self.quiet or not sys.stderr.isatty() or total == 0:
            return
        from pcheckout.cli import render  # only where something is drawn

        bars = self._bars()
        if self._fetch_task is None:
            self._fetch_task = bars.add_task(
                "fetching", total=total, unit="blobs", nbytes="", rate=""
            )
        bars.update(self._fetch_task, completed=objects, nbytes=render.human_bytes(nbytes))

    def update(self, files: int, nbytes: int) -> None:
        if self.progress is None or self._task is None:
            return
        now = time.monotonic()
        if now - self._last < 0.1:  # ~10 Hz is plenty for a human
            return
        from pcheckout.cli import render  # only where something is drawn

        self._last = now
        dt = max(now - self._t0, 1e-6)
        # git's writer does not say how many bytes it wrote: files only then.
        self.progress.update(
            self._task,
            completed=files,
            nbytes=render.human_bytes(nbytes) if nbytes else "",
            rate=f"{files / dt:,.0f} files/s"
            + (f", {render.human_bytes(nbytes / dt)}/s" if nbytes else ""),
        )

    def finish(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
            self._task = self._fetch_task = None


# -- commands ----------------------------------------------------------------
def _cmd_checkout(args: argparse.Namespace, ui: ConsoleReporter) -> int:
    from pcheckout.checkout import checkout  # see the imports' note
    from pcheckout.options import CheckoutOptions

    opts = CheckoutOptions(
        directory=Path(args.directory),
        rev=args.rev,
        workers=args.workers,
        dry_run=args.dry_run,
        force=args.force,
        adapt=not args.no_adapt,
        writer=args.writer,
    )
    result = checkout(opts, ui)
    return _report(args, result)


def _cmd_export(args: argparse.Namespace, ui: ConsoleReporter) -> int:
    from pcheckout.export import export  # see the imports' note
    from pcheckout.options import ExportOptions

    opts = ExportOptions(
        repository=Path(args.directory),
        rev=args.rev,
        destination=Path(args.destination),
        workers=args.workers,
        dry_run=args.dry_run,
        adapt=not args.no_adapt,
        writer=args.writer,
        worktree_attributes=args.worktree_attributes,
    )
    return _report(args, export(opts, ui))


def _writer(value: str) -> str | None:
    """``--writer``: checked before any work starts (a bad value is a usage error)."""
    from pcheckout.plan import policy

    chosen = policy.explicit_writer(value, {}, {})
    return None if chosen is None else chosen.writer


def _report(args: argparse.Namespace, result: Result) -> int:
    import json

    from pcheckout.cli import render

    for warning in result.warnings:  # git's own wording (sparse-checkout patterns)
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    elif result.dry_run:
        from rich.console import Console  # see ConsoleReporter.start

        render.plan(Console(), result)
    elif not args.quiet:
        print(render.summary(result))
    return 0


def _cmd_detect(args: argparse.Namespace, ui: ConsoleReporter) -> int:
    import json

    from rich.console import Console  # see ConsoleReporter.start

    from pcheckout.cli import render
    from pcheckout.fs import detect as fsdetect  # see the imports' note

    if args.mountinfo and not os.path.isfile(args.mountinfo):
        raise UsageError(f"--mountinfo: no such file: {args.mountinfo}")
    info = fsdetect.detect(args.path, mountinfo=args.mountinfo)
    if args.json:
        print(json.dumps(info.to_json(), indent=2))
    else:
        render.fs_info(Console(), info)
    return 0


def _cmd_tune(args: argparse.Namespace, ui: ConsoleReporter) -> int:
    import json

    from rich.console import Console  # see ConsoleReporter.start

    from pcheckout.cli import render
    from pcheckout.tune import command as tune  # the workload: only this command runs it

    request = _tune_request(args)
    fs = tune.check(request)
    if request.git_config:
        return _tune_git_config(args, request, fs)
    if request.forget:
        forgotten = tune.forget(fs)
        if args.json:
            print(json.dumps(forgotten.to_json()))
        elif not args.quiet:
            print(
                ("forgot the stored result for " if forgotten.dropped else "nothing stored for ")
                + forgotten.mount_point
            )
        return 0
    err = Console(stderr=True)
    say = None if (args.quiet or args.json) else (lambda msg: err.print(f"[dim]{msg}[/dim]"))
    result = tune.measure(request, fs, say, lambda msg: ui.note(f"{PROG}: note: {msg}"))
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    elif not args.quiet:
        render.tune_result(Console(), result)
    return 0


def _tune_request(args: argparse.Namespace) -> TuneRequest:
    """``tune``'s arguments as the core's request."""
    from pcheckout.tune.command import TuneRequest  # the workload: only this command runs it
    from pcheckout.tune.workload import TuneOptions

    measure = TuneOptions(
        path=args.path,
        max_workers=args.max_workers,
        files=args.files,
        duration=args.duration,
        rounds=args.rounds,
    )
    return TuneRequest(
        measure,
        writers=not args.no_writers,
        forget=args.forget,
        git_config=args.git_config,
        remove=args.remove,
        measure_missing=not args.no_measure,
        dry_run=args.dry_run,
    )


def _tune_git_config(args: argparse.Namespace, request: TuneRequest, fs: FsInfo) -> int:
    """``tune PATH --git-config``: shown, then written (or ``--remove``: taken out)."""
    import json

    from pcheckout.tune import command as tune  # the workload: only this command runs it

    if request.remove:
        removed = tune.remove_git_config(request, fs)
        if args.json:
            print(json.dumps(removed.to_json()))
        elif not args.quiet:
            print(
                "\n".join(f"removed {r}" for r in removed.removed)
                or f"nothing to remove for {removed.mount_point}"
            )
        return 0
    planned = tune.plan_git_config(request, fs)
    if not args.quiet and not args.json:
        print(("would write" if args.dry_run else "writing") + ":\n" + planned.change.describe())
    written = tune.apply_git_config(request, planned)
    if args.json:
        print(json.dumps(written.to_json(), indent=2))
    elif not args.quiet and not args.dry_run:
        print("written" if written.changed else "already in place: nothing to write")
    return 0


CLONE_HELP = f"""\
usage: {PROG} clone [git clone options] [--workers N|auto] [--no-adapt] [--json] [--debug]
                       [--] URL [DIR]

Clone a repository as 'git clone' does, with the checkout written in parallel:
runs 'git clone --no-checkout' with every git clone option given, then checks
out what git clone would have (the remote HEAD or --branch, the sparse cone of
--sparse), and with --recurse-submodules clones and checks out the submodules
side by side. The result is git clone's: files, index, HEAD, refs, config,
reflog, .git/shallow. --no-checkout, --bare and --mirror write no files, as in
git. DIR defaults to the name git clone guesses from URL.

pcheckout's own options (never passed to git):
  --workers N|auto  worker count of the checkout (default: auto, as 'checkout')
  --no-adapt        keep the planned worker count for the whole checkout
  --json            one JSON object on stdout (docs/json.md); git's messages
                    stay on stderr
  --debug           print each command run, and a traceback on errors
  -h, --help        this help

Every other option is git clone's and means what it means there, among them:
  -j, --jobs N      git clone's: submodules cloned at once (NOT the checkout's
                    workers: use --workers)
  -n, --no-checkout, --bare, --mirror, -b/--branch, --depth, --shallow-since,
  --single-branch, --filter, --sparse, -o/--origin, -c/--config key=value,
  --reference, --dissociate, --shared, --template, --separate-git-dir,
  --recurse-submodules, -q/--quiet, --progress, ...

Exit codes: git clone's own failures exit with git's code (128) after git's
message; 1 for a failed checkout (the clone is then complete: 'pcheckout
checkout -C DIR' finishes it), 2 usage, 130/143 interrupted.
"""


def _cmd_clone(words: Sequence[str], quiet: bool, debug: bool) -> int:
    import json

    from pcheckout import clone
    from pcheckout.cli import render

    args = clone.parse_args(words)
    if args.help:
        print(CLONE_HELP, end="")
        return 0
    workers = _workers(args.workers) if args.workers is not None else None
    quiet = quiet or args.quiet
    ui = ConsoleReporter(quiet=quiet or args.json, debug=debug or args.debug, notes=not quiet)
    if args.jobs is not None and not args.recurse_submodules and args.workers is None:
        ui.note(
            f"{PROG}: note: -j/--jobs is git clone's count of submodules cloned at once; "
            "the checkout's worker count is --workers"
        )
    result = clone.clone(clone.CloneOptions(args, workers=workers), ui)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    elif not quiet:
        print(render.clone_summary(result))
    return 0


def _command_index(argv: Sequence[str]) -> int | None:
    """Where the command word is: the first word that is not an option."""
    for k, word in enumerate(argv):
        if not word.startswith("-"):
            return k
    return None


COMMANDS = {
    "checkout": _cmd_checkout,
    "export": _cmd_export,
    "detect": _cmd_detect,
    "tune": _cmd_tune,
}


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum, "run 'pcheckout checkout' again to finish")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        k = _command_index(argv)
        if k is not None and argv[k] == "clone":
            # git clone's options cannot be declared to argparse faithfully
            # (abbreviations, bundles, options after URL): clone parses its own.
            top = _parser().parse_args(argv[:k])
            if hasattr(signal, "SIGTERM"):
                signal.signal(signal.SIGTERM, _on_sigterm)
            return _cmd_clone(argv[k + 1 :], top.quiet, top.debug)
        args = _parser().parse_args(argv)
        if args.command is None:
            raise UsageError(
                "a command is required: clone, checkout, export, detect or tune "
                f"(see '{PROG} --help')"
            )
        ui = ConsoleReporter(quiet=args.quiet, debug=args.debug)
        if hasattr(signal, "SIGTERM"):
            signal.signal(signal.SIGTERM, _on_sigterm)
        return COMMANDS[args.command](args, ui)
    except PcheckoutError as exc:
        if debug:
            import traceback  # only with --debug

            traceback.print_exc()
        if str(exc):  # empty: git has said why already (GitCloneError)
            print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        if debug:
            import traceback  # only with --debug

            traceback.print_exc()
        print(f"{PROG}: error: interrupted; run the same command again to finish", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1


def entrypoint() -> None:
    code = main()
    sys.stdout.flush()
    sys.exit(code)
