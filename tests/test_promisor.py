"""git/promisor.py against git: remotes in git's order, missing blobs found without a
fetch, one fetch per batch, a clear error when the remote is gone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import git, make_repo
from partialhelp import blobless_clone, local_blob_count, promisor_packs, serve

from pcheckout.git import promisor
from pcheckout.git.config import read_config
from pcheckout.git.runner import Git
from pcheckout.git.tree import list_tree

FILES = {b"d%d/f%03d" % (i % 4, i): b"blob %d\n" % i for i in range(40)}


@pytest.fixture
def blobless(tmp_path: Path) -> tuple[Path, Path]:
    src = make_repo(tmp_path, dict(FILES))
    server = serve(src)
    return server, blobless_clone(server, tmp_path / "work")


def test_promisor_remotes_in_gits_order() -> None:
    config = {
        "remote.b.url": "x",
        "remote.b.partialclonefilter": "blob:none",
        "remote.a.promisor": "true",
        "remote.c.promisor": "false",
        "remote.origin.promisor": "true",
        "extensions.partialclone": "origin",
        "remote./bad.promisor": "true",
    }
    assert promisor.promisor_remotes(config) == ["b", "a", "origin"]
    assert promisor.promisor_remotes({"extensions.partialclone": "p"}) == ["p"]
    assert promisor.promisor_remotes({"remote.origin.url": "x"}) == []


def test_blobless_clone_is_seen_and_nothing_is_fetched_to_find_what_is_missing(
    blobless: tuple[Path, Path],
) -> None:
    _server, work = blobless
    g = Git(work)
    assert promisor.promisor_remotes(read_config(g)) == ["origin"]
    entries = list_tree(g, "HEAD")
    packs = promisor_packs(work)
    missing = promisor.missing_objects(g, [e.oid for e in entries] * 2)
    assert sorted(missing) == sorted({e.oid for e in entries})
    assert promisor_packs(work) == packs  # no fetch ran
    assert local_blob_count(work) == 0


def test_fetch_in_batches_one_fetch_each(blobless: tuple[Path, Path]) -> None:
    _server, work = blobless
    g = Git(work)
    oids = [e.oid for e in list_tree(g, "HEAD")]
    before = promisor_packs(work)
    landed: list[int] = []
    sizes = promisor.batch_sizes(len(oids), first=8, cap=16)
    assert sizes == [8, 16, 16] and sum(sizes) == 40
    batches, k = [], 0
    for n in sizes:
        batches.append(oids[k : k + n])
        k += n
    pre = promisor.Prefetch(g, ["origin"], batches, landed.append).start()
    result = pre.wait()
    assert landed == [0, 1, 2, -1]
    assert (result.objects, result.fetches) == (40, 3)
    assert result.bytes > 0
    assert len(promisor_packs(work)) == len(before) + 3
    assert promisor.missing_objects(g, oids) == []


def test_unreachable_remote_names_it_and_counts_what_is_missing(
    blobless: tuple[Path, Path],
) -> None:
    server, work = blobless
    g = Git(work)
    oids = [e.oid for e in list_tree(g, "HEAD")]
    shutil.rmtree(server)
    with pytest.raises(promisor.PromisorFetchError) as info:
        promisor.fetch(g, ["origin"], oids)
    assert info.value.count == 40
    assert "40 blobs" in str(info.value) and "'origin'" in str(info.value)
    landed: list[int] = []
    pre = promisor.Prefetch(g, ["origin"], [oids[:10], oids[10:]], landed.append).start()
    with pytest.raises(promisor.PromisorFetchError, match="could not fetch 40 blobs"):
        pre.wait()
    assert landed == [-1]


def test_next_remote_gets_what_the_first_could_not_deliver(tmp_path: Path) -> None:
    src = make_repo(tmp_path, dict(FILES))
    server = serve(src)
    work = blobless_clone(server, tmp_path / "work")
    git(work, "remote", "add", "dead", str(tmp_path / "nowhere.git"))
    git(work, "config", "remote.dead.promisor", "true")
    g = Git(work)
    remotes = promisor.promisor_remotes(read_config(g))
    assert remotes == ["origin", "dead"] or remotes == ["dead", "origin"]
    oids = [e.oid for e in list_tree(g, "HEAD")]
    result = promisor.fetch(g, ["dead", "origin"], oids)
    assert (result.objects, result.fetches) == (40, 2)
    assert promisor.missing_objects(g, oids) == []


def test_no_lazy_fetch_only_where_git_honours_it(tmp_path: Path) -> None:
    g = Git(tmp_path)
    env = promisor.no_lazy_fetch_env(g, {"A": "1"})
    if g.has(promisor.GIT_NO_LAZY_FETCH):
        assert env == {"A": "1", "GIT_NO_LAZY_FETCH": "1"}
    else:
        assert env is None
