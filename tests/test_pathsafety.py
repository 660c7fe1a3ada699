"""Tree safety: pcheckout refuses what git refuses, before writing anything."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pcheckout.errors import GitError, UnsafeTreeError
from pcheckout.git.pathsafety import (
    PROTECT_HFS_DEFAULT,
    PROTECT_NTFS_DEFAULT,
    check_path,
    check_tree,
    listing_looks_safe,
    protections_from_config,
    tree_objects_look_safe,
)
from pcheckout.git.runner import MIN_GIT, Git
from pcheckout.git.tree import Entry, RootedListing, list_rooted, read_trees

FILE = 0o100644
EXEC = 0o100755
LINK = 0o120000
GITLINK = 0o160000

ZWNJ = "\u200c".encode()  # an HFS+-ignorable code point


# ---------------------------------------------------------------------------
# check_path, rule by rule

SAFE_NAMES = [
    b"a",
    b"src/pcheckout/pathsafety.py",
    b"a..b",
    b"...",
    b"a/.../b",
    b".gitfoo",
    b".gitmodules2",
    b".git~2",
    b"git~2",
    b"gitmod~5",
    b"line\nbreak",
    b"tab\there",
    b"non-utf8-\xff\xfe",
    "caf\u00e9/\u00fcber".encode(),
    b"dir.git/x",
    b"x.git",
    b"git",
    ".g\u2060it".encode(),  # U+2060 WORD JOINER is not one HFS+ ignores
    b"a:b",
    b"~",
    b"a~1",
]


@pytest.mark.parametrize("path", SAFE_NAMES)
@pytest.mark.parametrize("mode", [FILE, EXEC, LINK, GITLINK])
def test_safe_names(path: bytes, mode: int) -> None:
    assert check_path(path, mode) is None


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (b"", "is an empty path"),
        (b"/etc/passwd", "is an absolute path"),
        (b"a//b", "has an empty path component"),
        (b"a/", "has an empty path component"),
        (b"a\x00b", "contains a NUL byte"),
        (b".", "has a '.' path component"),
        (b"a/./b", "has a '.' path component"),
        (b"..", "has a '..' path component"),
        (b"../../etc/passwd", "has a '..' path component"),
        (b"a/../../b", "has a '..' path component"),
    ],
)
def test_structural(path: bytes, reason: str) -> None:
    got = check_path(path, FILE, protect_ntfs=False, protect_hfs=False)
    assert got is not None and got.startswith(reason)


@pytest.mark.parametrize(
    "path",
    [b".git", b".git/config", b".GIT/hooks/post-checkout", b".Git", b"sub/.git", b"a/.gIt/x"],
)
def test_dotgit_any_case_always(path: bytes) -> None:
    reason = check_path(path, FILE, protect_ntfs=False, protect_hfs=False)
    assert reason is not None and ".git" in reason


def test_dotgit_message() -> None:
    assert check_path(b".git/config", FILE) == "would write inside .git"
    assert check_path(b"sub/.git", FILE) == "would be written as .git"


@pytest.mark.parametrize(
    "path",
    [
        b"git~1/config",
        b"GIT~1",
        b".git.",
        b".git. /config",
        b".git ",
        b".git...  ..",
        b".git::$INDEX_ALLOCATION/config",
        b".git:stream",
        b".git\\config",  # backslash ends the component on NTFS
        b"sub\\.git\\hooks",
        b"a\\GIT~1",
    ],
)
def test_ntfs_aliases(path: bytes) -> None:
    reason = check_path(path, FILE, protect_ntfs=True, protect_hfs=False)
    assert reason is not None and ".git" in reason
    assert check_path(path, FILE, protect_ntfs=False, protect_hfs=False) is None


def test_backslash_only_matters_for_dotgit() -> None:
    # On Linux git writes "a\b" as one name, even with protectNTFS.
    assert check_path(b"a\\b", FILE) is None
    assert check_path(b"a\\..\\b", FILE) is None


@pytest.mark.parametrize(
    "path",
    [
        b".g" + ZWNJ + b"it",
        ZWNJ + b".git/config",
        b".git" + ZWNJ,
        b".\xe2\x80\xaeG\xef\xbb\xbfIT/x",  # U+202E, U+FEFF, upper case
        b".git\xff",  # git reads malformed UTF-8 as the end of the name
    ],
)
def test_hfs_ignorable(path: bytes) -> None:
    reason = check_path(path, FILE, protect_ntfs=False, protect_hfs=True)
    assert reason is not None and ".git" in reason and "HFS+" in reason
    assert check_path(path, FILE, protect_ntfs=False, protect_hfs=False) is None


def test_hfs_decoder_follows_git_not_python() -> None:
    # U+10FFFF is a character to git, so ".git" does not end there...
    assert check_path(b".git\xf4\x8f\xbf\xbf", FILE, protect_ntfs=False) is None
    # ...but U+FFFE is malformed to git (not to Python), so ".git" ends there.
    assert check_path(b".git\xef\xbf\xbe", FILE, protect_ntfs=False) is not None
    # C0 AE is an overlong '.', malformed to git: never '.'.
    assert check_path(b"\xc0\xaegit", FILE, protect_ntfs=False) is None


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (b".gitmodules", ".gitmodules"),
        (b"sub/.GitModules", ".gitmodules"),
        (b"gitmod~1", ".gitmodules"),
        (b"GITMOD~4", ".gitmodules"),
        (b"gi7eba~1", ".gitmodules"),
        (b"gi7eb~12", ".gitmodules"),
        (b".gitmodules. ", ".gitmodules"),
        (b".gitmodules:$DATA", ".gitmodules"),
        (b"a\\.gitmodules", ".gitmodules"),
        (b".git" + ZWNJ + b"modules", ".gitmodules"),
        (b".gitattributes", ".gitattributes"),
        (b"gitatt~1", ".gitattributes"),
        (b"gi7d29~1", ".gitattributes"),
        (b"d/.gitignore", ".gitignore"),
        (b"gi250a~3", ".gitignore"),
        (b".mailmap", ".mailmap"),
        (b"MAILMA~1", ".mailmap"),
        (b"maba30~2", ".mailmap"),
    ],
)
def test_protected_symlinks(path: bytes, name: str) -> None:
    reason = check_path(path, LINK)
    assert reason is not None and name in reason and "symlink" in reason
    assert check_path(path, FILE) is None


def test_symlink_aliases_need_the_protection() -> None:
    assert check_path(b"gitmod~1", LINK, protect_ntfs=False) is None
    assert check_path(b".git" + ZWNJ + b"modules", LINK, protect_hfs=False) is None
    assert check_path(b".gitmodules", LINK, protect_ntfs=False, protect_hfs=False) is not None


def test_gitmodules_symlink_component_anywhere() -> None:
    # git checks every component of a symlink's path, not only the last one.
    assert check_path(b".gitmodules/x", LINK) is not None
    assert check_path(b".gitignore/x", LINK) is None
    # ...but an NTFS short name only matches at the end (or before ':').
    assert check_path(b"gitmod~1/x", LINK) is None
    assert check_path(b"gitmod~1:/x", LINK) is not None


# ---------------------------------------------------------------------------
# Differential test: the same verdicts as the git on this machine.
# `git update-index --index-info` runs git's verify_path() on every line and
# prints "Ignoring path ..." for the ones it refuses.

ATOMS = [
    b"x", b".", b"..", b"...", b"a..b", b".gitfoo", b".git", b".GIT", b".gIt", b"git~1",
    b"GIT~1", b"git~2", b".git.", b".git ", b".git. .", b".git::$INDEX_ALLOCATION",
    b".git:x", b".gitx", b".git~1", b".g" + ZWNJ + b"it", ZWNJ + b".git", b".git" + ZWNJ,
    b".git\xef\xbb\xbf", b".gi\xe2\x81\xaft", b".gi\xe2\x81\xa0t", b".git\xff",
    b".git\xf5\x80\x80\x80", b".git\xf4\x90\x80\x80", b".git\xf4\x8f\xbf\xbf",
    b".git\xc0\xae", b".git\xed\xa0\x80", b".git\xef\xbf\xbe",
    b".\xe2\x80git", b"\xc0\xaegit", b".gitmodules", b".GITMODULES", b"gitmod~1", b"GITMOD~4",
    b"gitmod~5", b"gi7eba~1", b"gi7eba~12", b"gi7eb~1", b"gi7ebax~1", b"gi7eb~1x",
    b".gitmodules.", b".gitmodules :x", b".gitmodules:", b".git" + ZWNJ + b"modules",
    b".gitmodulesx", b"a\\.git", b"a\\git~1", b"a\\.gitmodules", b"a\\gitmod~1",
    b"gitmod~1\\a", b".git\\a", b"a\\b", b"a\\..\\b", b"\xef\xbb\xbf.GiT", b"\xe2\x80\x8e",
    b".\xe2\x80\xaag\xe2\x80\xabi\xe2\x80\xact\xe2\x80\xad", b"gitmod~1:", b"~", b"a:b",
]  # fmt: skip

# Names git writes as symlinks but pcheckout refuses (git's fsck flags them).
STRICTER_THAN_GIT = (".gitattributes a symlink", ".gitignore a symlink", ".mailmap a symlink")


def _git(repo: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> bytes:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=False
    )
    if check and proc.returncode:
        raise AssertionError(f"git {args} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One scratch repository for the module: every test only adds objects."""
    path = tmp_path_factory.mktemp("pathsafety") / "repo"
    env_free = ["-c", "init.defaultBranch=main"]
    subprocess.run(["git", *env_free, "init", "-q", str(path)], check=True)
    _git(path, "config", "user.name", "t")
    _git(path, "config", "user.email", "t@example.invalid")
    return path


