"""The switch's two-way merge on its own: pure functions, no repository."""

from __future__ import annotations

from pcheckout.decide.merge import Cone, apply_local_changes, cone_moves, everywhere, two_way_merge
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


def _reference(
    index: dict[bytes, IndexEntry],
    head: dict[bytes, Entry],
    target: dict[bytes, Entry],
    force: bool,
) -> tuple[dict[bytes, IndexEntry], set[bytes], set[bytes]]:
    """git's two-way merge rules written out plainly, path by path (unpack-trees.c
    twoway_merge; the module docstring)."""

    def same(a: IndexEntry | Entry | None, b: Entry | None) -> bool:
        if a is None or b is None:
            return a is b
        oid = a.oid.hex() if isinstance(a.oid, bytes) else a.oid
        return (a.mode, oid) == (b.mode, b.oid)

    keep, change, refused = {}, set(), set()
    for path in index.keys() | target.keys():
        i, h, m = index.get(path), head.get(path), target.get(path)
        if i is not None and m is not None and same(i, m):
            keep[path] = i
        elif not force and not same(i, h):
            if not same(m, h):
                refused.add(path)
            elif i is not None:
                keep[path] = i
        else:
            change.add(path)
    return keep, change, refused


def test_every_combination_of_index_head_and_target_classifies_as_git_does() -> None:
    # Each path gets one of: absent, A, B, or A with the executable bit, in I, H and M.
    sides = [None, (A, MODE_FILE), (B, MODE_FILE), (A, MODE_EXEC)]
    index, head, target = {}, {}, {}
    n = 0
    for si in sides:
        for sh in sides:
            for sm in sides:
                if si is sh is sm is None:
                    continue
                path = b"p%02d" % n
                n += 1
                if si is not None:
                    index[path] = _i(path, si[0], si[1])
                if sh is not None:
                    head[path] = _e(path, sh[0], sh[1])
                if sm is not None:
                    target[path] = _e(path, sm[0], sm[1])
    for force in (False, True):
        merge = two_way_merge(index, head, target, force=force)
        keep, change, refused = _reference(index, head, target, force)
        assert merge.keep == keep
        assert sorted(merge.change) == sorted(change) and len(merge.change) == len(change)
        assert merge.refused == sorted(refused)
        assert keep and change and (force or refused)  # (each kind occurs)


def test_kept_entries_come_in_the_index_order() -> None:
    paths = [b"a", b"b/c", b"b/d", b"e", b"f"]
    i, h, m = _tables([_i(p, A) for p in paths], [_e(p, A) for p in paths], [])
    m = {p: _e(p, B if p == b"b/d" else A) for p in reversed(paths)}  # (the target's order)
    merge = two_way_merge(i, h, m, force=False)
    assert list(merge.keep) == [b"a", b"b/c", b"e", b"f"] and merge.change == [b"b/d"]


def test_a_checkout_that_is_not_sparse_moves_nothing_across_the_cone() -> None:
    keep = {b"a": _i(b"a", A), b"b": _i(b"b", A)}
    assert cone_moves(keep, Cone(set(), everywhere)) == ([], [])
    # the same answer as the rule spelled out for any cone
    assert cone_moves(keep, Cone(set(), lambda _p, _m: True)) == ([], [])
    skipped = Cone({b"b"}, lambda p, _m: p == b"b")
    assert cone_moves(keep, skipped) == ([b"b"], [b"a"])
