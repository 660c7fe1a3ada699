"""Command line: parse, set up output, call the core, print its record, map errors to exit codes.

Colour, TTY detection and progress bars live in ``cli/`` only; the core
(``checkout.py``, ``export.py``, ``fs/detect.py``, ``tune/``) takes
typed options and never prints.  The grammar and its words are ``cli/parser.py``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from pcheckout.cli import parser as grammar
from pcheckout.cli.console import ConsoleReporter
from pcheckout.cli.parser import PROG
from pcheckout.errors import (
    Interrupted,
    NotARepositoryError,
    PcheckoutError,
    RevisionRefusedError,
    UnbornHeadError,
    UsageError,
)

if TYPE_CHECKING:
    from pcheckout.fs.detect import FsInfo
    from pcheckout.options import Result
    from pcheckout.plan.policy import Tuned
    from pcheckout.tune.command import TuneRequest

# Each command imports the core it runs inside its function: a checkout needs the
# writers, `detect` only the detection (measured on the dev VM: `pcheckout detect
# --json` took 110 ms of CPU, 191 ms once every command's core was imported up front).

__all__ = ["ConsoleReporter", "main", "entrypoint"]


def print_json(obj: object) -> None:
    """Every command's JSON goes through here: one object, indented, on stdout."""
    import json

    print(json.dumps(obj, indent=2))


def _note_clamp(workers: int | None, ui: ConsoleReporter) -> None:
    """An oversized ``-j`` is said once, on stderr (the plan's reason says it again)."""
    if workers is None:
        return
    from pcheckout.plan.policy import MAX_WORKERS  # imported already: -j parsed it

    if workers > MAX_WORKERS:
        ui.note(f"{PROG}: note: -j {workers}: at most {MAX_WORKERS} workers; using {MAX_WORKERS}")


# -- commands ----------------------------------------------------------------
def _cmd_checkout(args: argparse.Namespace, ui: ConsoleReporter) -> int:
    from pcheckout.git import round1  # imports nothing of the checkout's

    # Round 1's git processes first: git answers while the checkout's modules are
    # imported (~40 ms), instead of after them.
    round1.start(
        "git",
        os.fspath(Path(args.directory)),
        "HEAD" if args.rev is None else args.rev,
        dry_run=args.dry_run,
        force=args.force,
        writer=args.writer,
    )
    try:
        return _checkout(args, ui)
    finally:
        round1.discard()  # (taken by round 1, unless the run failed first)


def _checkout(args: argparse.Namespace, ui: ConsoleReporter) -> int:
    from pcheckout.checkout import checkout  # see the imports' note
    from pcheckout.options import CheckoutOptions

    _note_clamp(args.workers, ui)
    opts = CheckoutOptions(
        directory=Path(args.directory),
        rev="HEAD" if args.rev is None else args.rev,
        workers=args.workers,
        dry_run=args.dry_run,
        force=args.force,
        adapt=not args.no_adapt,
        writer=args.writer,
        hooks=not args.no_hooks,
        counts=not args.quiet or args.json,  # (-q prints no counts)
        head_lines=not (args.quiet or args.json),  # (git's writer: git's lines, below)
    )
    reported: list[Result] = []

    def moved(result: Result) -> None:  # the summary and git's lines, before any hook runs
        _report(args, result)
        reported.append(result)
        _say_head(Path(args.directory), result, carried=not args.force)

    if not (args.quiet or args.json):
        ui.on_moved = moved
    try:
        result = checkout(opts, ui)  # a failing hook raises after the report was printed
    except UnbornHeadError:
        if args.rev is not None:
            raise
        # `git checkout` without a REV (builtin/checkout.c checkout_branch(): die)
        raise RevisionRefusedError("You are on a branch yet to be born") from None
    if not reported:
        _report(args, result)
    return 0


