"""The switch's two-way merge on its own: pure functions, no repository."""

from __future__ import annotations

from pcheckout.decide.merge import apply_local_changes, two_way_merge
from pcheckout.git.index import IndexEntry
from pcheckout.git.tree import MODE_EXEC, MODE_FILE, Entry

A, B, C = "a" * 40, "b" * 40, "c" * 40


def _i(path: bytes, oid: str, mode: int = MODE_FILE) -> IndexEntry:
    return IndexEntry(path, mode, bytes.fromhex(oid), 0, 0, 0, 0, 0, 0, 0, 0, 0)


def _e(path: bytes, oid: str, mode: int = MODE_FILE) -> Entry:
    return Entry(path, mode, oid, -1)


def _tables(
    index: list[IndexEntry], head: list[Entry], target: list[Entry]
) -> tuple[dict[bytes, IndexEntry], dict[bytes, Entry], dict[bytes, Entry]]:
    return {e.path: e for e in index}, {e.path: e for e in head}, {e.path: e for e in target}


def test_unchanged_path_keeps_its_index_entry() -> None:
    i, h, m = _tables([_i(b"x", A)], [_e(b"x", A)], [_e(b"x", A)])
    merge = two_way_merge(i, h, m, force=False)
    assert merge.keep == {b"x": i[b"x"]} and merge.change == [] and merge.refused == []


def test_clean_path_moves_to_the_target() -> None:
    i, h, m = _tables([_i(b"x", A)], [_e(b"x", A)], [_e(b"x", B)])
    merge = two_way_merge(i, h, m, force=False)
    assert merge.change == [b"x"]
    plan = apply_local_changes(merge, i, m, set(), force=False)
    assert (plan.write, plan.delete, plan.refused) == ([b"x"], [b"x"], [])


def test_mode_change_alone_is_a_change() -> None:
    i, h, m = _tables([_i(b"x", A)], [_e(b"x", A)], [_e(b"x", A, MODE_EXEC)])
    assert two_way_merge(i, h, m, force=False).change == [b"x"]


def test_added_and_removed_paths() -> None:
    i, h, m = _tables([_i(b"gone", A)], [_e(b"gone", A)], [_e(b"new", B)])
    plan = apply_local_changes(two_way_merge(i, h, m, force=False), i, m, set(), force=False)
    assert (plan.write, plan.delete) == ([b"new"], [b"gone"])


def test_staged_change_is_carried_when_the_target_keeps_heads_version() -> None:
    i, h, m = _tables([_i(b"x", C)], [_e(b"x", A)], [_e(b"x", A)])
    merge = two_way_merge(i, h, m, force=False)
    assert merge.keep == {b"x": i[b"x"]} and merge.refused == []


def test_staged_addition_is_carried_when_the_target_lacks_the_path() -> None:
    i, h, m = _tables([_i(b"x", C)], [], [])
    assert two_way_merge(i, h, m, force=False).keep == {b"x": i[b"x"]}


def test_staged_change_the_target_would_overwrite_is_refused() -> None:
    i, h, m = _tables([_i(b"x", C)], [_e(b"x", A)], [_e(b"x", B)])
    assert two_way_merge(i, h, m, force=False).refused == [b"x"]


def test_force_moves_staged_changes_to_the_target() -> None:
    i, h, m = _tables([_i(b"x", C)], [_e(b"x", A)], [_e(b"x", B)])
    merge = two_way_merge(i, h, m, force=True)
    assert merge.change == [b"x"] and merge.refused == []


def test_local_change_on_a_changed_path_is_refused() -> None:
    i, h, m = _tables([_i(b"x", A)], [_e(b"x", A)], [_e(b"x", B)])
    plan = apply_local_changes(two_way_merge(i, h, m, force=False), i, m, {b"x"}, force=False)
    assert plan.refused == [b"x"] and plan.write == []


def test_local_change_on_a_kept_path_stays_unless_forced() -> None:
    i, h, m = _tables([_i(b"x", A)], [_e(b"x", A)], [_e(b"x", A)])
    merge = two_way_merge(i, h, m, force=False)
    assert apply_local_changes(merge, i, m, {b"x"}, force=False).keep == {b"x": i[b"x"]}
    forced = apply_local_changes(two_way_merge(i, h, m, force=True), i, m, {b"x"}, force=True)
    assert forced.keep == {} and (forced.write, forced.delete) == ([b"x"], [b"x"])
