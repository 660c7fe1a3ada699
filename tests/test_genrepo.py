"""The benchmark repository generator (scripts/genrepo.py): determinism and shapes."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "genrepo.py"


@pytest.fixture(scope="module")
def genrepo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("genrepo", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["genrepo"] = mod  # dataclasses need the module registered
    spec.loader.exec_module(mod)
    return mod


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def ls_tree(repo: Path, rev: str) -> list[tuple[str, str, int, str]]:
    rows = []
    for line in git(repo, "ls-tree", "-r", "-l", rev).splitlines():
        meta, path = line.split("\t", 1)
        mode, _type, _oid, size = meta.split()
        rows.append((mode, path, int(size) if size != "-" else 0, _oid))
    return rows


def test_same_seed_same_commit_ids(genrepo: ModuleType, tmp_path: Path) -> None:
    spec = genrepo.RepoSpec(shape="source", files=300, seed=7, change=0.2)
    a = genrepo.generate(spec, tmp_path / "a")
    b = genrepo.generate(spec, tmp_path / "b")
    assert (a.v1, a.v2) == (b.v1, b.v2)
    c = genrepo.generate(
        genrepo.RepoSpec(shape="source", files=300, seed=8, change=0.2), tmp_path / "c"
    )
    assert c.v1 != a.v1


def test_cli_matches_library(genrepo: ModuleType, tmp_path: Path) -> None:
    res = genrepo.generate(genrepo.RepoSpec(shape="tiny", files=200, seed=3), tmp_path / "lib")
    subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--shape",
            "tiny",
            "--files",
            "200",
            "--seed",
            "3",
            str(tmp_path / "cli"),
        ],
        check=True,
        capture_output=True,
    )
    assert git(tmp_path / "cli", "rev-parse", "main").strip() == res.v1


def test_source_shape(genrepo: ModuleType, tmp_path: Path) -> None:
    repo = tmp_path / "r"
    res = genrepo.generate(genrepo.RepoSpec(shape="source", files=2000, seed=1), repo)
    rows = ls_tree(repo, "v1")
    assert len(rows) == res.files_v1 == 2000
    modes = [m for m, *_ in rows]
    assert 0 < modes.count("100755") < 0.05 * len(rows)  # ~2 %
    assert 0 < modes.count("120000") < 0.03 * len(rows)  # ~1 %
    sizes = sorted(s for m, _p, s, _o in rows if m != "120000")
    median = sizes[len(sizes) // 2]
    assert 1000 < median < 8000  # "a few KiB"
    depth = max(p.count("/") for _m, p, _s, _o in rows)
    assert depth >= 5  # deep fan-out
    nonempty = [o for m, _p, s, o in rows if m != "120000" and s > 0]
    assert len(set(nonempty)) == len(nonempty)  # every non-empty file is its own blob
    assert git(repo, "rev-parse", "main") == git(repo, "rev-parse", "v1")


def test_tiny_shape_has_many_files_per_directory(genrepo: ModuleType, tmp_path: Path) -> None:
    repo = tmp_path / "r"
    genrepo.generate(genrepo.RepoSpec(shape="tiny", files=3000, seed=1), repo)
    rows = ls_tree(repo, "v1")
    dirs = {p.rpartition("/")[0] for _m, p, _s, _o in rows}
    assert len(rows) / len(dirs) > 50
    assert sorted(s for *_, s, _o in rows)[len(rows) // 2] < 2000


def test_change_makes_v2_with_every_kind_of_change(genrepo: ModuleType, tmp_path: Path) -> None:
    repo = tmp_path / "r"
    res = genrepo.generate(genrepo.RepoSpec(shape="source", files=2000, seed=2, change=0.2), repo)
    assert git(repo, "rev-parse", "main") == git(repo, "rev-parse", "v2")
    assert git(repo, "rev-parse", "v2^").strip() == res.v1
    status = [
        ln.split("\t")[0][0]
        for ln in git(repo, "diff", "-M", "--name-status", "v1", "v2").splitlines()
    ]
    for kind in "AMDRT":
        assert kind in status, kind
    assert 0.15 * 2000 < len(status) < 0.3 * 2000
    raw = git(repo, "diff", "--raw", "v1", "v2").splitlines()
    assert any(ln.split()[0] == ":100644" and ln.split()[1] == "100755" for ln in raw)
    dirs1 = {p.rpartition("/")[0] for _m, p, _s, _o in ls_tree(repo, "v1")}
    dirs2 = {p.rpartition("/")[0] for _m, p, _s, _o in ls_tree(repo, "v2")}
    assert dirs1 - dirs2 and dirs2 - dirs1  # a removed and a new directory


def test_big_blob_is_streamed(genrepo: ModuleType, tmp_path: Path) -> None:
    repo = tmp_path / "r"
    genrepo.generate(genrepo.RepoSpec(big_blob_mib=3), repo)
    sizes = {p: s for _m, p, s, _o in ls_tree(repo, "v1")}
    assert sizes["big.bin"] == 3 << 20


@pytest.mark.parametrize(
    "script",
    [
        "genrepo.py",
        "bench.py",
        "bench_clone.py",
        "bench_switch.py",
        "latencyfs.py",
        "latencyfs_check.py",
        "plot_bench.py",
    ],
)
def test_script_help_renders(script: str) -> None:
    """Every benchmark script's --help renders (a stray '%' in a help text broke bench.py's)."""
    path = Path(__file__).resolve().parent.parent / "scripts" / script
    if not path.exists():
        pytest.skip(f"no {script}")
    done = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_bigdir_shape_has_one_directory_of_1200_files(genrepo: ModuleType, tmp_path: Path) -> None:
    repo = tmp_path / "r"
    genrepo.generate(genrepo.RepoSpec(shape="bigdir", files=3000, seed=1), repo)
    rows = ls_tree(repo, "v1")
    per_dir: dict[str, int] = {}
    for _m, p, _s, _o in rows:
        per_dir[p.rpartition("/")[0]] = per_dir.get(p.rpartition("/")[0], 0) + 1
    counts = sorted(per_dir.values())
    assert counts[-1] >= 1200 and counts[-2] < 200


@pytest.mark.parametrize("attributes", ["text-auto", "gitlike"])
def test_attribute_sets(genrepo: ModuleType, tmp_path: Path, attributes: str) -> None:
    plain = genrepo.generate(genrepo.RepoSpec(files=500, seed=4), tmp_path / "plain")
    res = genrepo.generate(
        genrepo.RepoSpec(files=500, seed=4, attributes=attributes), tmp_path / "attrs"
    )
    repo = tmp_path / "attrs"
    attrs = git(repo, "show", "v1:.gitattributes")
    if attributes == "text-auto":
        assert attrs == "* text=auto eol=lf\n"
    else:
        assert attrs.count(" text eol=crlf\n") == genrepo.CRLF_PATHS
        assert attrs.count(" ident\n") == genrepo.IDENT_PATHS
        ident = [ln.split()[0][1:] for ln in attrs.splitlines() if ln.endswith(" ident")]
        assert all(git(repo, "show", f"v1:{p}").startswith("/* $Id$ */\n") for p in ident)
        assert sum(1 for r in ls_tree(repo, "v1") if r[1].endswith(".gitattributes")) == 2
    # the same tree otherwise
    paths = {p for _m, p, _s, _o in ls_tree(repo, "v1") if not p.endswith(".gitattributes")}
    assert paths == {p for _m, p, _s, _o in ls_tree(tmp_path / "plain", "v1")}
    assert res.v1 != plain.v1


def test_loose_objects(genrepo: ModuleType, tmp_path: Path) -> None:
    """--loose: the same commits, every object loose, no pack."""
    packed = genrepo.generate(genrepo.RepoSpec(files=300, change=0.2), tmp_path / "p")
    loose = genrepo.generate(genrepo.RepoSpec(files=300, change=0.2, loose=True), tmp_path / "l")
    assert loose == packed
    counts = dict(
        line.split(": ") for line in git(tmp_path / "l", "count-objects", "-v").splitlines()
    )
    assert counts["packs"] == "0" and int(counts["count"]) > 300
    git(tmp_path / "l", "fsck", "--strict", "--no-dangling")
