"""What the commands show: the detect and tune tables, the dry-run report, the summary line.

The core returns typed results (:class:`~pcheckout.fs.detect.FsInfo`,
:class:`~pcheckout.plan.tunecache.TuneResult`); only this package turns them into text.  rich's
tables are imported where a table is drawn: ``rich.table`` costs ~5 ms (``python -X importtime``
on the dev VM, 2 vCPU; it pulls in ``fractions`` and ``decimal``), which ``detect --json``,
plain output to a pipe and a checkout's dry run without a terminal do not need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

from pcheckout.errors import SHOW_PATHS
from pcheckout.fs.kinds import rotational_flag
from pcheckout.plan.tunecache import cache_path, export_key

if TYPE_CHECKING:
    from rich.console import Console

    from pcheckout.clone import CloneResult, SubmoduleResult
    from pcheckout.fs.detect import FsInfo
    from pcheckout.git.describe import LeftBehind, Tracking
    from pcheckout.git.refs import HeadOutcome
    from pcheckout.options import Result
    from pcheckout.plan.cpus import CpuInfo
    from pcheckout.plan.policy import Tuned, Writer
    from pcheckout.plan.tunecache import TuneResult

#: Width of the longest bar in the ``tune`` chart, in cells.
_BAR_WIDTH = 40


def tuned_line(tuned: Tuned | None) -> str:
    """What a checkout there takes from a stored tune result, and where it was found."""
    if tuned is None:
        return "no stored result (the policy decides)"
    ceiling = f", ceiling {tuned.ceiling}" if tuned.ceiling is not None else ""
    file = f" in {tuned.file}" if tuned.file and tuned.file not in tuned.where else ""
    return f"{tuned.workers} workers{ceiling}, measured {tuned.measured_on} {tuned.where}{file}"


def _fs_rows(
    info: FsInfo, tuned: Tuned | None = None, cpus: CpuInfo | None = None
) -> list[tuple[str, str]]:
    kind = info.kind + (f" (upper layer: {info.upper_kind})" if info.upper_kind else "")
    devices = ", ".join(
        f"{d.name} (rotational={rotational_flag(d.rotational)}{', virtual' if d.virtual else ''})"
        for d in info.devices
    )
    opts = ",".join(k if v is None else f"{k}={v}" for k, v in info.options.items())
    rows = [
        ("path", info.path),
        ("examined", info.probed_path),
        ("mount point", info.mount_point),
        ("filesystem", info.fstype),
        ("source", info.source),
        ("kind", kind),
        ("latency-bound", {True: "yes", False: "no", None: "unknown"}[info.latency_bound]),
    ]
    if info.nfs_version:
        rows.append(("NFS version", info.nfs_version))
    if info.f_type is not None:
        rows.append(("statfs f_type", f"0x{info.f_type:x}"))
    if devices:
        rows.append(("devices", devices))
    rows.append(("options", opts))
    export = export_key(info)
    if export is not None:
        rows.append(("export", export))
    rows.append(("tuned", tuned_line(tuned)))
    if cpus is not None:
        rows.append(("CPUs", cpus.describe()))
    return rows


def fs_info(
    console: Console, info: FsInfo, tuned: Tuned | None = None, cpus: CpuInfo | None = None
) -> None:
    """``pcheckout detect``: a rich table on a terminal, plain ``key: value`` lines otherwise;
    ``tuned``: the stored tune result a checkout there would use; ``cpus``: the CPUs it
    would count."""
    if not console.is_terminal:
        for key, value in _fs_rows(info, tuned, cpus):
            console.print(f"{key}: {value}", markup=False, highlight=False, soft_wrap=True)
        for note in info.notes:
            console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
        return
    from rich.table import Table  # only on a terminal: see the module docstring
    from rich.text import Text

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in _fs_rows(info, tuned, cpus):
        table.add_row(key, Text(value))
    console.print(table)
    for note in info.notes:
        console.print(Text("• " + note, style="dim"))


def tune_result(console: Console, result: TuneResult) -> None:
    """``pcheckout tune``: a bar chart of files/s per worker count, the chosen count marked."""
    from rich.table import Table  # see the module docstring
    from rich.text import Text

    best_n, best = max(result.curve, key=lambda p: (p[1], -p[0]))
    table = Table(
        title=f"pcheckout tune: {result.mount_point} ({result.kind}), {result.measured_on}",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    table.add_column("workers", justify="right")
    table.add_column("files/s", justify="right")
    table.add_column("", no_wrap=True)
    table.add_column("", no_wrap=True)
    for n, rate in sorted(result.curve):
        chosen = n == result.workers
        cells = max(0, round(_BAR_WIDTH * rate / best)) if best > 0 else 0
        bar = Text("█" * cells, style="bold green" if chosen else "cyan")
        if cells == 0 and rate > 0:
            bar = Text("▏", style="cyan")
        mark = Text("◀ chosen", style="bold green") if chosen else Text("")
        table.add_row(Text(str(n), style="bold" if chosen else ""), f"{rate:,.0f}", bar, mark)
    console.print(table)
    console.print(
        f"chose [bold]{result.workers}[/bold] worker{'' if result.workers == 1 else 's'}: "
        "the smallest count within "
        f"{result.threshold:.0%} of the best ({best:,.0f} files/s at {best_n}); "
        f"stored for this mount in {cache_path()}",
        highlight=False,
    )
    if result.writers is not None:
        writers_table(console, result)


def writers_table(console: Console, result: TuneResult) -> None:
    """``pcheckout tune``'s second table: each writer's probe checkout, the winner marked."""
    from rich.table import Table  # see the module docstring
    from rich.text import Text

    w = result.writers
    assert w is not None
    table = Table(
        title=f"writers: a fresh checkout of a {w.probe_files:,}-file probe tree, "
        f"median of {w.rounds}",
        title_justify="left",
        box=None,
        pad_edge=False,
    )
    table.add_column("writer")
    table.add_column("workers", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("", no_wrap=True)
    for writer, n, seconds in w.times:
        won = writer == w.winner and (writer != "git" or n == w.git_workers)
        name = "git's checkout" if writer == "git" else "pcheckout's engine"
        mark = Text("◀ chosen", style="bold green") if won else Text("")
        table.add_row(Text(name, style="bold" if won else ""), str(n), f"{seconds:.3f}", mark)
    console.print(table)
    other: Writer = "pcheckout" if w.winner == "git" else "git"
    names = {"git": "git's writer", "pcheckout": "pcheckout's engine"}
    count = w.git_workers if w.winner == "git" else w.engine_workers
    console.print(
        f"chose [bold]{names[w.winner]}[/bold] at {count} for this mount: "
        f"{w.best(w.winner):.3f} s against {w.best(other):.3f} s for {names[other]}",
        highlight=False,
    )


def human_bytes(n: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``, ``1,024 entries`` (``many``: the plural when not ``word + s``)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


#: git 2.39's advice when a checkout detaches HEAD from a branch (checkout.c, detach_advice),
#: unless advice.detachedHead is false.
DETACH_ADVICE = """\
Note: switching to '{rev}'.

