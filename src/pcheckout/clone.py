"""``pcheckout clone``: ``git clone --no-checkout``, then the parallel checkout.

``clone(opts, ui)`` does what ``git clone`` with the same options does, in two
phases in one process:

1. ``git clone <the user's options> --no-checkout -- URL DIR``: git fetches,
   writes refs, config, ``.git/shallow``, the sparse-checkout file, the
   reflog ("clone: from URL") and HEAD exactly as it would have (its own
   progress on stderr).  Every git clone option reaches git unchanged;
   ``parse_args`` only reads them to know where the clone goes and whether
   ``git clone`` would have checked anything out.
2. ``checkout.checkout()`` of HEAD: the files and the index, in parallel.
   HEAD is already where git clone leaves it, so nothing is added to the
   reflog (git clone's own checkout adds nothing either).
3. With ``--recurse-submodules``: what ``git submodule update --init
   --recursive`` (which git clone runs) does, each submodule cloned and
   checked out on its own thread (see ``_submodules``).

No checkout phase for ``--no-checkout``, ``--bare``, ``--mirror`` or an empty
repository, as in git clone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pcheckout import stage
from pcheckout.checkout import checkout
from pcheckout.context import NullReporter, Reporter
from pcheckout.errors import (
    GitCloneError,
    HookError,
    Interrupted,
    UnknownRevisionError,
    UsageError,
)
from pcheckout.git.config import read_config
from pcheckout.git.runner import Git
from pcheckout.options import CheckoutOptions, Result

# -- git clone's command line ----------------------------------------------
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
OWN_FLAG_LONG = frozenset({"no-adapt", "json", "debug", "help"})

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
    no_tags: bool = False
    upload_pack: str | None = None
    borrows_objects: bool = False  # --shared, --reference, --reference-if-able
    dissociate: bool = False


def parse_args(argv: Sequence[str]) -> CloneArgs:
    """Split ``argv`` (the words after ``clone``) as git clone's parse-options
    would: options anywhere, ``--opt=value`` and ``--opt value``, bundled short
    options (``-qn``, ``-bmain``, ``-j4``), unambiguous abbreviations, ``--``."""
    positional: list[str] = []
    git_opts: list[str] = []
    args = CloneArgs(url="", directory=None)
    words = list(argv)
    i = 0

    def take_value(opt: str) -> str:
        nonlocal i
        if i + 1 >= len(words):
            raise UsageError(f"clone: option '{opt}' requires a value")
        i += 1
        return words[i]

    while i < len(words):
        word = words[i]
        if word == "--":
            positional.extend(words[i + 1 :])
            break
        if word.startswith("--"):
            name, eq, inline = word[2:].partition("=")
            found = _canonical(name)
            if found is None:  # unknown to us: git decides (and explains)
                git_opts.append(word)
                i += 1
                continue
            canon, negated = found
            if canon in OWN_VALUE_LONG:
                args.workers = inline if eq else take_value(word)
            elif canon in OWN_FLAG_LONG:
                if eq:
                    raise UsageError(f"clone: option '--{canon}' takes no value")
                if canon == "no-adapt":
                    args.adapt = negated
                else:
                    setattr(args, canon, not negated)
            elif canon in GIT_VALUE_LONG and not negated:
                value = inline if eq else take_value(word)
                git_opts.extend([word] if eq else [word, value])
                _note_git(args, canon, value, False)
            else:
                git_opts.append(word)
                _note_git(args, canon, inline if eq else None, negated)
            i += 1
            continue
        if word.startswith("-") and word != "-":
            # bundled short options: flags until one that takes a value, which
            # takes the rest of the word or the next word
            k = 1
            while k < len(word):
                letter = word[k]
                if letter == "h":
                    args.help = True
                    k += 1
                    continue
                if letter in GIT_VALUE_SHORT:
                    rest = word[k + 1 :]
                    canon = GIT_VALUE_SHORT[letter]
                    if rest:
                        value = rest
                        git_opts.append(f"-{letter}{rest}")
                    else:
                        value = take_value(f"-{letter}")
                        git_opts.extend([f"-{letter}", value])
                    _note_git(args, canon, value, False)
                    break
                git_opts.append(f"-{letter}")
                if letter in GIT_FLAG_SHORT:
                    _note_git(args, GIT_FLAG_SHORT[letter], None, False)
                k += 1
            i += 1
            continue
        positional.append(word)
        i += 1
    if args.help:
        return args
    if not positional:
        raise UsageError("clone: you must specify a repository to clone")
    if len(positional) > 2:
        raise UsageError("clone: too many arguments (expected URL [DIR])")
    args.url = positional[0]
    args.directory = positional[1] if len(positional) > 1 else None
    args.git_options = git_opts
    return args


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
    elif canon == "no-tags":
        args.no_tags = on
    elif canon == "upload-pack":
        args.upload_pack = value if on else None
    args.quiet = args.verbosity < 0


# -- the directory git clone would choose -----------------------------------
def _is_git_directory(path: str) -> bool:
    # setup.c:is_git_directory, in short: HEAD, objects/ and refs/ are there
    return (
        os.path.isfile(os.path.join(path, "HEAD"))
        and os.path.isdir(os.path.join(path, "objects"))
        and os.path.isdir(os.path.join(path, "refs"))
    )


def _is_bundle(repo: str) -> bool:
    """builtin/clone.c:get_repo_path: is ``repo`` a local bundle file (checked
    after the repository forms, in git's order)?"""
    for suffix in ("/.git", "", ".git/.git", ".git"):
        path = repo + suffix
        if os.path.isdir(path) and _is_git_directory(path):
            return False
        if os.path.isfile(path) and os.path.getsize(path) > 8:
            with open(path, "rb") as f:
                if f.read(8) == b"gitdir: ":
                    return False
    return any(os.path.isfile(repo + suffix) for suffix in (".bundle", ""))


def guess_dir_name(repo: str, *, is_bundle: bool, is_bare: bool) -> str | None:
    """git's dir.c:git_url_basename (the "humanish" part of the URL): scheme
    and user info skipped, trailing slashes, spaces and "/.git" stripped, a
    bare host's port dropped, the last component without ".git" (".bundle"),
    control characters and runs of spaces folded to one space.  None where git
    dies with "No directory name could be guessed" (git is left to say so)."""
    start = repo.find("://")
    start = 0 if start < 0 else start + 3
    end = len(repo)
    ptr = start
    while ptr < end and repo[ptr] != "/":
        if repo[ptr] == "@":
            start = ptr + 1
        ptr += 1
    while start < end and (repo[end - 1] == "/" or repo[end - 1].isspace()):
        end -= 1
    if end - start > 5 and repo[end - 5] == "/" and repo[end - 4 : end] == ".git":
        end -= 5
        while start < end and repo[end - 1] == "/":
            end -= 1
    part = repo[start:end]
    if "/" not in part and ":" in part:  # "host:2222" -> "host", not "2222"
        ptr = end
        while start < ptr and repo[ptr - 1].isdigit():
            ptr -= 1
        if start < ptr and repo[ptr - 1] == ":":
            end = ptr - 1
    ptr = end
    while start < ptr and repo[ptr - 1] not in "/:":
        ptr -= 1
    name = repo[ptr:end]
    suffix = ".bundle" if is_bundle else ".git"
    if name.endswith(suffix):
        name = name[: -len(suffix)]
    if not name or name == "/":
        return None
    if is_bare:
        name += ".git"
    out: list[str] = []
    prev_space = True  # strips leading whitespace
    for ch in name:
        if ord(ch) < 0x20:
            ch = " "
        if ch in " \t\n\v\f\r":
            if prev_space:
                continue
            prev_space = True
        else:
            prev_space = False
        out.append(ch)
    if out and prev_space:
        out.pop()
    return "".join(out)


def destination(args: CloneArgs) -> str | None:
    """The directory git clone creates (as given, or guessed from the URL)."""
    if args.directory is not None:
        return args.directory
    bare = args.bare or args.mirror
    return guess_dir_name(args.url, is_bundle=_is_bundle(args.url), is_bare=bare)


# -- running it -------------------------------------------------------------
class CloneReporter(Reporter, Protocol):
    """The checkout's reporter, plus a line for a human between phases."""

    def note(self, message: str) -> None: ...


@dataclass(frozen=True)
class CloneOptions:
    args: CloneArgs
    workers: int | None = None  # --workers parsed (None: auto)
    cwd: Path = field(default_factory=Path.cwd)
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass
class SubmoduleResult:
    name: str
    path: str
    commit: str
    checkout: Result | None
    submodules: list[SubmoduleResult] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "path": self.path,
            "commit": self.commit,
            "checkout": self.checkout.to_json() if self.checkout is not None else None,
            "submodules": [s.to_json() for s in self.submodules],
        }


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
    dry_run: bool = False  # the CLI's report code reads it for every command
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
    args = opts.args
    t0 = time.monotonic()
    dest = destination(args)
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
                stage.move_git_dir(scratch / "git", work / ".git")
            except BaseException:
                stage.remove_partial_clone(work, existed=existed)
                raise
            ui.debug(f"git dir copied from {scratch} in {time.monotonic() - t_copy:.3f} s")
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    if dest is None:  # pragma: no cover - git dies when it cannot guess one either
        raise GitCloneError("no directory name could be guessed", 128)
    target = Path(os.path.abspath(os.path.join(opts.cwd, dest)))
    result = CloneResult(
        args.url,
        target,
        args.bare or args.mirror,
        time.monotonic() - t0,
        staged=scratch is not None,
    )
    if args.bare or args.mirror:
        result.skipped = "mirror" if args.mirror else "bare"
    elif args.no_checkout:
        result.skipped = "no-checkout"
    else:
        copts = CheckoutOptions(
            directory=target,
            rev="HEAD",
            workers=opts.workers,
            adapt=args.adapt,
            environ=opts.environ,
        )
        hint = f"the clone is complete; run 'pcheckout checkout -C {dest}' to finish the checkout"
        try:
            result.checkout = checkout(copts, ui)
        except UnknownRevisionError:
            if _head_commit(target, opts.environ, ui) is not None:
                raise
            result.skipped = "empty"  # git warned: "You appear to have cloned an empty repository."
        except Interrupted as exc:
            raise Interrupted(exc.signum, hint) from None
        except KeyboardInterrupt:
            raise Interrupted(signal.SIGINT, hint) from None
        if result.checkout is not None:
            run_post_checkout(target, opts.environ, ui)
        if result.checkout is not None and args.recurse_submodules:
            result.submodules = update_submodules(target, args, opts.environ, ui, opts.workers)
    result.seconds = time.monotonic() - t0
    return result