def _git_accepts(repo: Path, paths: list[tuple[bytes, int]], ntfs: bool, hfs: bool) -> set[bytes]:
    oid = _git(repo, "hash-object", "-w", "--stdin", stdin=b"").strip()
    lines = b"".join(b"%o %s\t%s\x00" % (mode, oid, path) for path, mode in paths)
    index = repo / ".git" / f"index-{ntfs}-{hfs}"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    flags = [
        "-c",
        f"core.protectNTFS={str(ntfs).lower()}",
        "-c",
        f"core.protectHFS={str(hfs).lower()}",
    ]
    subprocess.run(
        ["git", "-C", str(repo), *flags, "update-index", "-z", "--index-info"],
        input=lines, capture_output=True, env=env, check=True,
    )  # fmt: skip
    out = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z"], capture_output=True, env=env, check=True
    ).stdout
    return set(out.split(b"\x00")) - {b""}


@pytest.mark.parametrize(
    ("ntfs", "hfs"), [(True, True), (True, False), (False, True), (False, False)]
)
def test_same_verdicts_as_git(repo: Path, ntfs: bool, hfs: bool) -> None:
    cases: list[tuple[bytes, int]] = []
    for atom in ATOMS:
        for mode in (FILE, LINK):
            for shape in (b"%s", b"%s/x", b"%s\\x"):
                # A unique top directory per case keeps index entries from colliding.
                cases.append((b"t%d/" % len(cases) + shape % atom, mode))
    accepted = _git_accepts(repo, cases, ntfs, hfs)
    wrong = []
    for path, mode in cases:
        reason = check_path(path, mode, protect_ntfs=ntfs, protect_hfs=hfs)
        ours = reason is None or any(s in reason for s in STRICTER_THAN_GIT)
        if ours != (path in accepted):
            wrong.append((path, oct(mode), reason))
    assert not wrong


