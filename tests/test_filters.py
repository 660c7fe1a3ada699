"""Attributes and filters: pcheckout must produce exactly git's bytes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import assert_same_as_git, clone_no_checkout, clone_with_git, git, make_repo

from pcheckout.checkout import CheckoutOptions, checkout

pytestmark = pytest.mark.usefixtures("writer")

TEXT = b"line one\nline two\n"


def _both(
    tmp_path: Path, files: dict, config: dict[str, str] | None = None, workers: int = 3
) -> Path:
    src = make_repo(tmp_path, files)
    theirs = clone_with_git(src, tmp_path / "theirs", config=config)
    ours = clone_no_checkout(src, tmp_path / "ours", config=config)
    result = checkout(CheckoutOptions(directory=ours, workers=workers))
    assert result.conversion  # the filtering path was taken (or would be, by pcheckout)
    assert_same_as_git(ours, theirs)
    return ours


def test_eol_crlf_attribute_and_gitattributes_itself(tmp_path: Path) -> None:
    ours = _both(
        tmp_path,
        {
            b".gitattributes": b"* text eol=crlf\n*.bin -text\n",
            b"a.txt": TEXT,
            b"sub/b.txt": TEXT,
            b"x.bin": b"\x00\x01\n",
            b"link": ("l", b"a.txt"),
        },
    )
    assert (ours / "a.txt").read_bytes() == b"line one\r\nline two\r\n"
    assert (ours / ".gitattributes").read_bytes().endswith(b"\r\n")


def test_nested_gitattributes_and_text_auto(tmp_path: Path) -> None:
    _both(
        tmp_path,
        {
            b".gitattributes": b"*.txt text=auto eol=crlf\n",
            b"deep/er/.gitattributes": b"*.txt -text\n",
            b"top.txt": TEXT,
            b"deep/er/raw.txt": TEXT,
            b"deep/mid.txt": TEXT,
        },
    )


def test_core_autocrlf_without_attributes(tmp_path: Path) -> None:
    _both(
        tmp_path,
        {b"a.txt": TEXT, b"b/c.txt": TEXT, b"bin": b"\x00\n"},
        config={"core.autocrlf": "true"},
    )


def test_ident(tmp_path: Path) -> None:
    ours = _both(tmp_path, {b".gitattributes": b"*.c ident\n", b"x.c": b"/* $Id$ */\n"})
    assert b"$Id: " in (ours / "x.c").read_bytes()


def test_smudge_filter(tmp_path: Path) -> None:
    smudge = f'{sys.executable} -c "import sys; sys.stdout.write(sys.stdin.read().upper())"'
    clean = f'{sys.executable} -c "import sys; sys.stdout.write(sys.stdin.read().lower())"'
    cfg = {"filter.up.smudge": smudge, "filter.up.clean": clean}
    ours = _both(
        tmp_path,
        {b".gitattributes": b"*.up filter=up\n", b"s.up": b"shout\n", b"plain": b"quiet\n"},
        config=cfg,
    )
    assert (ours / "s.up").read_bytes() == b"SHOUT\n"
    assert (ours / "plain").read_bytes() == b"quiet\n"


def test_working_tree_encoding(tmp_path: Path) -> None:
    _both(
        tmp_path,
        {
            b".gitattributes": b"*.u16 working-tree-encoding=UTF-16LE\n",
            b"w.u16": "héllo\n".encode("utf-16-le"),
        },
    )


def test_filtered_names_with_newlines(tmp_path: Path) -> None:
    _both(
        tmp_path,
        {b".gitattributes": b"* text eol=crlf\n", b"new\nline.txt": TEXT, b"tab\t.txt": TEXT},
    )


@pytest.mark.parametrize("workers", [1, 8])
def test_info_attributes_and_many_files(tmp_path: Path, workers: int) -> None:
    files = {b"d%d/f%d.txt" % (i % 7, i): TEXT * (i % 5) for i in range(200)}
    src = make_repo(tmp_path, files)
    theirs = clone_no_checkout(src, tmp_path / "theirs")
    (theirs / ".git" / "info").mkdir(exist_ok=True)
    (theirs / ".git" / "info" / "attributes").write_bytes(b"*.txt text eol=crlf\n")
    git(theirs, "checkout", "-q", "-f", "HEAD")
    ours = clone_no_checkout(src, tmp_path / "ours")
    (ours / ".git" / "info").mkdir(exist_ok=True)
    (ours / ".git" / "info" / "attributes").write_bytes(b"*.txt text eol=crlf\n")
    checkout(CheckoutOptions(directory=ours, workers=workers))
    assert_same_as_git(ours, theirs)


def test_plain_path_when_nothing_converts(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"a": TEXT})
    ours = clone_no_checkout(src, tmp_path / "ours")
    assert checkout(CheckoutOptions(directory=ours)).conversion == []
