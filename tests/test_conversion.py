"""A checkout converts exactly the paths git converts, exactly as git does: content kinds x
attribute settings x eol configuration, with filter drivers (a smudge command and a
long-running process filter), working-tree-encoding, nested overrides and symlinks;
bytes, index entries and stat data equal to git's own checkout.

One source repository for the module (blobs stored as given); each configuration is one
git clone and one pcheckout checkout of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from attrlib import CONTENTS, assert_like_git, commit_raw, git_checkout_clone, init_raw
from helpers import assert_same_as_git, clone_no_checkout, git, run_cli
from test_attributes import SETTINGS

from pcheckout.checkout import CheckoutOptions, checkout
from pcheckout.context import NullReporter
from pcheckout.errors import FilterError

PROCFILTER = Path(__file__).resolve().parent / "procfilter.py"
UPPER = f'{sys.executable} -c "import sys; sys.stdout.write(sys.stdin.read().upper())"'
LOWER = f'{sys.executable} -c "import sys; sys.stdout.write(sys.stdin.read().lower())"'
DRIVERS = {
    "filter.up.smudge": UPPER,
    "filter.up.clean": LOWER,
    "filter.proc.process": f"{sys.executable} {PROCFILTER}",
    "filter.proc.required": "true",
    "filter.cleanonly.clean": "cat",
}
CONFIGS = {
    "plain": {},
    "autocrlf-true": {"core.autocrlf": "true"},
    "autocrlf-input": {"core.autocrlf": "input"},
    "eol-crlf": {"core.eol": "crlf"},
}
KINDS = ["lf", "crlf", "mixed", "lonecr", "nul", "noeol", "empty", "ident", "weird"]


def _files() -> dict[bytes, bytes | tuple[str, bytes]]:
    lines = [b"[attr]mine text eol=crlf"]
    files: dict[bytes, bytes | tuple[str, bytes]] = {}
    settings = [
        *SETTINGS,
        "filter=up",
        "filter=proc eol=crlf",
        "ident filter=up",
        "working-tree-encoding=UTF-16LE",
        "working-tree-encoding=UTF-16LE eol=crlf",
    ]
    for n, setting in enumerate(settings):
        d = b"g%02d" % n
        if setting:
            lines.append(d + b"/** " + setting.encode())
        for kind in KINDS:
            data = CONTENTS[kind]
            if "UTF-16" in setting:
                data = data.replace(b"\0", b"").decode("latin-1").encode("utf-8")
            files[d + b"/" + kind.encode() + b".txt"] = data
        files[d + b"/x" + kind.encode()] = ("x", CONTENTS["lf"])
        files[d + b"/link"] = ("l", b"lf.txt")
    lines += [b"*.lnk eol=crlf", b"/top.txt eol=crlf", b"**/deep/*.c ident eol=crlf"]
    files[b"top.txt"] = CONTENTS["lf"]
    files[b"sub/top.txt"] = CONTENTS["lf"]
    files[b"a/b/deep/x.c"] = CONTENTS["ident"]
    files[b"nest/.gitattributes"] = b"* text eol=crlf\n"
    files[b"nest/a.txt"] = CONTENTS["lf"]
    files[b"nest/inner/.gitattributes"] = b"*.txt -text\nb.txt !eol text\n"
    files[b"nest/inner/a.txt"] = CONTENTS["lf"]
    files[b"nest/inner/b.txt"] = CONTENTS["lf"]
    files[b"nest/inner/c.md"] = CONTENTS["lf"]
    files[b"links/l.lnk"] = ("l", b"../top.txt")
    files[b".gitattributes"] = b"\n".join(lines) + b"\n"
    return files


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_raw(tmp_path_factory.mktemp("conv") / "src", _files())


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_checkout_equals_git_clone(source: Path, tmp_path: Path, name: str) -> None:
    config = {**CONFIGS[name], **DRIVERS}
    theirs = git_checkout_clone(source, tmp_path / "theirs", config)
    ours = clone_no_checkout(source, tmp_path / "ours", config)
    result = checkout(CheckoutOptions(directory=ours, workers=3))
    assert result.converted and result.converted_by_git
    assert_like_git(ours, theirs)


def test_dry_run_json_counts_conversions(source: Path, tmp_path: Path) -> None:
    ours = clone_no_checkout(source, tmp_path / "ours", DRIVERS)
    done = run_cli("checkout", "--dry-run", "--json", "-C", str(ours))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["conversion"] == ["the tree has .gitattributes"]
    reasons = report["conversion_reasons"]
    per_dir = len(KINDS) + 1  # and one executable file
    assert reasons["filter=up"] == 2 * per_dir  # "ident filter=up" too
    assert reasons["filter=proc"] == per_dir
    assert reasons["working-tree-encoding=UTF-16LE"] == 2 * per_dir
    assert report["converted_by_git"] == 5 * per_dir
    plain = run_cli("checkout", "--dry-run", "-C", str(ours))
    assert "converted: " in plain.stdout and "by git's filters" in plain.stdout


def test_text_auto_eol_lf_runs_no_filter_process(tmp_path: Path) -> None:
    files = {b".gitattributes": b"* text=auto eol=lf\n"}
    files.update({b"d%d/f%d.txt" % (i % 5, i): CONTENTS["lf"] for i in range(60)})
    src = init_raw(tmp_path / "src", files)
    theirs = git_checkout_clone(src, tmp_path / "theirs", {})
    ours = clone_no_checkout(src, tmp_path / "ours")
    started: list[list[str]] = []

    def spawn(argv: list[str], **kw: object) -> object:
        import subprocess

        started.append(list(argv))
        return subprocess.Popen(argv, **kw)  # type: ignore[call-overload]  # Popen's keywords

    result = checkout(CheckoutOptions(directory=ours, workers=2, spawn=spawn))
    assert result.converted == 0 and result.conversion
    assert started and not any("--filters" in a for a in started)
    assert_same_as_git(ours, theirs)


def test_many_files_mixed_routes_forked(tmp_path: Path) -> None:
    # Enough entries for forked writers on a CPU-bound destination: each child routes its
    # share (raw, in-process CRLF and ident, git's smudge filter).
    files: dict[bytes, bytes | tuple[str, bytes]] = {
        b".gitattributes": b"*.crlf text eol=crlf\n*.id ident\n*.up filter=up\n"
    }
    for i in range(1500):
        ext = (b".txt", b".crlf", b".id", b".up")[i // 50 % 4] if i % 50 == 0 else b".txt"
        data = b"shout %d\n" % i if ext == b".up" else b"$Id$ line %d\nnext\n" % i
        files[b"d%02d/f%04d%s" % (i % 30, i, ext)] = data
    src = init_raw(tmp_path / "src", files)
    cfg = {"filter.up.smudge": UPPER, "filter.up.clean": LOWER}
    theirs = git_checkout_clone(src, tmp_path / "theirs", cfg)
    ours = clone_no_checkout(src, tmp_path / "ours", cfg)
    result = checkout(CheckoutOptions(directory=ours))
    assert result.conversion_reasons == {"crlf": 8, "filter=up": 7, "ident": 7}
    assert_same_as_git(ours, theirs)


def test_required_filter_failure_names_path_and_filter(tmp_path: Path) -> None:
    src = init_raw(
        tmp_path / "src",
        {b".gitattributes": b"*.bad filter=bad\n", b"a.txt": b"fine\n", b"sub/x.bad": b"data\n"},
    )
    cfg = {"filter.bad.smudge": "false", "filter.bad.required": "true"}
    ours = clone_no_checkout(src, tmp_path / "ours", cfg)
    with pytest.raises(FilterError, match=r"sub/x\.bad.*filter 'bad'"):
        checkout(CheckoutOptions(directory=ours, workers=1))
    assert not (ours / ".git" / "index").exists()  # nothing recorded
    assert not (ours / "sub" / "x.bad").exists()


def _git_checkout(work: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-C", str(work), "checkout", "-q", "-f", "main"], capture_output=True
    )


@pytest.mark.parametrize("writer", ["pcheckout", "git"], indirect=True)
def test_a_required_filter_that_fails_exits_with_gits_status(tmp_path: Path, writer: str) -> None:
    # git's checkout dies (exit 128) on a required filter that fails; so does pcheckout
    src = init_raw(tmp_path / "src", {b".gitattributes": b"*.bad filter=bad\n", b"x.bad": b"d\n"})
    cfg = {"filter.bad.smudge": "false", "filter.bad.required": "true"}
    theirs = clone_no_checkout(src, tmp_path / "theirs", cfg)
    assert _git_checkout(theirs).returncode == 128
    ours = clone_no_checkout(src, tmp_path / "ours", cfg)
    proc = run_cli("checkout", "-C", str(ours), "--writer", writer, "-q")
    assert proc.returncode == 128, proc.stderr
    assert "x.bad" in proc.stderr and "smudge filter bad failed" in proc.stderr
    assert not (ours / ".git" / "index").exists()


@pytest.mark.parametrize("writer", ["pcheckout", "git"], indirect=True)
def test_a_required_filter_without_a_command_as_git_checkout_meets_it(
    tmp_path: Path, writer: str
) -> None:
    # filter.<x>.required with no smudge command: git's checkout streams a path nothing
    # else converts, without the driver (entry.c: get_stream_filter), and writes it as
    # stored; a path it converts in core (text=auto here) dies, "smudge filter x failed"
    # (convert.c: apply_filter finds no command).  The engine sent both to git's filters.
    files = {b".gitattributes": b"*.a filter=nope\n", b"f.a": b"x\n", b"g.a": b"y\n"}
    src = init_raw(tmp_path / "src", files)
    cfg = {"filter.nope.required": "true"}
    theirs = git_checkout_clone(src, tmp_path / "theirs", cfg)
    ours = clone_no_checkout(src, tmp_path / "ours", cfg)
    checkout(CheckoutOptions(directory=ours))
    assert_like_git(ours, theirs)  # (git status dies here: "clean filter 'nope' failed")
    commit_raw(src, {**files, b".gitattributes": b"*.a filter=nope text=auto\n"})
    assert _git_checkout(clone_no_checkout(src, tmp_path / "again", cfg)).returncode == 128
    again = clone_no_checkout(src, tmp_path / "ours-again", cfg)
    proc = run_cli("checkout", "-C", str(again), "--writer", writer, "-q")
    assert proc.returncode == 128 and "smudge filter nope failed" in proc.stderr, proc.stderr


def test_attributes_of_the_target_not_of_head(tmp_path: Path) -> None:
    # A switch converts with the target's .gitattributes.
    src = init_raw(tmp_path / "src", {b".gitattributes": b"*.txt -text\n", b"a.txt": b"a\n"})
    commit_raw(
        src, {b".gitattributes": b"*.txt text eol=crlf\n", b"a.txt": b"a\nb\n", b"b.txt": b"b\n"}
    )
    theirs = git_checkout_clone(src, tmp_path / "theirs", {})
    ours = clone_no_checkout(src, tmp_path / "ours")
    git(ours, "checkout", "-q", "-f", "HEAD~1")
    checkout(CheckoutOptions(directory=ours, rev="main"))
    assert (ours / "a.txt").read_bytes() == b"a\r\nb\r\n"
    git(theirs, "checkout", "-q", "main")
    assert_same_as_git(ours, theirs)


class _Said(NullReporter):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def git_message(self, line: str) -> None:
        self.lines.append(line)


@pytest.mark.parametrize("how", ["threads", "processes", "git's writer"])
def test_a_filter_that_fails_but_is_not_required_is_reported_as_git_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """git's checkout writes such a file as stored and says "error: external filter ...
    failed" for it (convert.c), -q or not; the engine's cat-files said it to a file."""
    from pcheckout.write import forked

    files = {b".gitattributes": b"*.bad filter=bad\n", b"ok.txt": b"fine\n"}
    files.update({b"d%d/x%d.bad" % (i % 3, i): b"data %d\n" % i for i in range(12)})
    src = init_raw(tmp_path / "src", files)
    cfg = {"filter.bad.smudge": "false"}
    theirs = clone_no_checkout(src, tmp_path / "theirs", cfg)
    want = _git_checkout(theirs)
    assert want.returncode == 0
    said = sorted(want.stderr.decode().splitlines())
    assert said and all("external filter 'false' failed" in line for line in said)
    ours = clone_no_checkout(src, tmp_path / "ours", cfg)
    if how == "processes":
        monkeypatch.setattr(forked, "MIN_ENTRIES_PER_PROCESS", 5)
        monkeypatch.setattr(forked, "MIN_ENTRIES", 10)
    ui = _Said()
    writer = "git" if how == "git's writer" else "pcheckout"
    opts = CheckoutOptions(directory=ours, workers=2, writer=writer, processes=how == "processes")
    result = checkout(opts, ui)
    assert result.processes == (how == "processes")
    assert sorted(ui.lines) == said
    assert_same_as_git(ours, theirs)