# ---------------------------------------------------------------------------
# check_tree on entries


def test_check_tree_accepts_normal_and_reports_first() -> None:
    check_tree([(b"a", FILE), (b"b/c", FILE), (b"b/d", LINK), (b"e", GITLINK)])
    with pytest.raises(UnsafeTreeError) as info:
        check_tree([(b"ok", FILE), (b".git/config", FILE), (b"../x", FILE)])
    assert str(info.value) == "refusing to check out: '.git/config' would write inside .git"


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([(b"a", FILE), (b"a", FILE)], "'a' is listed twice in the tree"),
        (
            [(b"link", LINK), (b"link/x", FILE)],
            "'link/x' would be written through the symlink 'link'",
        ),
        ([(b"f", FILE), (b"f/g/h", FILE)], "'f/g/h' would be written through the file 'f'"),
        ([(b"s", GITLINK), (b"s/x", FILE)], "'s/x' would be written through the submodule 's'"),
        (
            [(b"d/x", FILE), (b"d", LINK)],
            "'d' is a symlink but also the leading directory of 'd/x'",
        ),
        ([(b"a/b/c", FILE), (b"a/z", FILE), (b"a/b", FILE)], "'a/b' is a file but also the"),
        ([(b"d", 0o040000), (b"d", FILE)], "'d' is a file but also the leading directory of 'd'"),
        ([(b"d", FILE), (b"d", 0o040000)], "'d' is listed as a directory and as a file"),
        ([(b"d", FILE), (b"d/e", 0o040000)], "'d/e' would be written through the file 'd'"),
    ],
)
def test_check_tree_collisions(entries: list[tuple[bytes, int]], message: str) -> None:
    with pytest.raises(UnsafeTreeError) as info:
        check_tree(entries)
    assert str(info.value).startswith("refusing to check out: " + message)


