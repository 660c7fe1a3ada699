"""``pcheckout export REV DEST`` writes what ``git archive REV | tar -x`` writes:
export-ignore (files, ``dir/`` patterns, nested attributes, directories left empty),
export-subst after the checkout conversion, attributes from the exported tree, and
``--worktree-attributes`` as git's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from attrlib import commit_raw, init_raw
from helpers import git, snapshot

from pcheckout.export import ExportOptions, export

UPPER = f'{sys.executable} -c "import sys; sys.stdout.write(sys.stdin.read().upper())"'

FILES: dict[bytes, bytes | tuple[str, bytes]] = {
    b".gitattributes": (
        b"*.tmp export-ignore\n"
        b"build/ export-ignore\n"
        b"docs/internal/ export-ignore\n"
        b"/ver.txt export-subst\n"
        b"sub/*.in export-subst eol=crlf\n"
        b"*.crlf text eol=crlf\n"
        b"*.id ident\n"
        b"*.up filter=up\n"
        b"lnk export-ignore\n"
        b"notdir export-ignore\n"
        b".gitattributes export-ignore\n"
    ),
    b"keep.txt": b"keep\n",
    b"x.tmp": b"dropped\n",
    b"build/out.o": b"\x00\x01",
    b"build/deep/er.txt": b"dropped\n",
    b"docs/a.md": b"doc\n",
    b"docs/internal/secret.md": b"no\n",
    b"docs/internal/.gitattributes": b"* -export-ignore\n",
    b"only/ignored.tmp": b"the directory must not appear\n",
    b"ver.txt": b"commit $Format:%H$ short $Format:%h$ [$Format:%(describe)$]\n"
    b"source $Format:%S$ notes $Format:%N$ date $Format:%ad$ $Format:unterminated\n",
    b"sub/v.in": b"$Format:%(describe)$ $Format:%s$\n$Id$\n",
    b"sub/nested/.gitattributes": b"*.txt export-ignore\n*.md export-subst\n",
    b"sub/nested/n.txt": b"dropped\n",
    b"sub/nested/n.md": b"$Format:%an <%ae>$\n",
    b"w.crlf": b"one\ntwo\n",
    b"i.id": b"$Id$\n",
    b"s.up": b"shout\n",
    b"lnk": ("l", b"keep.txt"),
    b"other/lnk": ("l", b"../keep.txt"),
    b"notdir/f.txt": b"notdir matches only the path notdir itself\n",
    b"run.sh": ("x", b"#!/bin/sh\n"),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = init_raw(tmp_path_factory.mktemp("archive") / "src", FILES)
    git(src, "tag", "-a", "v1", "-m", "v1")
    git(src, "config", "filter.up.smudge", UPPER)
    git(src, "notes", "add", "-m", "a note", "HEAD")
    return src


def archive_x(repo: Path, rev: str, dest: Path, *args: str) -> Path:
    dest.mkdir()
    tar = subprocess.run(
        ["git", "-C", str(repo), "archive", *args, rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
    return dest


def ours(repo: Path, rev: str, dest: Path, **kw: bool) -> Path:
    export(ExportOptions(repository=repo, rev=rev, destination=dest, workers=2, **kw))
    return dest


@pytest.mark.parametrize("rev", ["HEAD", "v1", "HEAD^{tree}"])
def test_export_equals_git_archive(repo: Path, tmp_path: Path, rev: str) -> None:
    want = snapshot(archive_x(repo, rev, tmp_path / "git"))
    got = snapshot(ours(repo, rev, tmp_path / "ours"))
    assert got == want
    assert b"build" not in got and b"x.tmp" not in got and b"notdir" not in got
    assert got[b"only"] == ("d",)  # its one file is ignored: git writes it empty
    if rev == "HEAD^{tree}":
        assert b"$Format:%H$" in got[b"ver.txt"][2]  # type: ignore[operator]  # a file's bytes
    else:
        assert b"$Format:" not in got[b"sub/v.in"][2]  # type: ignore[operator]


def test_export_reports_ignored_and_substituted(repo: Path, tmp_path: Path) -> None:
    result = export(
        ExportOptions(repository=repo, rev="HEAD", destination=tmp_path / "d", dry_run=True)
    )
    assert result.export_ignored == 12
    assert result.export_subst == 3
    assert result.conversion_reasons == {"crlf": 2, "filter=up": 1, "ident": 1}


def test_attributes_come_from_the_exported_tree(repo: Path, tmp_path: Path) -> None:
    # An older commit without export-ignore lines: its own attributes count, not HEAD's
    # or the work tree's.
    old = tmp_path / "old"
    init_raw(old, {b".gitattributes": b"*.tmp export-ignore\n", b"a.tmp": b"a\n", b"b.txt": b"b\n"})
    commit_raw(
        old, {b".gitattributes": b"*.txt export-ignore\n", b"a.tmp": b"a\n", b"b.txt": b"b\n"}
    )
    git(old, "checkout", "-q", "-f", "HEAD")
    (old / ".gitattributes").write_bytes(b"* export-ignore\n")  # a local edit
    for rev in ("HEAD", "HEAD~1"):
        want = snapshot(archive_x(old, rev, tmp_path / f"git-{rev}"))
        assert snapshot(ours(old, rev, tmp_path / f"ours-{rev}")) == want
    want = snapshot(archive_x(old, "HEAD", tmp_path / "git-wt", "--worktree-attributes"))
    got = snapshot(ours(old, "HEAD", tmp_path / "ours-wt", worktree_attributes=True))
    assert got == want == {}


def test_export_from_a_bare_repository(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    git(bare, "config", "filter.up.smudge", UPPER)
    want = snapshot(archive_x(bare, "v1", tmp_path / "git"))
    assert snapshot(ours(bare, "v1", tmp_path / "ours")) == want


def test_private_scratch_on_a_git_with_check_attr_source_only(repo: Path) -> None:
    # git 2.40 has check-attr --source (no temporary index is made) but not git
    # --attr-source: export's filtered cat-file then needs a private work tree all the same.
    import os

    from pcheckout.git.attributes import TreeAttributes
    from pcheckout.git.runner import Git, discover

    g = Git(repo, version=(2, 40, 0))
    ta = TreeAttributes(g, discover(g), "HEAD^{tree}", [])
    assert ta.index_file is None
    scratch = ta.scratch
    assert os.path.isdir(scratch) and ta.scratch == scratch
    ta.close()
    assert not os.path.exists(scratch)
