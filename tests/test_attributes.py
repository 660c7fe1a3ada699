"""Per-path conversion decided and applied as git's checkout does (git/convert.py).

One repository holds every content kind under every attribute setting; it is
checked out by git under each eol configuration, and the bytes git wrote are
compared with what ``classify`` + ``Conversion.apply`` make of the blob.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from attrlib import CONTENTS, git_checkout_clone, init_raw
from helpers import git

from pcheckout.context import Context, NullReporter
from pcheckout.git import attributes
from pcheckout.git import convert as C
from pcheckout.git.config import read_config
from pcheckout.git.runner import Git, Repo, discover
from pcheckout.git.tree import list_tree

#: Attribute settings, one directory each (``gNN/** <setting>``).
SETTINGS = [
    "",  # nothing set: core.autocrlf decides
    "text",
    "-text",
    "text=auto",
    "eol=crlf",
    "eol=lf",
    "text eol=crlf",
    "text=auto eol=crlf",
    "text=auto eol=lf",
    "-text eol=crlf",
    "crlf",
    "-crlf",
    "crlf=input",
    "text=input",
    "binary",
    "mine",  # [attr]mine text eol=crlf
    "ident",
    "ident eol=crlf",
    "ident text=auto",
    "ident text=auto eol=crlf",
    "ident -text",
    "!text",
    "text=bogus eol=bogus",
    "working-tree-encoding=utf-8 eol=crlf",
    "filter=nodriver eol=crlf",
    "filter=cleanonly ident",
]

CONFIGS = {
    "plain": {},
    "autocrlf-true": {"core.autocrlf": "true"},
    "autocrlf-input": {"core.autocrlf": "input"},
    "eol-crlf": {"core.eol": "crlf"},
}

CLEAN_ONLY = {"filter.cleanonly.clean": "cat"}


def _ctx(g: Git, repo: Repo, config: dict[str, str]) -> Context:
    return Context(g, repo, config, NullReporter(), os.environ)


def _files() -> dict[bytes, bytes | tuple[str, bytes]]:
    lines = [b"[attr]mine text eol=crlf"]
    files: dict[bytes, bytes | tuple[str, bytes]] = {}
    for n, setting in enumerate(SETTINGS):
        d = b"g%02d" % n
        if setting:
            lines.append(d + b"/** " + setting.encode())
        for kind, data in CONTENTS.items():
            files[d + b"/" + kind.encode() + b".txt"] = data
        files[d + b"/link"] = ("l", b"lf.txt")  # symlinks never convert
    # nested overrides, unsets, anchored and ** patterns
    lines += [b"/top.txt eol=crlf", b"**/deep/*.c ident eol=crlf", b"nest/** text eol=crlf"]
    files[b"top.txt"] = CONTENTS["lf"]
    files[b"sub/top.txt"] = CONTENTS["lf"]  # /top.txt is anchored: not this one
    files[b"a/b/deep/x.c"] = CONTENTS["ident"]
    files[b"nest/a.txt"] = CONTENTS["lf"]
    files[b"nest/inner/.gitattributes"] = b"*.txt -text\nb.txt !eol text\n*.lnk eol=crlf\n"
    files[b"nest/inner/a.txt"] = CONTENTS["lf"]
    files[b"nest/inner/b.txt"] = CONTENTS["lf"]
    files[b"nest/inner/c.md"] = CONTENTS["lf"]
    files[b"nest/inner/l.lnk"] = ("l", b"a.txt")
    files[b".gitattributes"] = b"\n".join(lines) + b"\n"
    return files


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("attr-matrix")
    return init_raw(base / "src", _files())


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def checked_out(
    request: pytest.FixtureRequest, matrix: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, dict[str, str]]]:
    config = {**CONFIGS[request.param], **CLEAN_ONLY}
    dest = tmp_path_factory.mktemp("git-" + request.param) / "w"
    yield git_checkout_clone(matrix, dest, config), config


def test_conversion_equals_git_checkout(checked_out: tuple[Path, dict[str, str]]) -> None:
    work, _config = checked_out
    g = Git(work)
    repo = discover(g)
    cfg = read_config(g)
    tree = git(work, "rev-parse", "HEAD^{tree}").decode().strip()
    entries = list_tree(g, tree)
    plan = C.plan_conversion(_ctx(g, repo, cfg), tree, entries)
    assert plan.sources[0] == "the tree has .gitattributes"
    wrong = []
    for e, conv in zip(entries, plan.per_entry, strict=True):
        full = os.fsencode(work) + b"/" + e.path
        if e.mode == 0o120000:
            assert conv is None
            continue
        blob = git(work, "cat-file", "blob", e.oid)
        want = Path(os.fsdecode(full)).read_bytes()
        got = blob if conv is None else conv.apply(blob, e.oid)
        assert conv is None or not conv.by_git, e.path
        if got != want:
            wrong.append((e.path, conv, blob, want, got))
        if conv is None:
            assert blob == want, f"{e.path!r} classified raw but git converted it"
    assert not wrong, wrong[:3]


def test_counts_and_reasons(checked_out: tuple[Path, dict[str, str]]) -> None:
    work, config = checked_out
    g = Git(work)
    tree = git(work, "rev-parse", "HEAD^{tree}").decode().strip()
    entries = list_tree(g, tree)
    plan = C.plan_conversion(_ctx(g, discover(g), read_config(g)), tree, entries)
    assert plan.converted == sum(1 for c in plan.per_entry if c is not None)
    assert plan.by_git == 0
    assert plan.counts["ident"] >= len(C.CONVERT_ATTRS)
    assert ("crlf" in plan.counts) is True


def test_text_auto_eol_lf_converts_nothing(tmp_path: Path) -> None:
    src = init_raw(
        tmp_path / "src",
        {
            b".gitattributes": b"* text=auto eol=lf\n",
            b"a.txt": CONTENTS["lf"],
            b"b.txt": CONTENTS["crlf"],
        },
    )
    g = Git(src)
    tree = git(src, "rev-parse", "HEAD^{tree}").decode().strip()
    plan = C.plan_conversion(_ctx(g, discover(g), read_config(g)), tree, list_tree(g, tree))
    assert plan.sources and not plan.any and plan.counts == {}


def test_no_sources_runs_no_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = init_raw(tmp_path / "src", {b"a.txt": CONTENTS["lf"]})
    g = Git(src)
    tree = git(src, "rev-parse", "HEAD^{tree}").decode().strip()
    entries = list_tree(g, tree)
    repo, cfg = discover(g), read_config(g)

    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("no git process may run")

    monkeypatch.setattr(Git, "run", boom)
    plan = C.plan_conversion(_ctx(g, repo, cfg), tree, entries)
    assert plan.sources == [] and not plan.any


@pytest.mark.parametrize("where", [0, 1, 2, 4, 5, None])
def test_a_gitattributes_is_found_in_any_piece_of_the_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: int | None
) -> None:
    # The paths are joined and searched a few at a time (attributes.JOIN_CHUNK): a
    # .gitattributes is a source wherever it is, on a piece's edge too, and only a file
    # of that name is one (not a name that ends in it, nor a directory's path).
    names = [b"a/x", b"a/y.gitattributes", b"b/.gitattributes/z", b"c", b"d/e", b"f"]
    if where is not None:
        names[where] = (b"sub/" if where % 2 else b"") + b".gitattributes"
    files = {n: b"x\n" for n in names}
    src = init_raw(tmp_path / "src", files)
    g = Git(src)
    tree = git(src, "rev-parse", "HEAD^{tree}").decode().strip()
    entries = list_tree(g, tree)
    cfg = read_config(g)
    monkeypatch.setattr(attributes, "JOIN_CHUNK", 2)
    sources = attributes.conversion_sources(entries, cfg, discover(g).common_dir, {})
    assert ("the tree has .gitattributes" in sources) == (where is not None)


@pytest.mark.parametrize("chunk", [1, 2, 1 << 13])
def test_check_attr_is_fed_the_paths_in_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    # check-attr's input is joined a few paths at a time (attributes.FEED_CHUNK): every
    # path is asked once, in order, each answer its own, whatever the piece size.
    files = {b".gitattributes": b"*.c eol=crlf\n*.t text\nsub/** ident\n"}
    files.update({n: b"x\n" for n in (b"a.c", b"b.t", b"c", b"sub/d.c", b"sub/e", b"f.c")})
    src = init_raw(tmp_path / "src", files)
    g = Git(src)
    tree = git(src, "rev-parse", "HEAD^{tree}").decode().strip()
    entries = list_tree(g, tree)
    monkeypatch.setattr(attributes, "FEED_CHUNK", chunk)
    with attributes.TreeAttributes(g, discover(g), tree, entries) as attrs:
        rows = attrs.lookup([e.path for e in entries], ("eol", "text", "ident"))
    got = {e.path: row for e, row in zip(entries, rows, strict=True)}
    assert got[b"a.c"] == ("crlf", None, None) and got[b"f.c"] == ("crlf", None, None)
    assert got[b"b.t"] == (None, True, None) and got[b"c"] == (None, None, None)
    assert got[b"sub/d.c"] == ("crlf", None, True) and got[b"sub/e"] == (None, None, True)


def test_info_attributes_and_drivers(tmp_path: Path) -> None:
    src = init_raw(
        tmp_path / "src", {b"a.up": b"x\n", b"b.up": b"y\n", b"c.txt": b"z\n", b"d.w": b"w\n"}
    )
    (src / ".git" / "info").mkdir(exist_ok=True)
    (src / ".git" / "info" / "attributes").write_bytes(
        b"*.up filter=up\nb.up filter=none\n*.txt filter=req\n*.w working-tree-encoding=UTF-16\n"
    )
    git(src, "config", "filter.up.smudge", "tr a-z A-Z")
    git(src, "config", "filter.req.required", "true")
    g = Git(src)
    tree = git(src, "rev-parse", "HEAD^{tree}").decode().strip()
    entries = list_tree(g, tree)
    plan = C.plan_conversion(_ctx(g, discover(g), read_config(g)), tree, entries)
    by_path = {e.path: c for e, c in zip(entries, plan.per_entry, strict=True)}
    assert by_path[b"a.up"] is not None and by_path[b"a.up"].driver == "up"
    assert by_path[b"b.up"] is None  # no driver "none" configured: no conversion
    # required, with no command: git streams the path past the driver (test_conversion.py)
    assert by_path[b"c.txt"] is None
    assert by_path[b"d.w"] is not None and by_path[b"d.w"].encoding == "UTF-16"
    assert plan.by_git == 2
    assert plan.counts == {"filter=up": 1, "working-tree-encoding=UTF-16": 1}
    assert plan.sources == ["$GIT_DIR/info/attributes exists"]


def test_attributes_come_from_the_tree_not_the_work_tree(tmp_path: Path) -> None:
    src = init_raw(tmp_path / "src", {b".gitattributes": b"*.txt eol=crlf\n", b"a.txt": b"a\n"})
    git(src, "checkout", "-q", "-f", "HEAD")
    (src / ".gitattributes").write_bytes(b"*.txt -text\n")  # a local edit must not count
    g = Git(src)
    tree = git(src, "rev-parse", "HEAD^{tree}").decode().strip()
    entries = list_tree(g, tree)
    plan = C.plan_conversion(_ctx(g, discover(g), read_config(g)), tree, entries)
    assert plan.counts == {"crlf": 1}


@pytest.mark.parametrize("version", [2, 3, 4])
def test_an_index_without_gitattributes_is_told_from_its_bytes(
    tmp_path: Path, version: int
) -> None:
    """``index_may_name_gitattributes``: False only for a version 2 or 3 index git wrote
    with no .gitattributes entry; a version 4 index (names cut short) always may."""
    from helpers import make_repo

    repo = make_repo(tmp_path, {b"a": b"a\n", b"d/x.gitattributesx": b"x\n"})
    git(repo, "update-index", "--index-version", str(version))
    index = repo / ".git" / "index"
    assert attributes.index_may_name_gitattributes(index.read_bytes()) == (version == 4)
    (repo / "d" / ".gitattributes").write_bytes(b"* text\n")
    git(repo, "add", "d/.gitattributes")
    assert attributes.index_may_name_gitattributes(index.read_bytes())


def test_may_say_reads_every_source_and_may_where_one_cannot_be_read(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "d").mkdir(parents=True)
    (tree / "d" / ".gitattributes").write_bytes(b"*.bin -text\n")
    info = tmp_path / "info-attributes"
    info.write_bytes(b"*.psd filter=LFS\n")
    absent = tmp_path / "absent"
    names = [b"d/.gitattributes"]
    absent_, info_, dir_ = (("", p) for p in (absent, info, tmp_path))
    assert not attributes.may_say(b"lfs", tree, names, [absent_])
    assert attributes.may_say(b"lfs", tree, names, [absent_, info_])  # (any case)
    assert attributes.may_say(b"lfs", tree, [*names, b"sparse/.gitattributes"], [])
    assert attributes.may_say(b"lfs", tree, names, [dir_])  # a directory: unreadable
    (tree / "d" / ".gitattributes").write_bytes(b"[attr]big filter=lfs\n")
    assert attributes.may_say(b"lfs", tree, names, [])
