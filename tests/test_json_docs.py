"""docs/json.md documents every key each command's --json prints, and no key it does not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import clone_no_checkout, make_repo, run_cli

DOC = Path(__file__).resolve().parent.parent / "docs" / "json.md"


def documented() -> dict[str, set[str]]:
    """Each ``## `` section's heading -> the top-level keys of its tables' first column."""
    out: dict[str, set[str]] = {}
    for section in DOC.read_text(encoding="utf-8").split("\n## ")[1:]:
        title, _, body = section.partition("\n")
        keys = re.findall(r"^\| `([a-z_]+)` \|", body, flags=re.MULTILINE)
        out[title.strip()] = set(keys)
    return out


def _section(start: str) -> set[str]:
    (keys,) = [v for k, v in documented().items() if k.startswith(start)]
    assert keys, start
    return keys


def _json(*argv: str, code: int = 0) -> dict[str, object]:
    proc = run_cli(*argv)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.startswith("{\n  "), "pretty-printed, as every command's"
    data: dict[str, object] = json.loads(proc.stdout)
    return data


def test_every_section_is_checked() -> None:
    assert len(documented()) == 8


def test_detect_checkout_export_clone(tmp_path: Path) -> None:
    src = make_repo(tmp_path, {b"a": b"1", b"d/b": b"22"})
    assert set(_json("detect", "--json", str(tmp_path))) == _section("`pcheckout detect")
    w = clone_no_checkout(src, tmp_path / "w")
    keys = _section("`pcheckout checkout --json`")
    assert set(_json("checkout", "-C", str(w), "--json", "--dry-run")) == keys
    assert set(_json("checkout", "-C", str(w), "--json")) == keys
    out = tmp_path / "out"
    assert set(_json("export", "-C", str(src), "HEAD", str(out), "--json")) == keys
    clone = _json("clone", "--json", str(src), str(tmp_path / "c"))
    assert set(clone) == _section("`pcheckout clone")
    assert isinstance(clone["checkout"], dict) and set(clone["checkout"]) == keys


def test_tune_and_its_git_config(tmp_path: Path) -> None:
    d = tmp_path / "m"
    d.mkdir()
    small = ("--max-workers", "1", "--files", "20", "--rounds", "1", "--no-writers")
    assert set(_json("tune", str(d), "--json", *small)) == _section("`pcheckout tune --json")
    forget = _json("tune", str(d), "--forget", "--json")
    assert set(forget) == _section("`pcheckout tune --forget")
    base = ("tune", str(d), "--git-config", "--no-measure", "--json")
    dry = _json(*base, "--dry-run")
    assert set(dry) == _section("`pcheckout tune --git-config --json")
    assert (dry["needed"], dry["changed"], dry["dry_run"]) == (True, False, True)
    written = _json(*base)
    assert (written["needed"], written["changed"]) == (True, True)
    again = _json(*base)
    assert (again["needed"], again["changed"]) == (False, False)
    removal = _section("`pcheckout tune --git-config --remove")
    would = _json("tune", str(d), "--git-config", "--remove", "--dry-run", "--json")
    assert set(would) == removal and len(would["removed"]) == 2  # type: ignore[arg-type]
    gone = _json("tune", str(d), "--git-config", "--remove", "--json")
    assert gone["removed"] == would["removed"] and gone["dry_run"] is False


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["checkout", "-C", "{tmp}", "--json"], 128), (["detect", "--json", "--bogus"], 2)],
)
def test_errors(tmp_path: Path, argv: list[str], code: int) -> None:
    words = [a.format(tmp=tmp_path) for a in argv]
    assert set(_json(*words, code=code)) == _section("Errors")
