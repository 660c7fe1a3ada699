"""write/prefetch.py: rounds of writes overlap batched fetches; every entry a round is
given has its blob locally; .gitattributes first; a server that goes away mid-prefetch."""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import make_repo
from partialhelp import blobless_clone, promisor_packs, serve

from pcheckout.git import promisor
from pcheckout.git.runner import Git
from pcheckout.git.tree import list_tree
from pcheckout.write.prefetch import FetchFrom, plan_fetch, write_while_fetching

FILES = {b"d%d/f%03d" % (i % 5, i): b"blob %d\n" % i for i in range(300)}
FILES[b"d3/.gitattributes"] = b"* text\n"


@dataclass
class FakeOutcome:
    stats: list[bytes | None]
    files: int = 0
    bytes: int = 0


@dataclass
class Recorder:
    git: Git
    oids: list[str]
    rounds: list[list[int]] = field(default_factory=list)
    after_first: object = None

    def __call__(self, skip: list[bool], first: bool) -> FakeOutcome:
        todo = [i for i, s in enumerate(skip) if not s]
        # nothing handed to the writers may still be missing (no lazy fetch could start)
        assert promisor.missing_objects(self.git, [self.oids[i] for i in todo]) == []
        assert first == (not self.rounds)
        self.rounds.append(todo)
        if callable(self.after_first):
            self.after_first()
            self.after_first = None
        return FakeOutcome([b"s" if not s else None for s in skip], len(todo))


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    src = make_repo(tmp_path, dict(FILES))
    server = serve(src)
    return server, blobless_clone(server, tmp_path / "work")


@pytest.mark.parametrize("fetchers", [1, 3])
def test_rounds_write_landed_batches_attributes_first(
    setup: tuple[Path, Path], fetchers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _server, work = setup
    g = Git(work)
    entries = list_tree(g, "HEAD")
    wanted = list(range(len(entries)))
    missing = set(promisor.missing_objects(g, [e.oid for e in entries]))
    plan = plan_fetch(entries, wanted, missing, conversion=True, fetchers=fetchers, first=16)
    attrs = next(i for i, e in enumerate(entries) if e.path.endswith(b".gitattributes"))
    assert entries[attrs].oid in plan.batches[0]
    assert plan.attributes_first and plan.missing == len(missing) == 301
    packs = len(promisor_packs(work))
    rec = Recorder(g, [e.oid for e in entries])
    # Every batch but the first waits for the first round of writes: the overlap is then
    # observable without depending on how fast the fetches are.
    first_round = threading.Event()
    real_run = promisor.Fetcher._run

    def gated(self: promisor.Fetcher, remote: str, oids: list[str]) -> bool:
        if not set(oids) & set(plan.batches[0]):
            assert first_round.wait(60)
        return real_run(self, remote, oids)

    monkeypatch.setattr(promisor.Fetcher, "_run", gated)
    rec.after_first = first_round.set
    out = write_while_fetching(FetchFrom(g, ["origin"], fetchers), entries, plan, rec)
    assert attrs in rec.rounds[0]
    assert sorted(i for r in rec.rounds for i in r) == wanted
    assert all(s is not None for s in out.stats)
    assert out.fetched.objects == 301 and out.fetched.fetches == len(plan.batches)
    assert len(promisor_packs(work)) == packs + len(plan.batches) > packs + 2
    assert len(rec.rounds) >= 2  # writing began before the last batch landed


def test_server_gone_mid_prefetch_writes_what_landed_and_counts_the_rest(
    setup: tuple[Path, Path],
) -> None:
    server, work = setup
    g = Git(work)
    entries = list_tree(g, "HEAD")
    wanted = list(range(len(entries)))
    missing = set(promisor.missing_objects(g, [e.oid for e in entries]))
    plan = plan_fetch(entries, wanted, missing, conversion=False, fetchers=1, first=16)
    rec = Recorder(g, [e.oid for e in entries])
    rec.after_first = lambda: shutil.rmtree(server)
    with pytest.raises(promisor.PromisorFetchError) as info:
        write_while_fetching(FetchFrom(g, ["origin"], 1), entries, plan, rec)
    written = {i for r in rec.rounds for i in r}
    left = {e.oid for i, e in enumerate(entries) if i not in written}
    assert info.value.count == len(left) > 0
    assert "'origin'" in str(info.value)
    assert promisor.missing_objects(g, sorted(left))  # not fetched, not written
