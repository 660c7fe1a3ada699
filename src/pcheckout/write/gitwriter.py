"""The write done by git itself: git's own (parallel) checkout as pcheckout's writer.

Where writing is CPU-bound (tmpfs, local and virtual disks) git's checkout is the fastest
writer there is: it inflates blobs in C in the process that writes them, where pcheckout's
engine pays for a ``cat-file`` process per worker, a pipe copy of every byte and interpreter
time per file (docs/benchmarks.md run C).  Here git writes, with the plan's count on its command
line as ``checkout.workers`` and ``checkout.thresholdForParallelism`` (git >= 2.32; an older
git writes sequentially), while pcheckout keeps detection, the plan, the safety checks before
git runs, progress and the report.

This is the one module that runs git to write a work tree (``apply/bygit.py`` carries out
plans by it; ``apply/submodules.py`` moves the engine's submodules by it; a clone's
submodules are cloned without a checkout and checked out by ``checkout()``).  Which git
command, per operation:

* fresh checkout (and resume): ``git read-tree -u --reset TREE`` writes every file of the tree
  that pcheckout resolved and checked, and the index with stat data (unpack-trees' oneway
  merge, the code ``git checkout -f`` runs), honouring sparse-checkout patterns and fetching a
  partial clone's missing blobs in one batch; HEAD and its reflog are then moved by pcheckout
  as for its own engine.  An interrupted run left no index, so running it again overwrites.
* switch: ``git checkout -q REV --``: git's own two-way merge with its local-change and
  untracked-file protection, its messages and its HEAD/reflog.  With ``--force`` pcheckout
  first refuses untracked files in the way (``git checkout -f`` would overwrite them, pcheckout
  never does), then ``read-tree -u --reset TREE`` discards local changes to tracked files.
* export: ``read-tree -u --reset TREE`` into DEST with a temporary index, the sparse-checkout
  patterns off (an export is the whole tree).
* a submodule the engine's switch moves, populates or removes (``submodule.recurse``):
  ``read-tree [--recurse-submodules] -u`` in it, as git's checkout runs it there
  (:func:`submodule_tree`; no progress, no hooks: read-tree runs none).

git takes ``index.lock`` itself: the caller must not hold it while git runs.  Hooks are off
(``core.hooksPath`` is ``/dev/null``): pcheckout's engine runs none, and the result must not
depend on the writer.  Progress: git prints ``Updating files:  45% (2281/5069)`` on stderr
(with ``GIT_PROGRESS_DELAY=0`` from the first file), parsed into ``progress(done, total)``.
git's other lines on a run that succeeds (``warning: ...``, ``error: unable to read sha1 file
of ...``: git's checkout finishes and exits 0 past an object it cannot read) are kept in
``GitWrite.messages`` and relayed to the user's stderr as git printed them
(``Reporter.git_message``); on a failure they are the error's message.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, NamedTuple

from pcheckout.context import Context, Reporter
from pcheckout.errors import (
    SHOW_PATHS,
    GitError,
    GitRefusedError,
    Interrupted,
    decode,
)
from pcheckout.git.indexsize import in_worktree, written_bytes
from pcheckout.git.runner import Git
from pcheckout.git.tree import TreeChanges
from pcheckout.plan.policy import PARALLEL_THRESHOLD, WorkerPlan

#: ``(done, total)`` entries git has updated; total is git's count of entries to update.
Progress = Callable[[int, int], None]

#: git's progress line, in any language: "<title>:  45% (2281/5069)" (progress.c:display()).
_PROGRESS = re.compile(rb"(\d+)% \((\d+)/(\d+)\)")
#: A line of ``diff --name-status`` (git's checkout lists the local changes it carried so).
_NAME_STATUS = re.compile(rb"[A-Z][0-9]*\t")
#: git's progress line without a total: "<title>: 0, done." (progress.c:display(): a
#: sparse checkout's "Updating index flags" under read-tree -v); not one of git's messages.
_COUNT = re.compile(rb": +\d+(, [^,]+\.)?$")

#: What git says when its checkout refuses to touch the working tree (unpack-trees.c,
#: setup_unpack_trees_porcelain(): "would be overwritten", "would be removed", "would be lost";
#: the untracked-file variants and "not uptodate").  Matched on the untranslated words only: in
#: another language the refusal is still reported, as a GitError with git's message.
_REFUSALS = (
    b"would be overwritten",
    b"would be removed",
    b"would be lost",
    b"would lose untracked files",
    b"not uptodate",
    b"Cannot update submodule",
    b"resolve your current index",  # an unmerged index (unpack-trees.c): nothing changed
)


class GitWrite(NamedTuple):
    """What git's writer did."""

    updated: int  # entries git reported updating (its progress total); -1 when it said nothing
    seconds: float
    workers: int  # the checkout.workers it was given
    command: str  # "read-tree" or "checkout"
    bytes: int = -1  # bytes written, where counted (from the index git wrote); -1: unknown
    messages: tuple[str, ...] = ()  # git's lines besides its progress, as it printed them
    #: a switch run without -q (``switch(said=True)``): every line git printed besides its
    #: progress, as (stream, line) in git's order (:func:`_said`); None: git ran quiet
    said: tuple[tuple[str, str], ...] | None = None


