from __future__ import annotations

import os
from pathlib import Path

import pytest

from pcheckout.errors import DetectError
from pcheckout.fs import mountinfo as mi

FIXTURES = Path(__file__).parent / "fixtures" / "mountinfo"


def test_documented_example_line() -> None:
    e = mi.parse_line(
        "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
    )
    assert (e.mount_id, e.parent_id, e.major, e.minor) == (36, 35, 98, 0)
    assert e.root == "/mnt1" and e.mount_point == "/mnt2"
    assert e.mount_options == {"rw": None, "noatime": None}
    assert e.optional_fields == ("master:1",)
    assert e.fstype == "ext3" and e.source == "/dev/root"
    assert e.super_options == {"rw": None, "errors": "continue"}
    assert e.is_bind


def test_octal_escapes_are_decoded() -> None:
    assert mi.unescape(r"/media/My\040Book") == "/media/My Book"
    assert mi.unescape(r"/a\011b\012c\134d") == "/a\tb\nc\\d"
    # bytes that are not UTF-8 survive a round trip through os.fsencode
    assert os.fsencode(mi.unescape(r"/x\377")) == b"/x\xff"


def test_no_optional_fields_and_empty_source() -> None:
    e = mi.parse_line("82 28 0:92 / /mnt/x rw,relatime - tmpfs  rw,size=1024k")
    assert e.optional_fields == ()
    assert e.source == ""
    assert e.fstype == "tmpfs"
    assert e.super_options == {"rw": None, "size": "1024k"}


def test_separator_inside_mount_point_and_many_optional_fields() -> None:
    table = mi.read(FIXTURES / "spaces.txt")
    e = table.by_id(82)
    assert e is not None
    assert e.mount_point == "/mnt/with - dash"
    assert e.optional_fields == ("master:7", "propagate_from:2", "unbindable")
    assert e.source == ""
    book = table.by_id(80)
    assert book is not None and book.mount_point == "/media/alice/My Book"
    odd = table.by_id(81)
    assert odd is not None and odd.mount_point == "/mnt/tab\tand\\backslash"
    share = table.by_id(83)
    assert share is not None and share.source == "//srv/a share"


def test_subtype() -> None:
    e = mi.parse_line("105 28 0:84 / /r rw - fuse.sshfs a@b:/c rw,user_id=1000")
    assert e.base_type == "fuse" and e.subtype == "sshfs"
    assert mi.parse_line("1 0 0:1 / / rw - ext4 /dev/sda1 rw").subtype is None


@pytest.mark.parametrize(
    "line",
    [
        "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 ext3 /dev/root rw",  # no separator
        "36 35 98:0 /mnt1 - ext3 /dev/root rw",  # too few fields before it
        "x 35 98:0 / /m rw - ext3 /dev/root rw",  # bad id
        "36 35 98 / /m rw - ext3 /dev/root rw",  # bad major:minor
        "36 35 98:0 / /m rw -",  # nothing after it
    ],
)
def test_malformed_lines_raise(line: str) -> None:
    with pytest.raises(mi.MountinfoError) as info:
        mi.parse_line(line, 7)
    assert isinstance(info.value, DetectError)
    assert "line 7" in str(info.value)


def test_options_keep_values_with_equals_and_colons() -> None:
    opts = mi.parse_options("rw,lowerdir=/a:/b,upperdir=/u,x=a=b")
    assert opts == {"rw": None, "lowerdir": "/a:/b", "upperdir": "/u", "x": "a=b"}


def test_merged_options_prefer_superblock() -> None:
    e = mi.parse_line("1 0 0:1 / / ro,relatime - ext4 /dev/sda1 rw,errors=remount-ro")
    assert e.options == {"ro": None, "relatime": None, "rw": None, "errors": "remount-ro"}


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("*.txt")))
def test_every_fixture_parses(fixture: str) -> None:
    table = mi.read(FIXTURES / fixture)
    assert len(table) >= 3
    ids = [e.mount_id for e in table]
    assert len(ids) == len(set(ids))


def test_longest_prefix_and_component_boundaries() -> None:
    table = mi.read(FIXTURES / "nfs3.txt")
    e = table.find_by_prefix("/mnt/build/src/x.c")
    assert e is not None and e.mount_point == "/mnt/build"
    # "/mnt/buildings" is not inside "/mnt/build"
    e = table.find_by_prefix("/mnt/buildings")
    assert e is not None and e.mount_point == "/"
    e = table.find_by_prefix("/dev/shm")
    assert e is not None and e.fstype == "tmpfs"


def test_over_mount_resolves_to_topmost() -> None:
    table = mi.read(FIXTURES / "bind_overmount.txt")
    e = table.find_by_prefix("/mnt/stack/file")
    assert e is not None and e.mount_id == 61 and e.fstype == "tmpfs"
    assert [x.mount_id for x in table.at("/mnt/stack")] == [60, 61]


def test_topmost_follows_parent_ids_not_line_order() -> None:
    stacked = mi.parse("4 1 0:8 / /m rw - tmpfs under rw\n5 4 0:9 / /m rw - tmpfs over rw\n")
    # handed over in reverse order, the mount stacked on the other (parent 4) still wins
    assert stacked.topmost(reversed(stacked.at("/m"))).mount_id == 5


def test_bind_mount_of_subdirectory() -> None:
    table = mi.read(FIXTURES / "bind_overmount.txt")
    e = table.find_by_prefix("/srv/alpha/README")
    assert e is not None and e.mount_id == 51
    assert e.is_bind and e.root == "/projects/alpha"


def test_read_missing_file_is_a_detect_error(tmp_path: Path) -> None:
    with pytest.raises(mi.MountinfoError, match="cannot read mount table"):
        mi.read(tmp_path / "nope")


@pytest.mark.skipif(not os.path.exists(mi.PROC_SELF_MOUNTINFO), reason="no /proc/self/mountinfo")
def test_this_machines_table_parses() -> None:
    table = mi.read()
    root = table.find_by_prefix("/")
    assert root is not None and root.mount_point == "/"
    assert all(e.mount_point.startswith("/") for e in table)
