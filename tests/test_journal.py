"""The in-progress journal: records only complete files, survives a torn tail,
and proves a file unchanged by its stat data alone."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pcheckout.fs.files import pack_stat
from pcheckout.git.tree import MODE_EXEC, MODE_FILE, MODE_GITLINK, MODE_SYMLINK
from pcheckout.write import journal as jn

TREE = "t" * 40


def _st(path: Path) -> bytes:
    return pack_stat(os.lstat(path))


def _files(root: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        p = root / f"f{i}"
        p.write_bytes(b"x" * (i + 1))
        paths.append(p)
    return paths


def test_records_round_trip_in_batches(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    files = _files(tmp_path, jn.FLUSH_RECORDS + 5)
    j = jn.Journal.start(marker, jn.Header("c" * 40, TREE, False))
    for i, p in enumerate(files):
        j.done(i, _st(p))
    # one full batch went out by itself; the rest waits for a flush
    assert len(jn.read(marker).done) == jn.FLUSH_RECORDS  # type: ignore[union-attr]
    j.flush()
    prev = jn.read(marker)
    assert prev is not None and prev.tree == TREE and not prev.conversion
    assert sorted(prev.done) == list(range(len(files)))
    assert prev.done[3] == _st(files[3])
    j.close()


def test_a_torn_batch_is_dropped_and_cut_before_appending(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    files = _files(tmp_path, 6)
    j = jn.Journal.start(marker, jn.Header("c", TREE, False))
    for i in range(4):
        j.done(i, _st(files[i]))
    j.close()
    whole = marker.read_bytes()
    marker.write_bytes(whole + jn._record_of(4, _st(files[4]))[:20])  # killed mid-write
    prev = jn.read(marker)
    assert prev is not None and sorted(prev.done) == [0, 1, 2, 3]
    assert prev.valid_length == len(whole)
    j = jn.Journal.start(marker, jn.Header("c", TREE, False), previous=prev)
    j.done(5, _st(files[5]))
    j.close()
    assert sorted(jn.read(marker).done) == [0, 1, 2, 3, 5]  # type: ignore[union-attr]


def test_a_corrupt_record_ends_what_is_trusted(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    files = _files(tmp_path, 3)
    j = jn.Journal.start(marker, jn.Header("c", TREE, False))
    for i, p in enumerate(files):
        j.done(i, _st(p))
    j.close()
    data = bytearray(marker.read_bytes())
    data[len(jn.header("c", TREE, False)) + jn.RECORD.size + 5] ^= 0xFF  # record 1
    assert sorted(jn.parse(bytes(data)).done) == [0]


def test_another_tree_starts_afresh(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    f = _files(tmp_path, 1)[0]
    j = jn.Journal.start(marker, jn.Header("c", TREE, False))
    j.done(0, _st(f))
    j.close()
    prev = jn.read(marker)
    jn.Journal.start(marker, jn.Header("d", "u" * 40, False), previous=prev).close()
    again = jn.read(marker)
    assert again is not None and again.tree == "u" * 40 and not again.done
    assert jn.candidates(prev, "u" * 40, [True], [False]) == []


def test_an_older_marker_has_no_records(tmp_path: Path) -> None:
    prev = jn.parse(b"0123abcd\n")
    assert prev.version == 1 and prev.commit == "0123abcd" and not prev.done
    assert jn.candidates(prev, TREE, [True], [False]) == []
    assert jn.parse(jn.MAGIC + b"commit c\ntr").done == {}  # killed in the header


def test_only_entries_raw_now_are_candidates(tmp_path: Path) -> None:
    # The writers record only what they wrote raw; a resume keeps only what is
    # raw now too (attributes or config may have changed since).
    marker = tmp_path / "marker"
    f = _files(tmp_path, 2)
    j = jn.Journal.start(marker, jn.Header("c", TREE, False))
    j.done(0, _st(f[0]))
    j.done(1, _st(f[1]))
    j.close()
    prev = jn.read(marker)
    assert jn.candidates(prev, TREE, [True, True], [False, False]) == [0, 1]
    assert jn.candidates(prev, TREE, [False, True], [False, False]) == [1]
    assert jn.candidates(prev, TREE, [True, True], [True, False]) == [1]  # written already
    assert jn.candidates(prev, TREE, [True], [False]) == [0]  # beyond the listing


@pytest.mark.parametrize(
    "change", ["none", "rewrite", "truncate", "chmod", "replace", "remove", "touch"]
)
def test_proof_by_stat_data(tmp_path: Path, change: str) -> None:
    marker = tmp_path / "marker"
    f = tmp_path / "f"
    f.write_bytes(b"hello\n")
    j = jn.Journal.start(marker, jn.Header("c", TREE, False))
    j.done(0, _st(f))
    j.close()
    time.sleep(0.01)  # timestamps move on (nanosecond clocks still tick between calls)
    if change == "rewrite":
        f.write_bytes(b"HELLO\n")  # same size
    elif change == "truncate":
        os.truncate(f, 3)
    elif change == "chmod":
        f.chmod(0o755)
    elif change == "replace":
        f.unlink()
        f.write_bytes(b"hello\n")
    elif change == "remove":
        f.unlink()
    elif change == "touch":
        os.utime(f, ns=(os.lstat(f).st_atime_ns, os.lstat(f).st_mtime_ns))  # ctime moves
    prev = jn.read(marker)
    assert prev is not None
    st = None if change == "remove" else os.lstat(f)
    kept = jn.proven(prev, [0], [st], [MODE_FILE], [6])
    assert kept == ([0] if change == "none" else [])


def test_proof_checks_the_tree_mode_and_size(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    f = tmp_path / "f"
    f.write_bytes(b"hello\n")
    (tmp_path / "d").mkdir()
    j = jn.Journal.start(marker, jn.Header("c", TREE, False))
    j.done(0, _st(f))
    j.done(1, _st(tmp_path / "d"))
    j.close()
    prev = jn.read(marker)
    assert prev is not None
    st = [os.lstat(f), os.lstat(tmp_path / "d")]
    assert jn.proven(prev, [0, 1], st, [MODE_FILE, MODE_GITLINK], [6, -1]) == [0, 1]
    assert jn.proven(prev, [0], st[:1], [MODE_EXEC], [6]) == []  # exec bit wanted
    assert jn.proven(prev, [0], st[:1], [MODE_SYMLINK], [6]) == []
    assert jn.proven(prev, [0], st[:1], [MODE_FILE], [7]) == []  # the blob's size differs
    assert jn.proven(prev, [0], st[:1], [MODE_FILE], [-1]) == [0]  # no sizes listed


def test_a_failing_journal_stops_recording_and_never_raises(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    f = _files(tmp_path, 1)[0]
    j = jn.Journal.start(marker, jn.Header("c", TREE, False))
    assert j._fd is not None
    os.close(j._fd)  # every write now fails with EBADF
    for i in range(jn.FLUSH_RECORDS + 1):
        j.done(i, _st(f))
    j.close()
    assert jn.read(marker).done == {}  # type: ignore[union-attr]
