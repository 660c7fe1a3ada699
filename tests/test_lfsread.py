"""The local LFS objects read ahead of the writers (write/lfsread.py), and the plan's
object sizes (git/lfs.py stat_sizes)."""

from __future__ import annotations

import threading
from pathlib import Path

from pcheckout.git.catfile import SMALL_BLOB
from pcheckout.git.lfs import Smudge, stat_sizes
from pcheckout.write.lfsread import ReadAhead, interleaved


def _objects(tmp_path: Path, sizes: list[int]) -> dict[int, Smudge]:
    out: dict[int, Smudge] = {}
    for i, size in enumerate(sizes):
        p = tmp_path / f"obj{i}"
        p.write_bytes(bytes([i % 251]) * size)
        out[i] = Smudge(str(p), size)
    return out


def test_interleaved_takes_one_of_each_region_in_turn() -> None:
    assert interleaved([[0, 1, 2], [10, 11], [], [20]]) == [0, 10, 20, 1, 11, 2]


def test_every_object_is_read_once_and_handed_over(tmp_path: Path) -> None:
    smudges = _objects(tmp_path, [100 + i for i in range(40)])
    reads = ReadAhead(smudges, list(smudges), threads=4).start()
    try:
        got = {}
        for i in reversed(range(40)):  # a writer far from the readers' order
            data = reads.take(i)
            if data is None:  # nobody had begun it: the writer reads it
                data = Path(smudges[i].path).read_bytes()
            got[i] = data
    finally:
        reads.close()
    assert got == {i: Path(s.path).read_bytes() for i, s in smudges.items()}
    assert reads.read <= 40


def test_a_wanted_batch_is_read_first(tmp_path: Path) -> None:
    smudges = _objects(tmp_path, [10] * 20)
    reads = ReadAhead(smudges, list(smudges), threads=1, budget=10)
    reads.want(range(15, 18))  # before it starts: these go before the background order
    reads.start()
    try:
        while reads.read < 1:  # the one reader read one object and waits for room
            threading.Event().wait(0.01)
        assert reads.take(15) == b"\x0f" * 10  # that one: read here, not left to the caller
    finally:
        reads.close()


def test_budget_bounds_what_is_held(tmp_path: Path) -> None:
    smudges = _objects(tmp_path, [1000] * 10)
    reads = ReadAhead(smudges, list(smudges), threads=4, budget=2000).start()
    try:
        deadline = threading.Event()
        deadline.wait(0.2)  # the readers fill the budget and wait
        assert reads.read <= 2
        for i in range(10):  # each take frees room for the next
            data = reads.take(i)
            assert data is None or data == bytes([i]) * 1000
    finally:
        reads.close()


def test_damaged_or_large_objects_are_left_to_the_writer(tmp_path: Path) -> None:
    smudges = _objects(tmp_path, [50, 60])
    smudges[1] = Smudge(smudges[1].path, 61)  # the object is shorter than its pointer says
    big = tmp_path / "big"
    big.write_bytes(b"x" * (SMALL_BLOB + 1))
    smudges[2] = Smudge(str(big), SMALL_BLOB + 1)
    reads = ReadAhead(smudges, [0, 1, 2], threads=2).start()
    try:
        reads.want([0, 1, 2])
        while reads.read < 2:
            threading.Event().wait(0.01)
        assert reads.take(0) == bytes([0]) * 50
        assert reads.take(1) is None  # the writer reads it again: its error is the user's
        assert reads.take(2) is None  # never read ahead: streamed by the writer
    finally:
        reads.close()


def test_stat_sizes(tmp_path: Path) -> None:
    paths = []
    for i in range(100):
        p = tmp_path / f"f{i}"
        if i % 3:
            p.write_bytes(b"y" * i)
        paths.append(str(p))
    assert stat_sizes(paths) == [i if i % 3 else None for i in range(100)]
