"""What a checkout, switch or export will do, decided before anything is written.

A :class:`Plan` is the whole decision: which entries are written and how they convert,
what is deleted, the index entries kept and recorded, the blobs to fetch, the worker
plan and writer, where HEAD goes and the hooks to run.  The decide step makes it
(``decide/``); ``--dry-run`` reports it; the apply step (``apply/``) carries it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:  # types only: nothing here runs them
    from pcheckout.decide.collisions import Collisions
    from pcheckout.decide.submodules import SubmoduleMove
    from pcheckout.fs.detect import FsInfo
    from pcheckout.git.attributes import TreeAttributes
    from pcheckout.git.convert import ConversionPlan
    from pcheckout.git.hooks import Hook
    from pcheckout.git.refs import Target
    from pcheckout.git.tree import Entry, TreeChanges
    from pcheckout.plan.policy import WorkerPlan
    from pcheckout.write import journal
    from pcheckout.write.indexout import KeptEntries
    from pcheckout.write.partial import Selection

#: What a plan does: a fresh checkout, the resume of an interrupted one, a switch of a
#: populated work tree (by the engine, or by ``git checkout REV`` itself: "git-switch"),
#: or an export of the tree alone.
Kind = Literal["fresh", "resume", "switch", "git-switch", "export"]


class Counts(NamedTuple):
    """What the plan states before anything is written (the dry run's report)."""

    files: int  # entries written
    nbytes: int  # their bytes, where listed (a dry run); else 0
    deleted: int = 0  # paths removed from the work tree
    skip_worktree: int = 0  # entries recorded outside a sparse checkout, not written
    fetch_blobs: int = 0  # blobs a partial clone lacks (fetched before or while writing)
    export_ignored: int = 0  # export: entries export-ignore leaves out
    export_subst: int = 0  # export: files whose $Format:...$ placeholders are expanded


class HeadMove(NamedTuple):
    """Where HEAD goes: as ``git checkout REV`` moves it."""

    rev: str
    target: Target
    old: str | None = None  # git's own switch: the ref HEAD names before git moves it


class Export(NamedTuple):
    """What an export writes besides its entries."""

    subst: list[int]  # entries (indexes) whose $Format:...$ placeholders are expanded
    empty_dirs: list[bytes]  # directories git archive writes although nothing in them is
    attributes: TreeAttributes | None  # the tree's attributes (their scratch is used again)
    worktree_attributes: bool  # git archive --worktree-attributes
    #: git's writer knows nothing of export-ignore and export-subst: it writes an export
    #: only where neither changes anything (else the engine does, whatever the plan says)
    git_can_write: bool
    #: what tar -x leaves (fs/untar.py): the umask the files and directories are made
    #: under, and every member's mtime (seconds: the commit's date, or when a tree began)
    umask: int = 0o022
    mtime: int = 0
    existing_dirs: Sequence[bytes] = ()  # directories already there: given a member's mode


class Plan(NamedTuple):
    """One run's decision; see the module docstring."""

    kind: Kind
    root: Path  # the work tree or the export's destination
    tree: str  # the tree written
    entries: Sequence[Entry]  # what the writers are given (a switch: only what it writes)
    workers: WorkerPlan  # how many writers, and whose
    fs: FsInfo  # the destination's filesystem
    counts: Counts
    dry_run: bool = False
    #: which of ``entries`` are written, which only recorded (skip-worktree), and the
    #: blobs a partial clone still lacks; None: every entry, every blob local
    selection: Selection | None = None
    #: how each entry converts; None where it is planned once a switch's missing blobs are
    #: fetched (a changed .gitattributes may be among them), or where git's writer converts
    conversion: ConversionPlan | None = None
    #: paths removed before anything is written (a switch's; what interrupted runs of
    #: other trees left, before a fresh checkout)
    delete: Sequence[bytes] = ()
    #: ignored files and directories in the way of what is written: removed after
    #: ``delete``, as git's checkout overwrites them
    expendable: Sequence[bytes] = ()
    kept: KeptEntries | None = None  # a switch's kept index entries (None: the entries alone)
    head: HeadMove | None = None  # None: HEAD does not move (an export)
    warnings: Sequence[str] = ()  # git's own warnings (sparse patterns), said as git says them
    #: the journal of the interrupted run this one finishes (a resume, a switch, an export)
    previous: journal.Previous | None = None
    #: the trees interrupted runs before this one were writing or leaving (the journal
    #: names them, so that a run interrupted again still knows whose files it finds)
    earlier: tuple[str, ...] = ()
    commit: str | None = None  # the commit of ``tree``, where REV names one
    #: the whole target tree where ``entries`` is a part of it (a switch's conversion
    #: reads its .gitattributes)
    tree_entries: Sequence[Entry] | None = None
    changes: TreeChanges | None = None  # a switch git decides: what changes (its counts)
    #: a switch's parallel deletes: the least paths worth a thread
    min_share: int = 1
    export: Export | None = None
    hooks: tuple[Hook, ...] = ()  # run once the plan is carried out, in this order
    #: submodule.recurse: the submodules moved, populated or removed (the engine moves
    #: them; git's writer moves them itself)
    submodules: tuple[SubmoduleMove, ...] = ()
    #: submodule.recurse applies (not to git clone's own checkout): git's writer is told
    recurse_submodules: bool = False
    #: paths that fold together on a destination that ignores case: written as git does
    collisions: Collisions | None = None
    #: a fresh checkout into a work tree holding untracked files: the names at its top the
    #: tree has nothing at, kept as they are (as git keeps them)
    untracked_kept: tuple[bytes, ...] = ()
    #: git clone's checkout (its journal says so: a re-run finishes it as git clone would)
    clone: bool = False
    #: git's writer: what it wrote read back from its index (CheckoutOptions.counts)
    counts_read: bool = True
    #: a switch by git's writer: git says where HEAD went (CheckoutOptions.head_lines)
    head_lines: bool = False

    @property
    def mode(self) -> Literal["checkout", "resume", "switch", "export"]:
        """The mode the report names."""
        if self.kind == "fresh":
            return "checkout"
        if self.kind == "git-switch":
            return "switch"
        return self.kind