You are in 'detached HEAD' state. You can look around, make experimental
changes and commit them, and you can discard any commits you make in this
state without impacting any branches by switching back to a branch.

If you want to create a new branch to retain commits you create, you may
do so (now or later) by using -c with the switch command. Example:

  git switch -c <new-branch-name>

Or undo this operation with:

  git switch -

Turn off this advice by setting config variable advice.detachedHead to false
"""


class HeadReport(NamedTuple):
    """What git would say about HEAD after ``git checkout REV``, with git's facts gathered."""

    move: HeadOutcome
    rev: str  # as git names it: the user's REV, or what `-` and `@{-N}` name
    onelines: Mapping[str, str]  # commit -> "1a2b3c4 subject"
    left: LeftBehind | None  # a detached HEAD's commits left unreachable (None: not asked)
    tracking: Tracking | None  # the branch HEAD names against its upstream
    local: Sequence[str] = ()  # the local changes a switch carried ("M\tpath")


#: Where each of git's lines goes: git checkout prints the tracking lines on stdout, the rest
#: on stderr.
Said = tuple[Literal["out", "err"], str]


def head_lines(h: HeadReport) -> list[Said]:
    """git checkout's own lines for where HEAD went: checkout.c's texts in git 2.39."""
    m = h.move
    out: list[Said] = [("out", line) for line in h.local]
    if m.moved:
        if m.created and h.tracking is not None:
            up = h.tracking.configured or h.tracking.upstream
            out.append(("out", f"branch '{m.branch}' set up to track '{up}'."))
        out += [("err", line) for line in _moved(h)]
    if m.branch is not None and h.tracking is not None and not m.created:
        out.append(("out", tracking_text(h.tracking, m.hints)))  # a new branch: git says none
    return out