class Reporting:
    """git's progress into a :class:`Reporter`: the bar starts at git's first line (git's
    total is what it updates, which for a switch counts deletions too); bytes are not known
    while git writes, so none are reported."""

    def __init__(self, ui: Reporter, workers: int) -> None:
        self.ui = ui
        self.workers = workers
        self.started = False

    def __call__(self, done: int, total: int) -> None:
        if not self.started:
            self.ui.start(total, 0, self.workers)
            self.started = True
        self.ui.update(done, 0)

    def finish(self) -> None:
        if self.started:
            self.ui.finish()


def settings(workers: int, threshold: int) -> list[str]:
    """The ``-c`` options every git write runs with."""
    return [
        "-c",
        f"checkout.workers={max(1, workers)}",
        "-c",
        f"checkout.thresholdForParallelism={max(0, threshold)}",
        "-c",
        f"core.hooksPath={os.devnull}",
    ]


def write_tree(
    git: Git,
    tree: str,
    *,
    workers: int,
    threshold: int,
    progress: Progress | None = None,
    config: Sequence[str] = (),
) -> GitWrite:
    """Every file of ``tree`` and the index, as ``git checkout -f`` writes them (HEAD is not
    moved), in ``git``'s environment.  Overwrites what is in the way: the caller has refused
    what must be kept."""
    args = [*settings(workers, threshold), *config, "read-tree", "-u", "--reset"]
    if progress is not None:
        args.append("-v")  # read-tree's -v is its progress switch (verbose_update)
    return _run(git, [*args, tree], workers, "read-tree", progress)


def switch(
    git: Git,
    rev: str,
    *,
    workers: int,
    threshold: int,
    progress: Progress | None = None,
    said: bool = False,
) -> GitWrite:
    """``git checkout REV``: git's two-way merge moves the working tree, the index and HEAD,
    or refuses (:class:`GitRefusedError`, git's message) and changes nothing.  ``said``:
    without ``-q``, git's lines for where HEAD went and the local changes it carried are
    kept in ``GitWrite.said`` (not relayed: the caller prints them in their place)."""
    if not rev or rev.startswith("-"):
        # git checkout has no --end-of-options (2.39): such a name would be read as an option.
        raise GitError(f"git's writer cannot be given the revision {rev!r}; use --writer pcheckout")
    args = [
        *settings(workers, threshold),
        # its "refname is ambiguous" warning was relayed when REV was resolved (git/refs.py);
        # without the warning git stops at the same first match (refs.c repo_dwim_ref)
        "-c",
        "core.warnAmbiguousRefs=false",
        "checkout",
        *([] if said else ["-q"]),
        "--progress" if progress is not None else "--no-progress",
        rev,
        "--",
    ]
    return _run(git, args, workers, "checkout", progress, said=said)


def export_tree(
    ctx: Context,
    tree: str,
    dest: Path,
    *,
    workers: int,
    threshold: int,
    progress: Progress | None = None,
) -> GitWrite:
    """The tree alone into ``dest`` (no index left, sparse-checkout patterns off), from
    ``ctx``'s repository in its environment; the bytes written are counted from git's
    index."""
    import tempfile  # (an export's alone: a checkout's start need not pay it, ~3 ms)

    with tempfile.TemporaryDirectory(prefix="pcheckout-export-") as scratch:
        env = {
            **ctx.environ,
            "GIT_DIR": str(ctx.repo.git_dir),
            "GIT_WORK_TREE": str(dest),
            "GIT_INDEX_FILE": os.path.join(scratch, "index"),
        }
        git = ctx.git
        runner = Git(dest, debug=git.debug, env=env, exe=git.exe, version=git.version)
        done = write_tree(
            runner,
            tree,
            workers=workers,
            threshold=threshold,
            progress=progress,
            # (git archive writes every symlink as one, whatever core.symlinks says)
            config=(
                *("-c", "core.sparseCheckout=false", "-c", "submodule.recurse=false"),
                *("-c", "core.symlinks=true"),
            ),
        )
        # git does not say what it wrote; the index it wrote holds the sizes (-1: unknown).
        nbytes = written_bytes(env["GIT_INDEX_FILE"], ctx.repo.object_format)
        return done._replace(bytes=nbytes)