@pytest.mark.parametrize(("ntfs", "hfs"), [(True, True), (False, False)])
def test_fast_path_agrees_with_in_order_walk(ntfs: bool, hfs: bool) -> None:
    # The whole-tree fast path may only say "safe" when the in-order walk
    # (which names the first offender) finds nothing.
    import random

    from pcheckout.git.pathsafety import _refuse_first_offence, _tree_looks_safe

    rng = random.Random(6)
    parts = [b"a", b"b", b"c.d"] * 6 + [
        b"",
        b".",
        b"..",
        b".git",
        b"git~1",
        b"x\\.git",
        b".g" + ZWNJ + b"it",
    ]
    parts += [b"gitmod~1", b".gitmodules", b"c.d", b"~", b"\xe2\x80\x8e", b"\xef", b".x"]
    for _ in range(3000):
        entries = []
        for _ in range(rng.randint(1, 5)):
            path = b"/".join(rng.choice(parts) for _ in range(rng.randint(1, 3)))
            entries.append((path, rng.choice([FILE, LINK, GITLINK])))
        try:
            _refuse_first_offence(entries, ntfs, hfs)
            refused = False
        except UnsafeTreeError:
            refused = True
        assert _tree_looks_safe(entries, ntfs, hfs) is not refused, entries


def test_check_tree_leading_dir_checked_after_cached_parent() -> None:
    # "x/y" is added as a directory while "x/y/1" is seen; "x/y/2" reuses the
    # cached parent; a later file "x" must still be refused.
    with pytest.raises(UnsafeTreeError, match="'x' is a file"):
        check_tree([(b"x/y/1", FILE), (b"x/y/2", FILE), (b"x", FILE)])


def test_check_tree_message_quotes_odd_names() -> None:
    with pytest.raises(UnsafeTreeError) as info:
        check_tree([(b"a\n/.git/x", FILE)])
    assert str(info.value) == 'refusing to check out: "a\\n/.git/x" would write inside .git'
    assert "\n" not in str(info.value)


def test_check_tree_respects_protections() -> None:
    check_tree([(b"git~1/x", FILE)], protect_ntfs=False)
    with pytest.raises(UnsafeTreeError, match="NTFS"):
        check_tree([(b"git~1/x", FILE)])


