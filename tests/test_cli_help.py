"""Help that answers: every command's --help complete, the manual pages current and rendering,
the completion scripts parsing in their shells and completing what git completes."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import git, make_repo, run_cli

from pcheckout.cli import completion, manpage
from pcheckout.cli import parser as grammar

REPO = Path(__file__).resolve().parent.parent
MAN = REPO / "man" / "man1"


def _parsers() -> dict[str, argparse.ArgumentParser]:
    p = grammar.parser()
    return {"pcheckout": p, **grammar.subparsers(p)}


@pytest.mark.parametrize("name", list(_parsers()))
def test_help_is_complete(name: str) -> None:
    p = _parsers()[name]
    words = [] if name == "pcheckout" else [name]
    proc = run_cli(*words, "--help", env={"COLUMNS": "100"})
    assert proc.returncode == 0 and proc.stderr == ""
    text = proc.stdout
    assert p.description and p.description.split(".")[0][:40] in " ".join(text.split())
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        assert action.help, f"{name}: {action.option_strings or action.dest} has no help"
        for flag in action.option_strings:
            assert flag in text
    assert "\nexamples:\n  " in text and "\n      " in text.split("\nexamples:\n", 1)[1]
    assert "\nexit status:\n  0 " in text and "\n  2 " in text


@pytest.mark.parametrize("columns", ["50", "133", "", "wide", "-3", None])
def test_help_is_as_wide_as_argparse_makes_it(
    monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    """The formatter finds the width itself (argparse's would import shutil for it)."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    ours, theirs = grammar.Formatter("prog"), argparse.HelpFormatter("prog")
    assert ours._width == theirs._width
    assert grammar.Formatter("prog", width=40)._width == 40


def test_manual_pages_are_current() -> None:
    """The committed pages are what the parsers make now (scripts/gen_man.py writes them)."""
    made = manpage.pages()
    assert sorted(p.name for p in MAN.glob("*.1")) == sorted(made)
    for name, text in made.items():
        assert (MAN / name).read_text(encoding="utf-8") == text, f"run scripts/gen_man.py: {name}"


@pytest.mark.skipif(shutil.which("man") is None, reason="man (man-db) is not installed")
@pytest.mark.parametrize("page", sorted(manpage.pages()))
def test_manual_pages_render(page: str) -> None:
    env = {**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": "0"}
    proc = subprocess.run(
        ["man", "--warnings", "-l", str(MAN / page)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    text = re.sub(".\b", "", proc.stdout)  # no overstrike (bold, underline) on a pipe
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXAMPLES", "EXIT STATUS"):
        assert f"\n{section}\n" in text, section
    name = page.removesuffix(".1")
    sub = _parsers().get(name.removeprefix("pcheckout-"), _parsers()["pcheckout"])
    for action in sub._actions:
        for flag in action.option_strings:
            assert flag in text, (page, flag)


@pytest.mark.skipif(shutil.which("man") is None, reason="man (man-db) is not installed")
def test_man_finds_the_pages_beside_bin_on_path(tmp_path: Path) -> None:
    """How an install is found: <prefix>/share/man beside a <prefix>/bin on PATH."""
    (tmp_path / "bin").mkdir()
    shutil.copytree(MAN, tmp_path / "share" / "man" / "man1")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    env.pop("MANPATH", None)
    for page in ("pcheckout", "pcheckout-checkout", "git-pcheckout"):
        proc = subprocess.run(["man", "-w", page], capture_output=True, text=True, env=env)
        assert proc.stdout.strip() == str(tmp_path / "share/man/man1" / f"{page}.1")


# --- completion ---------------------------------------------------------------------------------


def _script(tmp_path: Path, shell: str) -> Path:
    proc = run_cli("completion", shell)
    assert proc.returncode == 0 and proc.stderr == ""
    path = tmp_path / f"pcheckout.{shell}"
    path.write_text(proc.stdout)
    return path


@pytest.mark.parametrize("shell", grammar.SHELLS)
def test_completion_scripts_parse(tmp_path: Path, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    path = _script(tmp_path, shell)
    proc = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_completion_covers_every_option() -> None:
    _, cmds = completion.spec()
    for shell in grammar.SHELLS:
        text = completion.script(shell)
        for c in cmds:
            assert c.name in text
            for o in c.options:
                for flag in o.flags:
                    assert flag.lstrip("-") in text, (shell, c.name, flag)


def _repo(tmp_path: Path) -> Path:
    src = make_repo(tmp_path, {b"f": b"x"})
    git(src, "branch", "feature")
    git(src, "tag", "v1")
    return src


BASH_DRIVER = """
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
_pcheckout
printf '%s\\n' "${COMPREPLY[@]}"
"""


def _bash(script: Path, *words: str, cwd: Path) -> list[str]:
    proc = subprocess.run(
        ["bash", "-c", BASH_DRIVER, "bash", str(script), *words],
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stderr
    return sorted(proc.stdout.split())


def test_bash_completes_commands_options_revisions_and_paths(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    src = _repo(tmp_path)
    script = _script(tmp_path, "bash")
    assert _bash(script, "pcheckout", "ch", cwd=tmp_path) == ["checkout"]
    assert _bash(script, "pcheckout", "checkout", "--dr", cwd=tmp_path) == ["--dry-run"]
    assert _bash(script, "pcheckout", "checkout", "--writer", "", cwd=tmp_path) == [
        "auto",
        "git",
        "pcheckout",
    ]
    refs = _bash(script, "pcheckout", "-C", str(src), "checkout", "", cwd=tmp_path)
    assert refs == ["HEAD", "feature", "main", "v1"]
    assert _bash(script, "pcheckout", "checkout", "-C", "src", "fe", cwd=tmp_path) == ["feature"]
    assert _bash(script, "pcheckout", "export", "v1", "s", cwd=tmp_path) == ["src"]
    assert _bash(script, "pcheckout", "completion", "z", cwd=tmp_path) == ["zsh"]


def test_fish_completes_commands_options_and_revisions(tmp_path: Path) -> None:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    src = _repo(tmp_path)
    script = _script(tmp_path, "fish")

    def complete(line: str) -> list[str]:
        proc = subprocess.run(
            ["fish", "--no-config", "-c", f"source {script}; complete -C {line!r}"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr
        return sorted(w.split("\t")[0] for w in proc.stdout.splitlines())

    assert complete("pcheckout ch") == ["checkout"]
    assert complete("pcheckout checkout --writer=") == [
        "--writer=auto",
        "--writer=git",
        "--writer=pcheckout",
    ]
    assert complete(f"pcheckout -C {src} checkout ") == ["HEAD", "feature", "main", "v1"]
    assert complete("git-pcheckout tu") == ["tune"]


ZSH_DRIVER = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1='> '; autoload -Uz compinit; compinit -u -D; source ${(q)1}; cd ${(q)2}"
zpty -w -n z "pcheckout checkout -C ${(q)2} "$'\t'
local all="" chunk
for i in {1..100}; do
    while zpty -r -t z chunk; do all+=$chunk; done
    [[ $all == *feature* ]] && break
    sleep 0.1
done
print -r -- "$all"
zpty -d z
"""


def test_zsh_completes_revisions(tmp_path: Path) -> None:
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    src = _repo(tmp_path)
    script = _script(tmp_path, "zsh")
    proc = subprocess.run(
        ["zsh", "-f", "-c", ZSH_DRIVER, "zsh", str(script), str(src)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "feature" in proc.stdout and "main" in proc.stdout and "v1" in proc.stdout


def test_completion_is_the_parsers(capsys: pytest.CaptureFixture[str]) -> None:
    from pcheckout.cli.main import main

    assert main(["completion", "bash"]) == 0
    assert capsys.readouterr().out == completion.script("bash")
    assert main(["completion", "tcsh"]) == 2
    assert "invalid choice: 'tcsh'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["checkout", "-n", "--json", "-j", "4", "--writer", "git", "v2"],
        ["-C", "x", "-q", "checkout", "-f", "--no-hooks", "--", "-odd-rev"],
        ["export", "-C", "r", "HEAD", "dest", "--worktree-attributes"],
        ["detect", "--json", "."],
        ["tune", "--help-me"],
        ["completion", "bash"],
    ],
)
def test_one_commands_parser_parses_its_line_as_the_whole_one(argv: list[str]) -> None:
    """``parser(only=COMMAND)`` declares only that command's options: its line parses to
    what the whole parser makes of it (and the other commands are still named)."""
    command = argv[argv.index("-q") + 1] if "-q" in argv else argv[0]
    whole, one = grammar.parser(), grammar.parser(only=command)
    assert whole.parse_known_args(argv) == one.parse_known_args(argv)
    assert list(grammar.subparsers(whole)) == list(grammar.subparsers(one))
    assert whole.format_help() == one.format_help()
