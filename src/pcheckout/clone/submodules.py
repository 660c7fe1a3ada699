"""What ``git submodule update --init --recursive`` does after git clone's
checkout, each submodule cloned and checked out on its own thread."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from pcheckout.checkout import checkout
from pcheckout.clone.args import CloneArgs
from pcheckout.clone.reporter import CloneReporter, QuietReporter
from pcheckout.errors import UsageError
from pcheckout.git.config import read_config
from pcheckout.git.runner import Git
from pcheckout.git.submodules import by_path, index_gitlinks, read_gitmodules, submodule_config
from pcheckout.options import CheckoutOptions, Result

#: Submodules cloned at once when neither --jobs nor submodule.fetchJobs says:
#: each clone mostly waits (on the server, on the destination's round trips),
#: so they overlap well; the bound keeps the processes (a git clone and a
#: checkout's cat-file workers each) and their descriptors in reason.
DEFAULT_SUBMODULE_JOBS = 8


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


@dataclass(frozen=True)
class _Submodule:
    name: str
    path: str
    commit: str
    url: str
    shallow: bool  # .gitmodules "shallow = true" (git clones it with --depth=1)
    branch: str | None  # .gitmodules "branch" (for --remote-submodules)


class SubmoduleRun(NamedTuple):
    """What every submodule's clone and checkout share."""

    args: CloneArgs
    environ: dict[str, str]
    ui: CloneReporter
    workers: int | None = None  # the checkouts' --workers (None: auto)


#: What git 2.39's ``git submodule`` (git-submodule.sh) exports to every command it runs:
#: the submodules' URLs are not the user's, so protocol.allow's "user" rule refuses them
#: (``protocol.file.allow`` is "user" since 2.38.1: a file:// submodule is refused).
FROM_SCRIPT = {"GIT_PROTOCOL_FROM_USER": "0"}

#: What git-sh-i18n, which git-submodule.sh sources (through git-sh-setup), exports.
I18N_EXPORTS = ("TEXTDOMAIN", "TEXTDOMAINDIR", "GIT_INTERNAL_GETTEXT_SH_SCHEME")


def submodule_environ(git: Git, environ: dict[str, str]) -> dict[str, str]:
    """The environment ``git submodule update`` gives the clones, fetches and checkouts
    of the submodules (and so their hooks): ``environ`` with what git-submodule.sh
    exports, where ``git submodule`` is that script (git 2.39); a builtin ``git
    submodule`` exports nothing."""
    exec_path = git.out("--exec-path").decode().rstrip("\n")
    try:
        with open(os.path.join(exec_path, "git-submodule"), "rb") as f:
            script = f.read(2) == b"#!"
    except OSError:
        script = False
    if not script:
        return environ
    # the script's exports, as the script would make them (sourced from the exec path)
    probe = r"""d=$1; shift; . "$d/git-sh-i18n" >/dev/null 2>&1
for v; do eval "x=\${$v}"; printf '%s\0' "$x"; done"""
    names = I18N_EXPORTS
    proc = subprocess.run(
        ["sh", "-c", probe, "sh", exec_path, *names],
        env=environ,
        capture_output=True,
        check=False,
    )
    values = proc.stdout.decode(errors="replace").split("\0")[: len(names)]
    exported = dict(zip(names, values, strict=False)) if proc.returncode == 0 else {}
    return {**environ, **exported, **FROM_SCRIPT}


def update_submodules(root: Path, run: SubmoduleRun) -> list[SubmoduleResult]:
    """What ``git submodule update --init --recursive`` does after git clone's
    checkout, with the submodules side by side (git clones them --jobs at a
    time, then checks each out in turn) and each checked out by the parallel
    writer: register the active submodules (``git submodule init``), clone
    each into .git/modules (``git submodule--helper clone``, git's own), fetch
    the recorded commit if the clone lacks it, check it out detached as
    ``git checkout -f -q COMMIT`` would, and recurse into its submodules."""
    git = Git(root, debug=run.ui.debug, env=run.environ)
    quiet = ["--quiet"] if run.args.quiet else []
    proc = git.run("submodule", "init", *quiet)
    _relay(proc.stdout + proc.stderr, run.ui)
    subs = _initialized_submodules(git)
    if not subs:
        return []
    jobs = min(_submodule_jobs(run.args, git), len(subs))
    return _side_by_side(subs, jobs, lambda sub: _update_one(root, sub, run))


def _side_by_side(
    subs: list[_Submodule], jobs: int, update: Callable[[_Submodule], SubmoduleResult]
) -> list[SubmoduleResult]:
    """``update`` of each submodule on ``jobs`` threads, the results in ``subs``'s
    order; the first error stops the threads taking more and is raised here."""
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
                results[k] = update(sub)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                with lock:
                    errors.append(exc)
                return

    threads = [
        threading.Thread(target=worker, name=f"submodule-{j}", daemon=True) for j in range(jobs)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return [r for r in results if r is not None]


def _update_one(root: Path, sub: _Submodule, run: SubmoduleRun) -> SubmoduleResult:
    args, ui = run.args, run.ui
    git = Git(root, debug=ui.debug, env=run.environ)
    proc = git.run(*_clone_command(sub, args), what=f"cloning submodule '{sub.path}' failed")
    _relay(proc.stderr, ui)
    work = root / sub.path
    sgit = Git(work, debug=ui.debug, env=run.environ, version=git.version)
    rev = _commit_to_check_out(sgit, sub, args)
    result = checkout(
        CheckoutOptions(
            directory=work, rev=rev, workers=run.workers, adapt=args.adapt, environ=run.environ
        ),
        QuietReporter(ui),
    )
    if not args.quiet:
        ui.note(f"Submodule path '{sub.path}': checked out '{rev}'")
    nested: list[SubmoduleResult] = []
    if (work / ".gitmodules").exists():
        nested = update_submodules(work, run)
    return SubmoduleResult(sub.name, sub.path, rev, result, nested)


def _clone_command(sub: _Submodule, args: CloneArgs) -> list[str]:
    """``git submodule--helper clone`` as ``git submodule update --init`` runs it."""
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
    return cmd


def _commit_to_check_out(sgit: Git, sub: _Submodule, args: CloneArgs) -> str:
    """The recorded commit, fetched if the clone did not bring it (as git submodule
    update does); with --remote-submodules the remote-tracking branch's."""
    rev = sub.commit
    if args.remote_submodules:
        return sgit.out("rev-parse", "--verify", f"origin/{sub.branch or 'HEAD'}").decode().strip()
    if sgit.run("cat-file", "-e", f"{rev}^{{commit}}", ok_codes=(0, 1, 128)).returncode:
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
    return rev


def _initialized_submodules(git: Git) -> list[_Submodule]:
    """Gitlinks of the index that ``git submodule init`` registered (a url in
    .git/config) and whose update mode is not "none", in index order."""
    links = index_gitlinks(git)
    if not links:
        return []
    sections = by_path(read_gitmodules(git))
    config = read_config(git)
    subs = []
    for link in links:
        module = sections.get(link.path)
        if module is None:
            continue
        registered = submodule_config(config, module.name)
        update = registered.update if registered.update is not None else module.update
        if registered.url is None or update == "none":
            continue
        path = os.fsdecode(link.path)
        url = registered.url
        subs.append(_Submodule(module.name, path, link.commit, url, module.shallow, module.branch))
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