def _moved(h: HeadReport) -> list[str]:
    m = h.move
    out: list[str] = []
    old = m.previous_commit
    if m.previous_branch is None and old is not None and old != m.commit:
        if h.left is not None and h.left.lost:
            out += _left_behind(h, old)
        else:
            out.append(f"Previous HEAD position was {h.onelines.get(old, old[:7])}")
    if m.branch is None:
        if m.previous_branch is not None and m.advice:
            out.append(DETACH_ADVICE.format(rev=h.rev))
        out.append(f"HEAD is now at {h.onelines.get(m.commit, m.commit[:7])}")
    elif m.previous_branch == m.branch:
        out.append(f"Already on '{m.branch}'")
    elif m.created:
        out.append(f"Switched to a new branch '{m.branch}'")
    else:
        out.append(f"Switched to branch '{m.branch}'")
    return out


def clone_head_lines(move: HeadOutcome) -> list[str]:
    """What git clone says of the HEAD it checks out: the detach advice, naming the commit
    (builtin/clone.c checkout(): no "HEAD is now at" line)."""
    return [DETACH_ADVICE.format(rev=move.commit)] if move.branch is None and move.advice else []


def tracking_text(t: Tracking, hints: bool) -> str:
    """remote.c's format_tracking_info (git 2.39), ``hints``: advice.statusHints."""
    up, ours, theirs = t.upstream, t.ahead, t.behind
    if t.gone:
        text = f"Your branch is based on '{up}', but the upstream is gone."
        hint = '(use "git branch --unset-upstream" to fixup)'
    elif not ours and not theirs:
        return f"Your branch is up to date with '{up}'."
    elif not theirs:
        text = f"Your branch is ahead of '{up}' by {plural(ours, 'commit')}."
        hint = '(use "git push" to publish your local commits)'
    elif not ours:
        text = (
            f"Your branch is behind '{up}' by {plural(theirs, 'commit')}, "
            "and can be fast-forwarded."
        )
        hint = '(use "git pull" to update your local branch)'
    else:
        text = (
            f"Your branch and '{up}' have diverged,\n"
            f"and have {ours} and {theirs} different commits each, respectively."
        )
        hint = '(use "git pull" to merge the remote branch into yours)'
    return text + (f"\n  {hint}" if hints else "")


def _left_behind(h: HeadReport, old: str) -> list[str]:
    """checkout.c's orphaned-commit warning (suggest_reattach): up to 4 commits named, a 5th
    rather than "... and 1 more."."""
    assert h.left is not None
    n = h.left.lost
    shown = [f"  {line}" for line in h.left.first[: 5 if n == 5 else 4]]
    if n > 5:
        shown.append(f" ... and {n - 4} more.")
    them = "it" if n == 1 else "them"
    out = [
        f"Warning: you are leaving {plural(n, 'commit')} behind, not connected to\n"
        "any of your branches:\n\n" + "\n".join(shown) + "\n"
    ]
    if h.move.advice:
        abbrev = h.onelines.get(old, old[:7]).split(" ", 1)[0]
        out.append(
            f"If you want to keep {them} by creating a new branch, this may be a good time\n"
            f"to do so with:\n\n git branch <new-branch-name> {abbrev}\n"
        )
    return out