def _say_head(directory: Path, result: Result, *, carried: bool) -> None:
    """git checkout's lines for where HEAD went, on stderr, with git's facts (subjects,
    commits left behind, a new branch's upstream) asked for only here; after a switch
    that carried local changes (``carried``: not forced), those it carried, except on a
    latency-bound mount."""
    from pcheckout.cli import render
    from pcheckout.git import describe
    from pcheckout.git.runner import MIN_GIT, Git

    move = result.head
    if move is None:
        return
    if result.said is not None:  # a switch by git's writer, which printed them itself
        for stream, line in result.said:
            print(line, file=sys.stdout if stream == "out" else sys.stderr, flush=True)
        return
    git = Git(directory, version=(*MIN_GIT, 0))  # plain log and for-each-ref: no feature test
    old = move.previous_commit
    leaving = move.moved and move.previous_branch is None and old not in (None, move.commit)
    wanted = [c for c in (old if leaving else None, move.commit) if c is not None]
    wanted = wanted if move.moved and (leaving or move.branch is None) else []
    left = describe.left_behind(git, old) if leaving and old is not None else None
    tracking = describe.tracking(git, move.branch) if move.branch else None
    # (on a latency-bound mount the list is an lstat round trip per file: not asked)
    listed = carried and result.mode == "switch" and not result.filesystem.latency_bound
    local = describe.local_changes(git) if listed else []
    onelines = describe.onelines(git, wanted)
    report = render.HeadReport(move, move.rev, onelines, left, tracking, local)
    for stream, line in render.head_lines(report):
        print(line, file=sys.stdout if stream == "out" else sys.stderr, flush=True)


def _cmd_export(args: argparse.Namespace, ui: ConsoleReporter) -> int:
    from pcheckout.export import export  # see the imports' note
    from pcheckout.options import ExportOptions

    _note_clamp(args.workers, ui)
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
    _report(args, export(opts, ui))
    return 0


def _report(args: argparse.Namespace, result: Result) -> None:
    for warning in result.warnings:  # git's own wording (sparse-checkout patterns)
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print_json(result.to_json())
    elif result.dry_run:
        from pcheckout.cli import render
        from pcheckout.cli.console import console

        render.plan(console(), result)
    elif not args.quiet:
        from pcheckout.cli import render  # (not imported where nothing is said: -q)

        print(render.summary(result))
    sys.stdout.flush()


def _cmd_detect(args: argparse.Namespace, ui: ConsoleReporter) -> int:
    from pcheckout.fs import detect as fsdetect  # see the imports' note
    from pcheckout.plan.cpus import CpuInfo  # see the imports' note

    if args.mountinfo and not os.path.isfile(args.mountinfo):
        raise UsageError(f"--mountinfo: no such file: {args.mountinfo}")
    info = fsdetect.detect(args.path, mountinfo=args.mountinfo)
    tuned = _stored_tune(info)
    cpus = CpuInfo.current()
    if args.json:
        print_json({**info.to_json(), **_tuned_json(info, tuned), "cpus": cpus.to_json()})
    else:
        from pcheckout.cli import render
        from pcheckout.cli.console import console

        render.fs_info(console(), info, tuned, cpus)
    return 0


def _stored_tune(info: FsInfo) -> Tuned | None:
    """The tune result a checkout there would use (the shared file by PCHECKOUT_SHARED_TUNE
    or its default place: detect reads no repository's config)."""
    from pcheckout.plan import tunecache  # see the imports' note

    try:
        return tunecache.lookup(info, tunecache.shared_path(os.environ, {}))
    except (PcheckoutError, OSError, ValueError):
        return None


def _tuned_json(info: FsInfo, tuned: Tuned | None) -> dict[str, object]:
    from pcheckout.plan.tunecache import export_key  # see the imports' note

    return {"export": export_key(info), "tuned": None if tuned is None else tuned.to_json()}