def test_check_tree_is_fast_path_equivalent() -> None:
    # Entries that only the slow path can refuse are found in a big clean tree.
    entries = [(b"d%d/f%d.txt" % (i // 50, i), FILE) for i in range(5000)]
    check_tree(entries)
    with pytest.raises(UnsafeTreeError, match="d3/.g"):
        check_tree([*entries[:200], (b"d3/.g" + ZWNJ + b"it/hooks/x", FILE), *entries[200:]])


# ---------------------------------------------------------------------------
# Real hostile trees, written with `git hash-object -t tree --literally`


_BLOBS: dict[tuple[Path, bytes], bytes] = {}


def _blob(repo: Path, data: bytes = b"payload\n") -> bytes:
    if (repo, data) not in _BLOBS:
        _BLOBS[repo, data] = _git(repo, "hash-object", "-w", "--stdin", stdin=data).strip()
    return _BLOBS[repo, data]


def _tree(repo: Path, entries: list[tuple[bytes, bytes, bytes]]) -> bytes:
    """A raw tree object, in the order given: (mode, name, hex oid)."""
    raw = b"".join(m + b" " + n + b"\x00" + bytes.fromhex(o.decode()) for m, n, o in entries)
    return _git(
        repo, "hash-object", "-t", "tree", "--literally", "-w", "--stdin", stdin=raw
    ).strip()


def _listing(repo: Path, tree: bytes) -> list[tuple[bytes, int]]:
    commit = _git(repo, "commit-tree", "-m", "hostile", tree.decode()).strip()
    out = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit.decode())
    entries = []
    for record in out.split(b"\x00"):
        if record:
            meta, _, path = record.partition(b"\t")
            entries.append((path, int(meta.split(b" ")[0], 8)))
    return entries


def _nest(repo: Path, path: bytes, leaf: tuple[bytes, bytes]) -> bytes:
    """A tree holding ``leaf`` (mode, oid) at ``path``, components taken verbatim."""
    *dirs, name = path.split(b"/")
    tree = _tree(repo, [(leaf[0], name, leaf[1]), (b"100644", b"zz-innocent", _blob(repo))])
    for directory in reversed(dirs):
        tree = _tree(repo, [(b"40000", directory, tree)])
    src = _tree(repo, [(b"100644", b"main.c", _blob(repo))])
    top = [(b"100644", b"README", _blob(repo)), (b"40000", b"src", src), (b"40000", b"zz", tree)]
    return _tree(repo, top)


HOSTILE = [
    (
        b".git/hooks/post-checkout",
        b"100755",
        "'zz/.git/hooks/post-checkout' would write inside .git",
    ),
    (b".GIT/config", b"100644", "'zz/.GIT/config' would write inside .git ('.GIT' is .git on a"),
    (
        b"git~1/config",
        b"100644",
        "'zz/git~1/config' would write inside .git ('git~1' is .git on NTFS)",
    ),
    (b".git. /config", b"100644", "'zz/.git. /config' would write inside .git"),
    (b".git::$INDEX_ALLOCATION/config", b"100644", "'zz/.git::$INDEX_ALLOCATION/config' would"),
    (b".g" + ZWNJ + b"it/config", b"100644", '"zz/.g\\u200cit/config" would write inside .git'),
    (b"..", b"100644", "'zz/..' has a '..' path component"),
    (b"../escape", b"100644", "'zz/../escape' has a '..' path component"),
    (b".", b"100644", "'zz/.' has a '.' path component"),
    (b".gitmodules", b"120000", "'zz/.gitmodules' would make .gitmodules a symlink"),
    (b"gitmod~1", b"120000", "'zz/gitmod~1' would make .gitmodules a symlink ('gitmod~1' is"),
    (b".gitattributes", b"120000", "'zz/.gitattributes' would make .gitattributes a symlink"),
    (b"a\\.git", b"100644", "'zz/a\\.git' would be written as .git (NTFS treats the backslash"),
]


@pytest.mark.parametrize(
    ("path", "mode", "message"), HOSTILE, ids=[h[0].decode("latin-1") for h in HOSTILE]
)
def test_hostile_tree_refused(repo: Path, path: bytes, mode: bytes, message: str) -> None:
    leaf_oid = _blob(
        repo, b"../../../../tmp/pwned" if mode == b"120000" else b"#!/bin/sh\necho pwned\n"
    )
    entries = _listing(repo, _nest(repo, path, (mode, leaf_oid)))
    with pytest.raises(UnsafeTreeError) as info:
        check_tree(entries)
    assert str(info.value).startswith("refusing to check out: " + message), str(info.value)


def test_hostile_tree_with_slash_in_a_name(repo: Path) -> None:
    # A name containing "/" is listed as if it were nested: the full-path
    # rules still see "..", and an empty name makes git ls-tree itself fail.
    tree = _tree(repo, [(b"100644", b"../../escape", _blob(repo))])
    with pytest.raises(UnsafeTreeError, match="'../../escape' has a '..' path component"):
        check_tree(_listing(repo, tree))
    tree = _tree(repo, [(b"100644", b"/etc/passwd", _blob(repo))])
    with pytest.raises(UnsafeTreeError, match="is an absolute path"):
        check_tree(_listing(repo, tree))


def test_hostile_tree_symlink_then_directory_of_same_name(repo: Path) -> None:
    link = _blob(repo, b"/tmp")
    inner = _tree(repo, [(b"100755", b"evil", _blob(repo))])
    tree = _tree(repo, [(b"120000", b"link", link), (b"40000", b"link", inner)])
    entries = _listing(repo, tree)
    assert entries == [(b"link", LINK), (b"link/evil", EXEC)]
    with pytest.raises(UnsafeTreeError) as info:
        check_tree(entries)
    assert str(info.value) == (
        "refusing to check out: 'link/evil' would be written through the symlink 'link'"
    )


def test_hostile_tree_duplicate_entries(repo: Path) -> None:
    tree = _tree(repo, [(b"100644", b"a", _blob(repo, b"1")), (b"100644", b"a", _blob(repo, b"2"))])
    with pytest.raises(UnsafeTreeError, match="'a' is listed twice"):
        check_tree(_listing(repo, tree))


def test_odd_but_legal_tree_accepted(repo: Path) -> None:
    names = [
        b"line\nbreak", b"tab\tname", b"latin1-\xe9\xff", b".gitfoo", b"a..b", b"...",
        b"back\\slash", b"quote\"s", b" leading space", "\u00fcber".encode(),
    ]  # fmt: skip
    sub = _tree(repo, [(b"100644", n, _blob(repo, n)) for n in sorted(names)])
    top = [(b"40000", b"dir", sub), (b"120000", b"link", _blob(repo, b"dir"))]
    tree = _tree(repo, [*top, (b"100644", b"x", _blob(repo))])
    entries = _listing(repo, tree)
    assert len(entries) == len(names) + 2
    assert (b"dir/line\nbreak", FILE) in entries
    check_tree(entries, protect_ntfs=False)
    # With protectNTFS a backslash only matters before .git: still accepted.
    check_tree(entries, protect_ntfs=True, protect_hfs=True)


def test_our_own_repository_is_safe() -> None:
    root = Path(__file__).resolve().parent.parent
    out = _git(root, "ls-tree", "-r", "-z", "--full-tree", "HEAD")
    entries = [(r.partition(b"\t")[2], int(r.split(b" ")[0], 8)) for r in out.split(b"\x00") if r]
    check_tree(entries)


# ---------------------------------------------------------------------------
# protections_from_config


def test_protections_defaults() -> None:
    assert protections_from_config(lambda key: None) == (PROTECT_NTFS_DEFAULT, PROTECT_HFS_DEFAULT)
    assert PROTECT_NTFS_DEFAULT is True


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True), ("YES", True), ("On", True), ("1", True), ("2", True), ("-1", True),
        ("1k", True), ("0x10", True), ("010", True),
        ("false", False), ("No", False), ("OFF", False), ("0", False), ("", False), ("0x0", False),
        ("000", False), ("0k", False),
    ],
)  # fmt: skip
def test_protections_bool_parsing(value: str, expected: bool) -> None:
    config = {"core.protectntfs": value, "core.protecthfs": value}
    assert protections_from_config(config.get) == (expected, expected)


