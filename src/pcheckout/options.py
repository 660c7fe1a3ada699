"""What the core is asked (frozen options) and what it answers (``Result``).

The CLI builds these from argv; tests and library users build them directly.
Nothing here runs anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:  # types only: nothing here runs them (see cli/main.py's imports' note)
    from pcheckout.fs.detect import FsInfo
    from pcheckout.git.catfile import Spawn
    from pcheckout.git.convert import ConversionPlan
    from pcheckout.git.refs import HeadOutcome
    from pcheckout.plan.policy import WorkerPlan

Mode = Literal["checkout", "resume", "switch", "export"]

# The options are NamedTuples and the Result a plain class, not dataclasses: every run builds
# them, and importing ``dataclasses`` (with ``inspect``, ``ast``, ``dis``, ``tokenize``) and
# creating its classes cost ~13 ms of a start in a plain venv (docs/benchmarks.md). A changed
# copy of the options is ``opts._replace(rev=...)``.


class CheckoutOptions(NamedTuple):
    directory: Path
    rev: str = "HEAD"
    workers: int | None = None  # --workers; None: not given, or "auto"
    dry_run: bool = False
    force: bool = False
    adapt: bool = True
    #: the environment git runs in (default: this process's, as it is when the run starts)
    environ: Mapping[str, str] = os.environ
    spawn: Spawn | None = None  # test seam: a stand-in cat-file process
    stat_threads: int | None = None  # a switch's lstat/unlink threads (None: the policy's)
    writer: str | None = None  # --writer: "pcheckout", "git", "auto"; None: not given
    processes: bool | None = None  # engine workers forked (True) or threads (False); None: plan
    hooks: bool = True  # run git's post-checkout hook afterwards (--no-hooks: False)
    clone: bool = False  # git clone's checkout: the hook's previous HEAD is the null id
    #: what git's writer wrote (files, bytes) read back from the index it wrote for the
    #: Result (~17 ms at 40k entries on tmpfs); False: nobody reads them (the CLI's -q),
    #: and the Result says the files git was asked to write and bytes -1 (unknown)
    counts: bool = True
    #: a switch by git's writer prints git's own lines for where HEAD went and the local
    #: changes it carried (its checkout without -q, which has lstat'ed every entry already:
    #: asked afterwards, the list costs a second git process that lstats them all again,
    #: 0.46 s at 250k entries), kept in ``Result.said`` for the caller; False: git is quiet
    head_lines: bool = False


class ExportOptions(NamedTuple):
    repository: Path
    rev: str
    destination: Path
    workers: int | None = None
    dry_run: bool = False
    adapt: bool = True
    environ: Mapping[str, str] = os.environ  # as CheckoutOptions.environ
    spawn: Spawn | None = None
    writer: str | None = None  # --writer: "pcheckout", "git", "auto"; None: not given
    worktree_attributes: bool = False  # git archive --worktree-attributes


def _head_json(head: HeadOutcome | None) -> dict[str, object]:
    """Where HEAD went: null for an export and a dry run."""
    return {
        "commit": None if head is None else head.commit,
        "branch": None if head is None else head.branch,
        "detached": None if head is None else head.branch is None,
        "previous_commit": None if head is None else head.previous_commit,
        "previous_branch": None if head is None else head.previous_branch,
    }


class Result:
    """What a checkout, switch or export did (or, with ``dry_run``, would do).

    Built with what every run knows; the rest is set by the run (``apply/report.py``): each
    field's default is below, the lists and dicts are each result's own."""

    seconds: float = 0.0
    written: int = 0
    kept: int = 0
    deleted: int = 0
    dry_run: bool = False
    adapt_summary: str | None = None
    head: HeadOutcome | None = None  # where HEAD went (checkout, switch; not a dry run)
    conversion: list[str]
    processes: bool = False  # written by forked processes (else threads)
    skip_worktree: int = 0  # entries outside the sparse checkout: recorded, not written
    fetch_blobs: int = 0  # blobs a partial clone lacked (fetched, or a dry run would fetch)
    fetched_bytes: int = 0  # bytes of the packs those fetches wrote
    fetches: int = 0  # git fetch processes run for them
    warnings: list[str]  # git's warnings (sparse patterns)
    converted: int = 0  # paths whose conversion may change their bytes
    conversion_reasons: dict[str, int]  # reason -> paths
    converted_by_git: int = 0  # of them, paths converted by git's filters
    conversion_unknown: int = 0  # dry run: paths below a .gitattributes not fetched yet
    export_ignored: int = 0  # export: entries export-ignore leaves out
    export_subst: int = 0  # export: files whose $Format:...$ placeholders are expanded
    hooks: list[str]  # git hooks run (a dry run: to run)
    #: submodule.recurse: the submodules moved, populated or removed (a dry run: to be)
    submodules: list[dict[str, object]]
    lfs_files: int = 0  # paths whose blob is a Git LFS pointer git-lfs's filter smudges
    lfs_local: int = 0  # of them, written here from the local LFS store (no filter process)
    lfs_local_bytes: int = 0  # the bytes of the LFS objects in the local store
    lfs_missing: int = 0  # pointers whose object is not in the local store
    lfs_missing_bytes: int = 0  # their objects' bytes
    lfs_fetches: int = 0  # git lfs fetch processes run for the missing objects
    lfs_fetched_bytes: int = 0  # the bytes of the objects they fetched
    #: a destination that ignores case: the paths that met (git clone's warning names them)
    collided: list[str]
    replaced: list[str]  # of the entries, those not on disk
    #: a fresh checkout into a work tree holding untracked files: the names kept at its top
    untracked_kept: list[str]
    #: git's own lines for where HEAD went, as (stream, line) in its order on each stream:
    #: where git's writer printed them (CheckoutOptions.head_lines); None: not said by git
    said: list[tuple[str, str]] | None = None

    def __init__(
        self, mode: Mode, files: int, bytes: int, plan: WorkerPlan, filesystem: FsInfo
    ) -> None:
        self.mode = mode
        self.files = files
        self.bytes = bytes
        self.plan = plan
        self.filesystem = filesystem
        self.conversion = []
        self.warnings = []
        self.conversion_reasons = {}
        self.hooks = []
        self.submodules = []
        self.collided = []
        self.replaced = []
        self.untracked_kept = []

    def __repr__(self) -> str:
        return f"Result({self.mode!r}, files={self.files}, written={self.written})"

    def to_json(self) -> dict[str, object]:
        """The stable JSON report (docs/json.md)."""
        return {
            "mode": self.mode,
            "filesystem": self.filesystem.to_json(),
            "files": self.files,
            "bytes": self.bytes,
            "workers": self.plan.workers,
            "reason": self.plan.reason,
            "source": self.plan.source,
            "adapt": self.plan.adapt,
            "processes": self.processes if not self.dry_run else self.plan.processes,
            "dry_run": self.dry_run,
            "seconds": round(self.seconds, 4),
            "written": self.written,
            "kept": self.kept,
            "deleted": self.deleted,
            "adapt_summary": self.adapt_summary,
            "conversion": self.conversion,
            "skip_worktree": self.skip_worktree,
            "fetch_blobs": self.fetch_blobs,
            "fetched_bytes": self.fetched_bytes,
            "fetches": self.fetches,
            "warnings": self.warnings,
            "writer": self.plan.writer,
            "writer_reason": self.plan.writer_reason,
            "writer_source": self.plan.writer_source,
            "ceiling": self.plan.ceiling,
            "cpus": None if self.plan.cpus is None else self.plan.cpus.to_json(),
            "tuned": None if self.plan.tuned is None else self.plan.tuned.to_json(),
            "converted": self.converted,
            "conversion_reasons": self.conversion_reasons,
            "converted_by_git": self.converted_by_git,
            "conversion_unknown": self.conversion_unknown,
            "export_ignored": self.export_ignored,
            "export_subst": self.export_subst,
            "hooks": self.hooks,
            "submodules": self.submodules,
            "lfs": {
                "files": self.lfs_files,
                "local": self.lfs_local,
                "local_bytes": self.lfs_local_bytes,
                "missing": self.lfs_missing,
                "missing_bytes": self.lfs_missing_bytes,
                "fetches": self.lfs_fetches,
                "fetched_bytes": self.lfs_fetched_bytes,
            },
            "collided": self.collided,
            "replaced": self.replaced,
            "untracked_kept": self.untracked_kept,
            **_head_json(self.head),
        }

    def add_conversion(self, plan: ConversionPlan) -> None:
        """Report ``plan``: its sources, and how many paths convert and why."""
        self.conversion = plan.sources
        self.converted = plan.converted
        self.conversion_reasons = dict(sorted(plan.counts.items()))
        self.converted_by_git = plan.by_git
        self.conversion_unknown = plan.unknown
        lfs = plan.lfs
        if lfs is not None:
            self.lfs_files = lfs.files
            self.lfs_local = len(lfs.local)
            self.lfs_local_bytes = lfs.local_bytes
            self.lfs_missing = len(lfs.missing)
            self.lfs_missing_bytes = lfs.missing_bytes
            self.lfs_fetches = lfs.fetches
            self.lfs_fetched_bytes = lfs.fetched_bytes