def submodule_tree(
    sub: Git, prefix: Sequence[str], trees: Sequence[str], *, recurse: bool
) -> subprocess.CompletedProcess[bytes]:
    """git's writer in a submodule, as submodule.c ``submodule_move_head`` runs it:
    ``read-tree [--recurse-submodules] -u --reset TREE``, or ``-m FROM TO`` given two
    trees, after ``prefix`` (its ``--super-prefix``).  git's refusal (exit 1 or 128) is
    returned, not raised: the caller says git's lines and goes on, as git's checkout does."""
    args = [*prefix, "read-tree", *(["--recurse-submodules"] if recurse else []), "-u"]
    args += ["--reset", *trees] if len(trees) == 1 else ["-m", *trees]
    return sub.hooked().run(*args, ok_codes=(0, 1, 128))  # (its post-index-change)


def _run(
    git: Git,
    args: list[str],
    workers: int,
    command: str,
    progress: Progress | None,
    *,
    said: bool = False,
) -> GitWrite:
    full_env = dict(git.env if git.env is not None else os.environ)
    if progress is not None:
        full_env["GIT_PROGRESS_DELAY"] = "0"  # from the first file, not after 2 s
    t0 = time.monotonic()
    try:
        proc = git.popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if said else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=full_env,
        )
    except OSError as exc:
        raise GitError(f"cannot run git: {exc}", cmd=git.argv(args)) from None
    assert proc.stderr is not None
    out: list[bytes] = []  # (said: git's stdout, read beside its stderr: either may fill)
    reader = _read_all(proc.stdout, out) if said else None
    raw: list[bytes] = []  # (said: stderr as git wrote it)
    messages: list[bytes] = []
    updated = -1
    pending = b""
    try:
        while True:
            chunk = os.read(proc.stderr.fileno(), 1 << 16)
            if not chunk:
                break
            if said:
                raw.append(chunk)
            pending += chunk
            *parts, pending = re.split(rb"[\r\n]", pending)
            for part in parts:
                updated = _line(part, messages, progress, updated)
        if pending:
            updated = _line(pending, messages, progress, updated)
        code = proc.wait()
    except BaseException:
        # Ctrl-C reached git as well (same process group); SIGTERM did not: stop it, and let
        # git remove its index.lock on the way out.
        proc.terminate()
        proc.wait()
        raise
    finally:
        proc.stderr.close()
        if reader is not None:
            reader.join()
    if code < 0:
        raise Interrupted(-code, "run the same command again to finish")
    if code != 0:
        raise _error(command, code, messages, git.argv(args))
    lines = None if not said else _said(b"".join(out), b"".join(raw))
    return GitWrite(
        updated,
        time.monotonic() - t0,
        workers,
        command,
        messages=tuple(decode(m) for m in messages),
        said=lines,
    )


def _read_all(stream: IO[bytes] | None, into: list[bytes]) -> threading.Thread:
    """A thread that reads ``stream`` to its end into ``into`` and closes it."""
    assert stream is not None

    def read() -> None:
        with stream:
            into.append(stream.read())

    thread = threading.Thread(target=read, name="pcheckout-git-stdout", daemon=True)
    thread.start()
    return thread


def _said(out: bytes, err: bytes) -> tuple[tuple[str, str], ...]:
    """git's lines in the order git's checkout prints them (builtin/checkout.c): the local
    changes it carried on stdout (show_local_changes: "M\\tpath"), its stderr (where HEAD
    went, advice, warnings), then the rest of its stdout (report_tracking: "Your branch
    is ..."), each stream's own order kept and blank lines too.  Its progress is left out:
    the updates end in "\\r", so a line holding one is progress but for what follows its
    last update (a message git printed over the bar)."""
    stdout = _split(out)
    local = 0
    while local < len(stdout) and _NAME_STATUS.match(stdout[local]):
        local += 1
    lines = [("out", decode(line)) for line in stdout[:local]]
    for line in _split(err):
        if b"\r" in line:
            kept = [p for p in line.split(b"\r") if p and not _PROGRESS.search(p)]
            if not kept:
                continue
            line = b"".join(kept)
        lines.append(("err", decode(line)))
    lines += [("out", decode(line)) for line in stdout[local:]]
    return tuple(lines)