@pytest.mark.parametrize("value", ["maybe", "08", "0x", "1 ", "2g", "3000000000", "tru"])
def test_protections_bad_value(value: str) -> None:
    with pytest.raises(GitError, match=f"bad boolean config value '{value}' for 'core.protecthfs'"):
        protections_from_config({"core.protecthfs": value}.get)


def test_protections_bool_parsing_matches_git(repo: Path) -> None:
    for value in [
        "true",
        "YES",
        "1",
        "2",
        "-1",
        "1k",
        "0x10",
        "010",
        "false",
        "off",
        "0",
        "",
        "0k",
    ]:
        _git(repo, "config", "core.protectHFS", value)
        shown = _git(repo, "config", "--type=bool", "--get", "core.protecthfs").strip()
        got = protections_from_config({"core.protecthfs": value}.get)[1]
        assert got == (shown == b"true"), value
    for value in ["maybe", "08", "2g"]:
        _git(repo, "config", "core.protectHFS", value)
        assert _git(repo, "config", "--type=bool", "--get", "core.protecthfs", check=False) == b""


# ---------------------------------------------------------------------------
# A switch checks before either writer runs (git's writer: only the paths it
# writes one by one, the whole tree's names for collisions).


#: The engine's switch checking only what changes (as on a tree large enough for it to).
BY_CHANGES = "pcheckout by-changes"


def _switch_refused(repo: Path, tmp_path: Path, head: bytes, target: bytes, writer: str) -> str:
    """Check out ``head`` (a tree of ``repo``) with git, then switch to ``target`` with pcheckout:
    the error's text, after asserting that nothing changed."""
    from pcheckout.checkout import CheckoutOptions, checkout

    commits = [
        _git(repo, "commit-tree", "-m", name, tree.decode()).strip().decode()
        for name, tree in (("head", head), ("target", target))
    ]
    work = tmp_path / "w"
    subprocess.run(["git", "clone", "-q", "--no-checkout", "--shared", str(repo), str(work)],
                   check=True)  # fmt: skip
    _git(work, "checkout", "-q", "-f", commits[0])
    before = sorted(p.relative_to(work) for p in work.rglob("*") if ".git" not in p.parts)
    with pytest.MonkeyPatch.context() as mp, pytest.raises(UnsafeTreeError) as info:
        if writer == BY_CHANGES:  # (the engine's check of what changes, even this small)
            mp.setattr("pcheckout.decide.checkout.WHOLE_CHECK_PER_ENTRY", 1.0)
        engine = writer.partition(" ")[0]
        checkout(CheckoutOptions(directory=work, rev=commits[1], writer=engine))
    assert _git(work, "rev-parse", "HEAD").decode().strip() == commits[0]
    assert _git(work, "status", "--porcelain") == b""
    after = sorted(p.relative_to(work) for p in work.rglob("*") if ".git" not in p.parts)
    assert after == before
    return str(info.value)


def _own_repo(tmp_path: Path) -> Path:
    """A repository of the test's own (the module's has had its config changed by then)."""
    path = tmp_path / "repo"
    subprocess.run(["git", "-c", "init.defaultBranch=main", "init", "-q", str(path)], check=True)
    return path


