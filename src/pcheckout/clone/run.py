"""The run: ``git clone --no-checkout``, then the checkout phase, then the submodules."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pcheckout.checkout import checkout
from pcheckout.clone.args import CloneArgs
from pcheckout.clone.dirname import destination
from pcheckout.clone.reporter import CloneReporter
from pcheckout.clone.stage import ENV as STAGE_ENV
from pcheckout.clone.stage import move_git_dir, remove_partial_clone, scratch_dir, worth_staging
from pcheckout.errors import (
    GitCloneError,
    HookError,
    Interrupted,
    UnknownRevisionError,
    finished_by,
)
from pcheckout.git.runner import Git
from pcheckout.options import CheckoutOptions, Result

if TYPE_CHECKING:
    from pcheckout.clone.submodules import SubmoduleResult


@dataclass(frozen=True)
class CloneOptions:
    args: CloneArgs
    workers: int | None = None  # --workers parsed (None: auto)
    cwd: Path = field(default_factory=Path.cwd)
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass
class CloneResult:
    url: str
    directory: Path
    bare: bool
    clone_seconds: float
    checkout: Result | None = None
    skipped: str | None = None  # why there was no checkout phase
    submodules: list[SubmoduleResult] = field(default_factory=list)
    seconds: float = 0.0
    staged: bool = False  # the git dir was written on local scratch space, then copied

    def to_json(self) -> dict[str, object]:
        return {
            "mode": "clone",
            "url": self.url,
            "directory": str(self.directory),
            "bare": self.bare,
            "clone_seconds": round(self.clone_seconds, 4),
            "staged": self.staged,
            "checkout": self.checkout.to_json() if self.checkout is not None else None,
            "skipped": self.skipped,
            "submodules": [s.to_json() for s in self.submodules],
            "seconds": round(self.seconds, 4),
        }


def clone(opts: CloneOptions, ui: CloneReporter) -> CloneResult:
    """What ``git clone`` with ``opts.args`` does: its clone phase, then the checkout."""
    args = opts.args
    t0 = time.monotonic()
    dest = destination(args)
    staged = _clone_phase(opts, dest, ui)
    if dest is None:  # pragma: no cover - git dies when it cannot guess one either
        raise GitCloneError("no directory name could be guessed", 128)
    target = Path(os.path.abspath(os.path.join(opts.cwd, dest)))
    result = CloneResult(
        args.url,
        target,
        args.bare or args.mirror,
        time.monotonic() - t0,
        staged=staged,
    )
    if args.bare or args.mirror:
        result.skipped = "mirror" if args.mirror else "bare"
    elif args.no_checkout:
        result.skipped = "no-checkout"
    else:
        _checkout_phase(result, opts, dest, ui)
    result.seconds = time.monotonic() - t0
    return result


def _clone_phase(opts: CloneOptions, dest: str | None, ui: CloneReporter) -> bool:
    """``git clone --no-checkout`` into ``dest``, its git dir written on local scratch
    space and copied where that pays (see stage.py); whether it was."""
    args = opts.args
    cmd = ["git", "clone", *args.git_options, "--no-checkout", "--", args.url]
    work = Path(os.path.abspath(os.path.join(opts.cwd, dest))) if dest is not None else None
    scratch = _staging(args, work, opts.environ, ui)
    existed = work is not None and os.path.lexists(work)
    if scratch is not None:
        cmd.insert(2, f"--separate-git-dir={scratch / 'git'}")
    try:
        run_git_clone(
            [*cmd, dest] if dest is not None else cmd,
            cwd=opts.cwd,
            environ=opts.environ,
            debug=ui.debug,
        )
        if scratch is not None and work is not None:
            t_copy = time.monotonic()
            try:
                move_git_dir(scratch / "git", work / ".git")
            except BaseException:
                remove_partial_clone(work, existed=existed)
                raise
            ui.debug(f"git dir copied from {scratch} in {time.monotonic() - t_copy:.3f} s")
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return scratch is not None


def _checkout_phase(result: CloneResult, opts: CloneOptions, dest: str, ui: CloneReporter) -> None:
    """What git clone checks out (HEAD, as the clone left it), its post-checkout hook,
    then the submodules; an empty repository has no checkout phase."""
    args, target = opts.args, result.directory
    copts = CheckoutOptions(
        directory=target,
        rev="HEAD",
        workers=opts.workers,
        adapt=args.adapt,
        environ=opts.environ,
        hooks=args.hooks,
        clone=True,  # git clone's post-checkout: the null id, HEAD, 1
    )
    again = shlex.join(["pcheckout", "checkout", "-C", os.path.abspath(target)])
    hint = f"the clone is complete; to finish its checkout, run: {again}"
    try:
        with finished_by(hint):
            result.checkout = checkout(copts, ui)
    except UnknownRevisionError:
        if _head_commit(target, opts.environ, ui) is not None:
            raise
        if _has_refs(target, opts.environ, ui):  # builtin/clone.c checkout()
            ui.git_message("warning: remote HEAD refers to nonexistent ref, unable to checkout")
            result.skipped = "no-head"
        else:  # git warned: "You appear to have cloned an empty repository."
            result.skipped = "empty"
    except HookError as exc:
        result.checkout = exc.result if isinstance(exc.result, Result) else None
        failed = HookError(
            str(exc).replace("the checkout is", "the clone and its checkout are"),
            result=result,
            status=exc.status,
        )
        failed.exit_code = exc.status  # git clone exits with the hook's status
        raise failed from None
    if result.checkout is not None and args.recurse_submodules:
        from pcheckout.clone.submodules import (  # see __init__
            SubmoduleRun,
            submodule_environ,
            update_submodules,
        )

        git = Git(target, debug=ui.debug, env=opts.environ)
        environ = submodule_environ(git, opts.environ)
        run = SubmoduleRun(args, environ, ui, opts.workers)
        result.submodules = update_submodules(target, run)


def run_git_clone(
    cmd: list[str], *, cwd: Path, environ: dict[str, str], debug: Callable[[str], None]
) -> None:
    """Run git clone with our stderr (its progress and messages reach the user
    as git writes them) and stdout sent to stderr (``--json`` owns stdout).

    On Ctrl-C git gets SIGINT from the terminal too and removes the partial
    clone; we wait for it to finish that (subprocess.run would kill it after
    0.25 s, leaving the partial clone behind).  SIGTERM sent to us alone is
    passed on to git, which cleans up the same way."""
    debug("running: " + " ".join(cmd))
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=environ, stdout=2, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise GitCloneError(f"cannot run git: {exc}", 1) from None
    try:
        code = proc.wait()
    except (KeyboardInterrupt, Interrupted) as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        if signum != signal.SIGINT:
            proc.send_signal(signum)
        _wait_uninterrupted(proc)
        raise Interrupted(signum, "git clone removed the partial clone") from None
    if code != 0:
        raise GitCloneError("", code)


def _staging(
    args: CloneArgs, work: Path | None, environ: dict[str, str], ui: CloneReporter
) -> Path | None:
    """A scratch directory for git clone's git dir, or None to clone in place
    (see stage.py for when and why)."""
    if work is None or args.bare or args.mirror or args.separate_git_dir is not None:
        return None
    mode = environ.get(STAGE_ENV, "auto")
    if mode == "never":
        return None
    if mode != "always":
        borrows = args.borrows_objects and not args.dissociate
        if not borrows:
            return None
        reason = worth_staging(work)
        if reason is None:
            return None
        ui.debug(f"staging the git dir: {reason}")
    return scratch_dir()


def _wait_uninterrupted(proc: subprocess.Popen[bytes]) -> None:
    while True:
        try:
            proc.wait()
            return
        except KeyboardInterrupt:
            continue


def _has_refs(root: Path, environ: dict[str, str], ui: CloneReporter) -> bool:
    """Whether the clone has any ref (an empty repository's has none)."""
    git = Git(root, debug=ui.debug, env=environ)
    return bool(git.out("for-each-ref", "--count=1", "--format=%(refname)").strip())


def _head_commit(root: Path, environ: dict[str, str], ui: CloneReporter) -> str | None:
    git = Git(root, debug=ui.debug, env=environ)
    proc = git.run("rev-parse", "-q", "--verify", "HEAD^{commit}", ok_codes=(0, 1, 128))
    return proc.stdout.decode().strip() or None if proc.returncode == 0 else None