#: ``git hook run`` came in git 2.36; before it the hook file is run directly.
GIT_HOOK_RUN = (2, 36)


def run_post_checkout(work: Path, environ: dict[str, str], ui: CloneReporter) -> None:
    """git clone runs the post-checkout hook after its checkout (builtin/clone.c:
    checkout(), arguments: the null id, HEAD, 1), before the submodules; a
    failing hook makes git clone fail with exit 1 after a complete checkout."""
    git = Git(work, debug=ui.debug, env=environ)
    out = git.out("rev-parse", "--git-path", "hooks/post-checkout", "HEAD").decode()
    hook, head = (out.splitlines() + ["", ""])[:2]
    path = work / hook
    if not (path.is_file() and os.access(path, os.X_OK)):
        return
    null = "0" * len(head)
    if git.has(GIT_HOOK_RUN):
        cmd = ["git", "hook", "run", "post-checkout", "--", null, head, "1"]
    else:  # pragma: no cover - git < 2.36
        cmd = [str(path), null, head, "1"]
    ui.debug("running: " + " ".join(cmd))
    proc = subprocess.run(cmd, cwd=work, env=environ, stdout=2, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise HookError(
            f"the post-checkout hook failed (exit {proc.returncode}); "
            "the clone and its checkout are complete"
        )


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
    mode = environ.get(stage.ENV, "auto")
    if mode == "never":
        return None
    if mode != "always":
        borrows = args.borrows_objects and not args.dissociate
        if not borrows:
            return None
        reason = stage.worth_staging(work)
        if reason is None:
            return None
        ui.debug(f"staging the git dir: {reason}")
    return stage.scratch_dir()


def _wait_uninterrupted(proc: subprocess.Popen[bytes]) -> None:
    while True:
        try:
            proc.wait()
            return
        except KeyboardInterrupt:
            continue


def _head_commit(root: Path, environ: dict[str, str], ui: CloneReporter) -> str | None:
    git = Git(root, debug=ui.debug, env=environ)
    proc = git.run("rev-parse", "-q", "--verify", "HEAD^{commit}", ok_codes=(0, 1, 128))
    return proc.stdout.decode().strip() or None if proc.returncode == 0 else None


# -- submodules -------------------------------------------------------------
#: Submodules cloned at once when neither --jobs nor submodule.fetchJobs says:
#: each clone mostly waits (on the server, on the destination's round trips),
#: so they overlap well; the bound keeps the processes (a git clone and a
#: checkout's cat-file workers each) and their descriptors in reason.
DEFAULT_SUBMODULE_JOBS = 8


@dataclass(frozen=True)
class _Submodule:
    name: str
    path: str
    commit: str
    url: str
    shallow: bool  # .gitmodules "shallow = true" (git clones it with --depth=1)
    branch: str | None  # .gitmodules "branch" (for --remote-submodules)


def update_submodules(
    root: Path,
    args: CloneArgs,
    environ: dict[str, str],
    ui: CloneReporter,
    workers: int | None = None,
) -> list[SubmoduleResult]:
    """What ``git submodule update --init --recursive`` does after git clone's
    checkout, with the submodules side by side (git clones them --jobs at a
    time, then checks each out in turn) and each checked out by the parallel
    writer: register the active submodules (``git submodule init``), clone
    each into .git/modules (``git submodule--helper clone``, git's own), fetch
    the recorded commit if the clone lacks it, check it out detached as
    ``git checkout -f -q COMMIT`` would, and recurse into its submodules."""
    git = Git(root, debug=ui.debug, env=environ)
    quiet = ["--quiet"] if args.quiet else []
    proc = git.run("submodule", "init", *quiet)
    _relay(proc.stdout + proc.stderr, ui)
    subs = _initialized_submodules(git)
    if not subs:
        return []
    jobs = _submodule_jobs(args, git)
    results: list[SubmoduleResult | None] = [None] * len(subs)
    errors: list[BaseException] = []
    lock = threading.Lock()
    todo = list(enumerate(subs))

    def worker() -> None:
        while True:
            with lock:
                if not todo or errors:
                    return
                k, sub = todo.pop(0)
            try:
                results[k] = _update_one(root, sub, args, environ, ui, workers)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                with lock:
                    errors.append(exc)
                return

    threads = [
        threading.Thread(target=worker, name=f"submodule-{j}", daemon=True)
        for j in range(min(jobs, len(subs)))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [r for r in results if r is not None]


def _update_one(
    root: Path,
    sub: _Submodule,
    args: CloneArgs,
    environ: dict[str, str],
    ui: CloneReporter,
    workers: int | None,
) -> SubmoduleResult:
    git = Git(root, debug=ui.debug, env=environ)
    cmd = ["submodule--helper", "clone"]
    cmd += ["--quiet"] if args.quiet else (["--progress"] if args.progress else [])
    cmd += ["--path", sub.path, "--name", sub.name, "--url", sub.url]
    if args.shallow_submodules or sub.shallow:
        cmd.append("--depth=1")
    if args.also_filter_submodules and args.filters:
        cmd += [f"--filter={f}" for f in args.filters]
    if args.single_branch is not None:
        cmd.append("--single-branch" if args.single_branch else "--no-single-branch")
    cmd.append("--require-init")
    proc = git.run(*cmd, what=f"cloning submodule '{sub.path}' failed")
    _relay(proc.stderr, ui)
    work = root / sub.path
    sgit = Git(work, debug=ui.debug, env=environ, version=git.version)
    rev = sub.commit
    if args.remote_submodules:
        rev = sgit.out("rev-parse", "--verify", f"origin/{sub.branch or 'HEAD'}").decode().strip()
    elif sgit.run("cat-file", "-e", f"{rev}^{{commit}}", ok_codes=(0, 1, 128)).returncode:
        # git submodule update fetches a recorded commit the clone did not bring
        q = ["--quiet"] if args.quiet else []
        depth = ["--depth=1"] if args.shallow_submodules or sub.shallow else []
        sgit.run("fetch", *q, *depth, what=f"fetching in submodule '{sub.path}' failed")
        if sgit.run("cat-file", "-e", f"{rev}^{{commit}}", ok_codes=(0, 1, 128)).returncode:
            sgit.run(
                "fetch",
                *q,
                *depth,
                "origin",
                rev,
                what=f"fetching {rev} in submodule '{sub.path}' failed",
            )
    result = checkout(
        CheckoutOptions(
            directory=work, rev=rev, workers=workers, adapt=args.adapt, environ=environ
        ),
        _Quiet(ui),
    )
    if not args.quiet:
        ui.note(f"Submodule path '{sub.path}': checked out '{rev}'")
    nested: list[SubmoduleResult] = []
    if (work / ".gitmodules").exists():
        nested = update_submodules(work, args, environ, ui, workers)
    return SubmoduleResult(sub.name, sub.path, rev, result, nested)


def _initialized_submodules(git: Git) -> list[_Submodule]:
    """Gitlinks of the index that ``git submodule init`` registered (a url in
    .git/config) and whose update mode is not "none", in index order."""
    listing = git.out("ls-files", "-s", "-z")
    links: list[tuple[str, str]] = []
    for rec in listing.split(b"\0"):
        if rec.startswith(b"160000 "):
            meta, _, raw_path = rec.partition(b"\t")
            links.append((os.fsdecode(raw_path), meta.split()[1].decode()))
    if not links:
        return []
    gm = git.run("config", "-z", "-f", ".gitmodules", "--list", ok_codes=(0, 1)).stdout
    modules: dict[str, dict[str, str]] = {}
    for item in gm.split(b"\0"):
        key, _, value = item.partition(b"\n")
        k = os.fsdecode(key)
        if k.startswith("submodule.") and "." in k[10:]:
            name, _, var = k[10:].rpartition(".")
            modules.setdefault(name, {})[var.lower()] = os.fsdecode(value)
    by_path = {m["path"]: name for name, m in modules.items() if "path" in m}
    config = read_config(git)
    subs = []
    for path, commit in links:
        found = by_path.get(path)
        if found is None:
            continue
        name = found
        url = config.get(f"submodule.{name}.url")
        update = config.get(f"submodule.{name}.update", modules[name].get("update", ""))
        if url is None or update == "none":
            continue
        shallow = modules[name].get("shallow", "").lower() in ("true", "yes", "on", "1")
        subs.append(_Submodule(name, path, commit, url, shallow, modules[name].get("branch")))
    return subs


def _submodule_jobs(args: CloneArgs, git: Git) -> int:
    value = args.jobs
    if value is None:
        proc = git.run("config", "--int", "submodule.fetchJobs", ok_codes=(0, 1))
        value = proc.stdout.decode().strip() or None
    try:
        jobs = int(value) if value is not None else DEFAULT_SUBMODULE_JOBS
    except ValueError:
        raise UsageError(f"--jobs: not a number: {value}") from None
    return jobs if jobs > 0 else DEFAULT_SUBMODULE_JOBS  # git: 0 means "a reasonable default"


def _relay(output: bytes, ui: CloneReporter) -> None:
    text = output.decode("utf-8", "replace").rstrip("\n")
    if text:
        ui.note(text)


class _Quiet(NullReporter):
    """A reporter for checkouts running side by side: one progress bar cannot
    show them all, so they report only debug lines (and the clone a line each)."""

    def __init__(self, ui: CloneReporter) -> None:
        self._ui = ui

    def debug(self, message: str) -> None:
        self._ui.debug(message)