def _cmd_tune(args: argparse.Namespace, ui: ConsoleReporter) -> int:
    from pcheckout.cli import render
    from pcheckout.cli.console import console
    from pcheckout.tune import command as tune  # the workload: only this command runs it

    request = _tune_request(args)
    fs = tune.check(request)
    if request.git_config:
        return _tune_git_config(args, request, fs)
    if request.forget:
        forgotten = tune.forget(fs)
        if args.json:
            print_json(forgotten.to_json())
        elif not args.quiet:
            print(
                ("forgot the stored result for " if forgotten.dropped else "nothing stored for ")
                + forgotten.mount_point
            )
        return 0
    err = console(stderr=True)
    say = None if (args.quiet or args.json) else (lambda msg: err.print(f"[dim]{msg}[/dim]"))
    result = tune.measure(request, fs, say, lambda msg: ui.note(f"{PROG}: note: {msg}"))
    if request.shared and not args.quiet and not args.json:
        ui.note(f"{PROG}: stored for {tune.export_of(fs)} in {request.shared}")
    if args.json:
        print_json(result.to_json())
    elif not args.quiet:
        render.tune_result(console(), result)
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
        shared=args.shared,
    )


def _tune_git_config(args: argparse.Namespace, request: TuneRequest, fs: FsInfo) -> int:
    """``tune PATH --git-config``: shown, then written (or ``--remove``: taken out)."""
    from pcheckout.tune import command as tune  # the workload: only this command runs it

    if request.remove:
        removed = tune.remove_git_config(request, fs)
        if args.json:
            print_json(removed.to_json())
        elif not args.quiet:
            verb = "would remove" if removed.dry_run else "removed"
            print(
                "\n".join(f"{verb} {r}" for r in removed.removed)
                or f"nothing to remove for {removed.mount_point}"
            )
        return 0
    planned = tune.plan_git_config(request, fs)
    if not args.quiet and not args.json:
        print(("would write" if args.dry_run else "writing") + ":\n" + planned.change.describe())
    written = tune.apply_git_config(request, planned)
    if args.json:
        print_json(written.to_json())
    elif not args.quiet and not planned.change.needed:
        print("already in place: nothing to write")
    elif not args.quiet and not args.dry_run:
        print("written")
    return 0


def _cmd_completion(args: argparse.Namespace, ui: ConsoleReporter) -> int:
    from pcheckout.cli import completion  # only this command writes one

    sys.stdout.write(completion.script(args.shell))
    return 0


def _cmd_clone(words: Sequence[str], top: argparse.Namespace) -> int:
    from pcheckout import clone
    from pcheckout.cli import render

    args = clone.parse_args(words)
    if args.help:
        print(grammar.subparsers(grammar.parser())["clone"].format_help(), end="")
        return 0
    workers = grammar.workers_value(args.workers) if args.workers is not None else None
    quiet = top.quiet or args.quiet
    ui = ConsoleReporter(quiet=quiet or args.json, debug=top.debug or args.debug, notes=not quiet)
    if args.jobs is not None and not args.recurse_submodules and args.workers is None:
        ui.note(
            f"{PROG}: note: -j/--jobs is git clone's count of submodules cloned at once; "
            "the checkout's worker count is --workers"
        )
    _note_clamp(workers, ui)

    def moved(result: Result) -> None:  # git clone's advice, under -q too, before any hook
        if result.head is not None:
            for line in render.clone_head_lines(result.head):
                print(line, file=sys.stderr, flush=True)

    ui.on_moved = moved
    result = clone.clone(clone.CloneOptions(args, workers=workers), ui)
    if args.json:
        print_json(result.to_json())
    elif not quiet:
        print(render.clone_summary(result))
    return 0


COMMANDS = {
    "checkout": _cmd_checkout,
    "export": _cmd_export,
    "detect": _cmd_detect,
    "tune": _cmd_tune,
    "completion": _cmd_completion,
}


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum, "run 'pcheckout checkout' again to finish")