def summary(r: Result) -> str:
    """The one line printed after a checkout, switch or export."""
    plan = r.plan
    if r.dry_run:
        return ""
    verb = {"switch": "switched", "resume": "resumed"}.get(r.mode, "wrote")
    files = r.written if r.mode in ("switch", "resume") else r.files
    # -1: not known (git's writer left an index this could not read); never shown as -1
    size = f" ({human_bytes(r.bytes)})" if r.bytes >= 0 else " (bytes not counted)"
    by = " by git's checkout" if plan.writer == "git" else ""
    parts = [
        f"{verb} {plural(files, 'file')}{size} in {r.seconds:.2f} s{by} "
        f"with {plural(plan.workers, 'worker')}"
        f"{' (processes)' if r.processes else ''} ({plan.source})"
    ]
    if r.fetch_blobs and r.fetches:
        parts.append(
            f"fetched {plural(r.fetch_blobs, 'blob')} ({human_bytes(r.fetched_bytes)}) "
            f"in {plural(r.fetches, 'fetch', 'fetches')}"
        )
    elif r.fetch_blobs:  # git's writer prefetches them itself, in one batch
        parts.append(f"{plural(r.fetch_blobs, 'missing blob')} fetched by git")
    if r.skip_worktree:
        parts.append(f"{plural(r.skip_worktree, 'entry', 'entries')} outside the sparse checkout")
    if r.kept:
        parts.append(f"kept {r.kept:,}")
    if r.deleted:
        parts.append(f"deleted {r.deleted:,}")
    if r.submodules:
        parts.append(f"{plural(len(r.submodules), 'submodule')} updated")
    if r.adapt_summary:
        parts.append(r.adapt_summary)
    return "; ".join(parts)


def plan(console: Console, r: Result) -> None:
    """The dry run's report: the filesystem, the work and the plan, and why."""
    # The checkout that produced ``r`` imported the writers already; `detect` must not.
    from pcheckout.write.forked import MIN_ENTRIES as forked_min_entries

    plan = r.plan
    fs_info(console, r.filesystem, plan.tuned, plan.cpus)
    what = {"checkout": "write", "export": "write", "resume": "resume", "switch": "update"}
    console.print(
        f"would {what.get(r.mode, 'write')} {plural(r.files, 'entry', 'entries')} "
        f"({human_bytes(r.bytes)})"
        + (f", delete {r.deleted:,}" if r.deleted else "")
        + (f"; {r.skip_worktree:,} outside the sparse checkout" if r.skip_worktree else "")
    )
    for m in r.submodules:
        console.print(submodule_line(m))
    if r.fetch_blobs:
        how = "in one batch (git's writer)" if plan.writer == "git" else "in batches while writing"
        blobs = plural(r.fetch_blobs, "missing blob")
        console.print(f"would fetch {blobs} from the promisor remote {how}")
    if r.collided or r.replaced:
        shown = ", ".join(r.collided[:SHOW_PATHS]) + (
            ", ..." if len(r.collided) > SHOW_PATHS else ""
        )
        console.print(
            f"the destination ignores case: {plural(len(r.collided), 'path')} collide "
            f"({shown}); {plural(len(r.replaced), 'entry', 'entries')} would be replaced "
            "by another, as git's checkout leaves them"
        )
    if r.untracked_kept:
        shown = ", ".join(r.untracked_kept[:SHOW_PATHS]) + (
            ", ..." if len(r.untracked_kept) > SHOW_PATHS else ""
        )
        console.print(
            f"would keep {plural(len(r.untracked_kept), 'untracked name')} at the top of the "
            f"work tree ({shown}), as git does"
        )
    if r.hooks:
        console.print(f"would run the {', '.join(r.hooks)} hook afterwards, as git does")
    console.print(f"writer: {plan.writer} ({plan.writer_source}) — {plan.writer_reason}")
    count = "checkout.workers for git" if plan.writer == "git" else "workers"
    console.print(f"{count}: {plan.workers} ({plan.source}) — {plan.reason}")
    if plan.adapt:
        console.print("will adapt the worker count to measured throughput (--no-adapt to keep it)")
    if plan.processes:
        console.print(
            "workers are processes (CPU-bound writing: one interpreter lock each), "
            f"from {forked_min_entries:,} entries up on Linux"
        )
    if r.conversion:
        console.print("attributes from: " + "; ".join(r.conversion))
        console.print(conversion_line(r))
    if r.lfs_files:
        console.print(lfs_line(r))
    if r.conversion_unknown:
        console.print(
            f"conversion unknown for {plural(r.conversion_unknown, 'path')}: their "
            ".gitattributes are among the missing blobs (a dry run fetches nothing)"
        )
    if r.export_ignored or r.export_subst:
        console.print(
            f"export-ignore leaves out {plural(r.export_ignored, 'entry', 'entries')}; "
            f"export-subst expands {plural(r.export_subst, 'file')}"
        )