def _split(data: bytes) -> list[bytes]:
    """``data``'s lines, without the empty one after its last newline."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def _line(part: bytes, messages: list[bytes], progress: Progress | None, updated: int) -> int:
    if not part.strip():
        return updated
    m = _PROGRESS.search(part)
    if m is not None:
        done, total = int(m.group(2)), int(m.group(3))
        if progress is not None:
            progress(done, total)
        return total
    if _COUNT.search(part) is None:
        messages.append(part)
    return updated


def _error(command: str, code: int, messages: list[bytes], cmd: list[str]) -> Exception:
    """git's message as one line: "error: " and "fatal: " dropped, lines joined, and of the
    paths git lists (tab-indented) the first few."""
    words: list[str] = []
    paths: list[str] = []
    for m in [*messages, b""]:
        if m.startswith(b"\t"):
            paths.append(decode(m).strip())
            continue
        if paths:
            more = len(paths) - SHOW_PATHS
            words.append(
                ", ".join(paths[:SHOW_PATHS]) + (f" and {more} more" if more > 0 else "") + ";"
            )
            paths = []
        if _strip(m):
            words.append(_strip(m))
    text = " ".join(words)
    if not text:
        text = f"exited with status {code}"
    raw = b"\n".join(messages)
    if any(r in raw for r in _REFUSALS):
        refused = GitRefusedError(f"git checkout refused: {text}")
        if code == 128:  # (git checkout -f dies of its refusals)
            refused.exit_code = code
        return refused
    error = GitError(f"git {command} failed: {text}", cmd=cmd)
    if code == 128:  # git died (a lock held, a corrupt object): its exit code, as git's own
        error.exit_code = code
    return error


def _strip(message: bytes) -> str:
    text = decode(message).strip()
    for prefix in ("error: ", "fatal: "):
        text = text.removeprefix(prefix)
    return text


def switch_counts(
    changes: TreeChanges, new_index: bytes, old_index: bytes, hash_name: str, sparse: bool
) -> tuple[int, int, int]:
    """(written, deleted, bytes) of a switch by git, as the engine reports them: the changed
    paths the index git wrote has in the work tree (not skip-worktree) and their sizes; the
    removed paths, in a sparse checkout only those the old index had in the work tree.
    Bytes are -1 where an index cannot be read."""
    got = in_worktree(new_index, hash_name, set(changes.written))
    written, nbytes = got if got is not None else (len(changes.written), -1)
    deleted = len(changes.deleted)
    if sparse and changes.deleted:
        old = in_worktree(old_index, hash_name, set(changes.deleted))
        deleted = old[0] if old is not None else deleted
    return written, deleted, nbytes


def write_by_git(ctx: Context, tree: str, plan: WorkerPlan, submodules: bool = False) -> GitWrite:
    """A fresh checkout's (or an export's) write by git, with the plan's count and progress
    into ``ctx.ui``; an interrupt leaves what a re-run finishes.  ``submodules``: read-tree
    moves them (submodule.recurse); else it is told not to, whatever the config says (git
    clone's own checkout never does)."""
    report = Reporting(ctx.ui, plan.workers)
    config = () if submodules else ("-c", "submodule.recurse=false")
    try:
        done = write_tree(
            ctx.git,
            tree,
            workers=plan.workers,
            threshold=PARALLEL_THRESHOLD,
            progress=report,
            config=config,
        )
    except KeyboardInterrupt:
        raise Interrupted(2, "run the same command again to finish") from None
    finally:
        report.finish()
    relay(ctx.ui, done)
    return done


def export_by_git(ctx: Context, tree: str, dest: Path, plan: WorkerPlan) -> GitWrite:
    """An export's write by git (see :func:`export_tree`), progress into ``ctx.ui``."""
    report = Reporting(ctx.ui, plan.workers)
    try:
        done = export_tree(
            ctx, tree, dest, workers=plan.workers, threshold=PARALLEL_THRESHOLD, progress=report
        )
    except KeyboardInterrupt:
        raise Interrupted(2, f"{dest} is incomplete") from None
    finally:
        report.finish()
    relay(ctx.ui, done)
    return done


def relay(ui: Reporter, done: GitWrite) -> None:
    """git's lines of a run that succeeded, to the user as git printed them."""
    for line in done.messages:
        ui.git_message(line)