@pytest.mark.parametrize("writer", ["pcheckout", BY_CHANGES, "git"])
def test_switch_to_a_hostile_path_is_refused(tmp_path: Path, writer: str) -> None:
    repo = _own_repo(tmp_path)
    src = _tree(repo, [(b"100644", b"main.c", _blob(repo))])
    head = _tree(repo, [(b"100644", b"README", _blob(repo)), (b"40000", b"src", src)])
    hook = (b"100755", _blob(repo, b"#!/bin/sh\necho pwned\n"))
    target = _nest(repo, b".git/hooks/post-checkout", hook)
    message = _switch_refused(repo, tmp_path, head, target, writer)
    assert message.startswith("refusing to check out: 'zz/.git/hooks/post-checkout' would write")


@pytest.mark.parametrize("writer", ["pcheckout", BY_CHANGES, "git"])
def test_switch_below_an_unchanged_symlink_is_refused(tmp_path: Path, writer: str) -> None:
    repo = _own_repo(tmp_path)
    # HEAD has the symlink; the target keeps it unchanged and adds a directory of the same
    # name (a duplicate name, which only a hostile tree has): diff-tree lists link/evil as
    # added, and only the whole tree's names show it would be written through the link.
    outside = tmp_path / "outside"
    outside.mkdir()
    link = (b"120000", b"link", _blob(repo, os.fsencode(outside)))
    readme = (b"100644", b"README", _blob(repo))
    inner = _tree(repo, [(b"100755", b"evil", _blob(repo))])
    head = _tree(repo, [readme, link])
    target = _tree(repo, [readme, link, (b"40000", b"link", inner)])
    message = _switch_refused(repo, tmp_path, head, target, writer)
    assert message == (
        "refusing to check out: 'link/evil' would be written through the symlink 'link'"
    )
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("writer", ["pcheckout", BY_CHANGES, "git"])
def test_switch_to_a_duplicate_path_is_refused(tmp_path: Path, writer: str) -> None:
    repo = _own_repo(tmp_path)
    one = (b"100644", b"a", _blob(repo, b"1"))
    head = _tree(repo, [one])
    target = _tree(repo, [one, (b"100644", b"a", _blob(repo, b"2"))])
    message = _switch_refused(repo, tmp_path, head, target, writer)
    assert message == "refusing to check out: 'a' is listed twice in the tree"


# ---------------------------------------------------------------------------
# A fresh checkout's listing beside round 1 is checked on its records
# (listing_looks_safe), unparsed: it must say "look closer" for every tree
# check_tree refuses, and a fresh checkout by either writer refuses them.


def _rooted(repo: Path, tree: bytes) -> RootedListing:
    commit = _git(repo, "commit-tree", "-m", "rooted", tree.decode()).strip().decode()
    return list_rooted(Git(repo, version=(*MIN_GIT, 0)), commit)


def _hostile_trees(repo: Path, hfs: bool = True) -> list[bytes]:
    trees = []
    for path, mode, _ in HOSTILE:
        if not hfs and ZWNJ in path:
            continue
        leaf = _blob(repo, b"../../x" if mode == b"120000" else b"x\n")
        trees.append(_nest(repo, path, (mode, leaf)))
    link, inner = _blob(repo, b"/tmp"), _tree(repo, [(b"100755", b"evil", _blob(repo))])
    trees.append(_tree(repo, [(b"120000", b"link", link), (b"40000", b"link", inner)]))
    trees.append(_tree(repo, [(b"40000", b"link", inner), (b"120000", b"link", link)]))
    one, two = _blob(repo, b"1"), _blob(repo, b"2")
    trees.append(_tree(repo, [(b"100644", b"a", one), (b"100644", b"a", two)]))
    trees.append(_tree(repo, [(b"100644", b"../../escape", one)]))
    trees.append(_tree(repo, [(b"100644", b"/etc/passwd", one)]))
    return trees


def test_the_listing_check_looks_closer_at_every_hostile_tree(tmp_path: Path) -> None:
    repo = _own_repo(tmp_path)
    for tree in _hostile_trees(repo):
        listing = _rooted(repo, tree)
        assert not listing_looks_safe(listing, {"core.protecthfs": "true"}), listing.raw
        assert listing.entries == [Entry(p, m, o, -1) for p, m, o in _listing_ids(repo, tree)]


def test_the_listing_check_passes_odd_but_legal_trees(tmp_path: Path) -> None:
    repo = _own_repo(tmp_path)
    names = [b"line\nbreak", b"tab\tname", b"latin1-\xe9\xff", b".gitfoo", b"a..b", b"..."]
    sub = _tree(repo, [(b"100644", n, _blob(repo, n)) for n in sorted(names)])
    gitlink = b"1" * 40
    top = [(b"40000", b"dir", sub), (b"120000", b"link", _blob(repo, b"dir"))]
    tree = _tree(repo, [*top, (b"160000", b"sub", gitlink), (b"100644", b"x", _blob(repo))])
    listing = _rooted(repo, tree)
    assert listing_looks_safe(listing, {"core.protecthfs": "true"})
    assert len(listing) == len(names) + 3
    assert listing.paths()[:2] == [b"dir", b"dir/" + sorted(names)[0]]
    assert listing.tree_id("sha1") == tree.decode()
    assert listing.has_file(b"x") and not listing.has_file(b"dir")
    check_tree([(e.path, e.mode) for e in listing])