def lfs_line(r: Result) -> str:
    """What the dry run says of the Git LFS pointers (docs/lfs.md)."""
    line = (
        f"Git LFS: {plural(r.lfs_files, 'file')}; {human_bytes(r.lfs_local_bytes)} in the "
        f"local store ({r.lfs_local:,} written here, no filter process)"
    )
    if r.lfs_missing:
        line += f"; {plural(r.lfs_missing, 'object')} ({human_bytes(r.lfs_missing_bytes)}) to fetch"
    return line


def submodule_line(m: Mapping[str, object]) -> str:
    """What the dry run says of one submodule it would move (submodule.recurse)."""
    if m["action"] == "removed":
        return f"would remove submodule '{m['path']}' (its git dir kept)"
    if m["action"] == "replaced":
        return f"would remove submodule '{m['path']}' whole: a file takes its place"
    new = str(m["to"])[:7]
    if m["action"] == "populated":
        return f"would populate submodule '{m['path']}' at {new}"
    return f"would move submodule '{m['path']}' from {str(m['from'])[:7]} to {new}"


def conversion_line(r: Result) -> str:
    """How many paths are converted and why, e.g. "converted: 43 paths (crlf 40, ident 3)"."""
    if not r.converted:
        return "converted: none (every blob is written as stored)"
    why = ", ".join(f"{k} {v:,}" for k, v in r.conversion_reasons.items())
    by_git = f"; {r.converted_by_git:,} by git's filters" if r.converted_by_git else ""
    return f"converted: {plural(r.converted, 'path')} ({why}){by_git}"


def clone_summary(r: CloneResult) -> str:
    """One line after ``pcheckout clone``: the clone phase, then the checkout's summary."""
    parts = [f"cloned into '{r.directory}' in {r.clone_seconds:.2f} s"]
    skipped = {
        "no-checkout": "no checkout (--no-checkout)",
        "bare": "bare: no checkout",
        "mirror": "mirror: no checkout",
        "empty": "empty repository: no checkout",
        "no-head": "the remote's HEAD names no branch it has: no checkout",
    }
    if r.checkout is not None:
        parts.append(summary(r.checkout))
    elif r.skipped is not None:
        parts.append(skipped.get(r.skipped, r.skipped))
    if r.submodules:
        parts.append(plural(_count_submodules(r.submodules), "submodule"))
    return "; ".join(parts)


def _count_submodules(subs: Sequence[SubmoduleResult]) -> int:
    return sum(1 + _count_submodules(s.submodules) for s in subs)