# -- the command line --------------------------------------------------------
def _command_index(argv: Sequence[str]) -> int | None:
    """Where the command word is: the first word that is neither a global option nor the
    value of one (``-C DIR``)."""
    k = 0
    while k < len(argv):
        word = argv[k]
        if word == "--" or not word.startswith("-"):
            return None if word == "--" else k
        k += 2 if word == "-C" else 1
    return None


def _unknown(p: argparse.ArgumentParser, command: str, extras: Sequence[str]) -> UsageError:
    """argparse's "unrecognized arguments", with the closest option of that command."""
    sub = grammar.subparsers(p)[command]
    first = next((w for w in extras if w.startswith("-")), None)
    where = f"'{PROG} {command} --help'"
    if first is None:
        return UsageError(f"unrecognized arguments: {' '.join(extras)} (see {where})")
    name = first.split("=", 1)[0]
    hint = grammar.suggest(name, grammar.options(sub) + grammar.options(p))
    return UsageError(f"{command}: unknown option '{name}'{hint} (see {where})")


def _parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str] | None]:
    """The namespace; for ``clone`` only the global options, and clone's own words."""
    k = _command_index(argv)
    # (a command's options alone: the others' are never parsed on its line)
    p = grammar.parser(only=argv[k] if k is not None else None)
    if k is not None:
        command = argv[k]
        names = list(grammar.subparsers(p))
        if command not in names:
            hint = grammar.suggest(command, names)
            raise UsageError(f"'{command}' is not a {PROG} command{hint} (see '{PROG} --help')")
        if command == "clone":
            # git clone's options cannot be declared to argparse faithfully
            # (abbreviations, bundles, options after URL): clone parses its own.
            return p.parse_args(argv[:k]), list(argv[k + 1 :])
    args, extras = p.parse_known_args(argv)
    if extras and args.command:
        raise _unknown(p, args.command, extras)
    if extras:
        p.error(f"unrecognized arguments: {' '.join(extras)}")
    if args.command is None:
        raise UsageError(
            "a command is required: clone, checkout, export, detect, tune or completion "
            f"(see '{PROG} --help')"
        )
    return args, None


def _chdir(dirs: Sequence[str]) -> None:
    """``-C DIR``, as git: each one relative to the one before (its message, exit 128)."""
    for d in dirs:
        try:
            os.chdir(d)
        except OSError as exc:
            raise NotARepositoryError(f"cannot change to '{d}': {exc.strerror}") from None


def _wants_json(argv: Sequence[str]) -> bool:
    words = argv[: list(argv).index("--")] if "--" in argv else argv
    return "--json" in words


def _fail(message: str, code: int, as_json: bool) -> int:
    """The one line on stderr; with ``--json`` also an object on stdout (docs/json.md)."""
    if message:
        print(f"{PROG}: error: {message}", file=sys.stderr)
    if as_json:
        print_json({"error": message or "git failed (its message is above)", "exit_code": code})
    return code


def _run(argv: Sequence[str]) -> int:
    args, clone_words = _parse(argv)
    _chdir(args.chdir)
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, _on_sigterm)
    if clone_words is not None:
        return _cmd_clone(clone_words, args)
    ui = ConsoleReporter(quiet=args.quiet, debug=args.debug)
    command: Any = COMMANDS[args.command]
    code: int = command(args, ui)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    as_json = _wants_json(argv)
    cwd = os.getcwd()
    try:
        return _run(argv)
    except PcheckoutError as exc:
        if debug:
            import traceback  # only with --debug

            traceback.print_exc()
        return _fail(str(exc), exc.exit_code, as_json)  # empty: git has said why already
    except KeyboardInterrupt:
        if debug:
            import traceback  # only with --debug

            traceback.print_exc()
        return _fail("interrupted; run the same command again to finish", 130, as_json)
    except BrokenPipeError:
        return 1
    finally:
        os.chdir(cwd)


def entrypoint() -> None:
    code = main()
    sys.stdout.flush()
    sys.exit(code)