def _objects(repo: Path, tree: bytes) -> list[bytes]:
    """``tree`` and every subtree of it, as git stores them."""
    out = _git(repo, "ls-tree", "-r", "-t", "-z", tree.decode())
    subtrees = [r.split(b"\t")[0].split(b" ")[2] for r in out.split(b"\0") if b" tree " in r]
    return list(
        read_trees(Git(repo, version=(*MIN_GIT, 0)), [t.decode() for t in [tree, *subtrees]])
    )


def test_the_changed_trees_check_finds_a_name_twice_or_a_name_with_a_slash(
    tmp_path: Path,
) -> None:
    # (a switch by git's writer reads the trees it changes; the names' own rules are the
    # written paths' check: entries_look_safe)
    repo = _own_repo(tmp_path)
    link, one, two = _blob(repo, b"/tmp"), _blob(repo, b"1"), _blob(repo, b"2")
    inner = _tree(repo, [(b"100755", b"evil", _blob(repo))])
    hostile = [
        [(b"120000", b"link", link), (b"40000", b"link", inner)],
        [(b"40000", b"link", inner), (b"120000", b"link", link)],
        [(b"100644", b"a", one), (b"100644", b"a", two)],
        [(b"100644", b"../../escape", one)],
        [(b"100644", b"/etc/passwd", one)],
    ]
    for records in hostile:
        tree = _tree(repo, records)
        assert not tree_objects_look_safe(_objects(repo, tree), 20), records
        nested = _tree(repo, [(b"40000", b"d", tree), (b"100644", b"x", one)])
        assert not tree_objects_look_safe(_objects(repo, nested), 20), records
    names = [b"line\nbreak", b"tab\tname", b"latin1-\xe9\xff", b".gitfoo", b"a..b", b"..."]
    sub = _tree(repo, [(b"100644", n, _blob(repo, n)) for n in sorted(names)])
    top = [(b"40000", b"dir", sub), (b"120000", b"link", _blob(repo, b"dir"))]
    legal = _tree(repo, [*top, (b"160000", b"sub", b"1" * 40), (b"100644", b"x", one)])
    raw = _objects(repo, legal)
    assert tree_objects_look_safe(raw, 20) and tree_objects_look_safe([b""], 20)
    # every byte accounted for: a record cut short, or bytes after the last, look closer
    assert not tree_objects_look_safe([raw[0][:-1]], 20)
    assert not tree_objects_look_safe([raw[0] + b"x"], 20)
    # ids of 32 bytes (sha256), whatever bytes they hold
    record = b"100644 f\0" + bytes(range(32))
    assert tree_objects_look_safe([record + record.replace(b" f", b" g")], 32)
    assert not tree_objects_look_safe([record + record], 32)


def _listing_ids(repo: Path, tree: bytes) -> list[tuple[bytes, int, str]]:
    commit = _git(repo, "commit-tree", "-m", "hostile", tree.decode()).strip()
    out = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit.decode())
    rows = []
    for record in out.split(b"\x00")[:-1]:
        meta, _, path = record.partition(b"\t")
        mode, _, oid = meta.split(b" ")
        rows.append((path, int(mode, 8), oid.decode()))
    return rows


@pytest.mark.parametrize("writer", ["pcheckout", "git"])
def test_a_fresh_checkout_of_a_hostile_tree_writes_nothing(tmp_path: Path, writer: str) -> None:
    from pcheckout.checkout import CheckoutOptions, checkout

    repo = _own_repo(tmp_path)
    for k, tree in enumerate(_hostile_trees(repo, hfs=PROTECT_HFS_DEFAULT)):
        commit = _git(repo, "commit-tree", "-m", "hostile", tree.decode()).strip().decode()
        work = tmp_path / f"w{k}"
        clone = ["git", "clone", "-q", "--no-checkout", "--shared", str(repo), str(work)]
        subprocess.run(clone, check=True, capture_output=True)
        with pytest.raises(UnsafeTreeError, match="^refusing to check out: "):
            checkout(CheckoutOptions(directory=work, rev=commit, writer=writer))
        assert sorted(os.listdir(work)) == [".git"]
        assert not (work / ".git" / "index").exists()
