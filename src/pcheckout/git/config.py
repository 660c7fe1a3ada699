"""git configuration: read once, parsed as git parses it."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pcheckout.errors import GitError, decode
from pcheckout.git.round1 import CONFIG
from pcheckout.git.runner import Git


def read_config(git: Git) -> dict[str, str]:
    """All config as ``{lower-cased key: last value}`` (``git config -z --list``)."""
    proc = git.run(*CONFIG, ok_codes=(0, 1))
    config: dict[str, str] = {}
    for item in proc.stdout.split(b"\0"):
        if not item:
            continue
        key, sep, value = item.partition(b"\n")
        if not sep:
            value = b"true"  # a valueless key ("[core] bare") is boolean true in git
        name = decode(key)
        # section and variable names are case-insensitive; subsections are not
        first, _, rest = name.partition(".")
        sub, _, var = rest.rpartition(".")
        norm = f"{first.lower()}.{sub}.{var.lower()}" if sub else f"{first.lower()}.{var.lower()}"
        config[norm] = decode(value)
    return config


# Largest value git_parse_int() accepts (C int on every platform git supports).
_GIT_INT_MAX = 2**31 - 1
# git's get_unit_factor(): suffixes accepted after an integer config value.
_GIT_UNIT_FACTORS = {b"": 1, b"k": 1024, b"m": 1024**2, b"g": 1024**3}
_GIT_INT_RE = re.compile(rb"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)([kKmMgG]?)")


def parse_bool(key: str, value: str) -> bool:
    """git_config_bool(): text booleans (the empty string is false), else an int
    (base 0, k/m/g suffix); anything else is the error git itself dies with.
    A key written without ``=`` is true: ``read_config`` stores it as "true"."""
    lowered = value.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off", ""):
        return False
    number = _parse_int(value)
    if number is None:
        raise GitError(f"bad boolean config value '{value}' for '{key}'")
    return number != 0


def parse_int(key: str, value: str) -> int:
    """git_config_int(): an int (base 0, k/m/g suffix), else the error git dies with
    (config.c ``die_bad_number``)."""
    number = _parse_int(value)
    if number is None:
        raise GitError(f"bad numeric config value '{value}' for '{key}': invalid unit")
    return number


def _parse_int(value: str) -> int | None:
    """git_parse_signed() for a C int, None where git refuses the value."""
    match = _GIT_INT_RE.fullmatch(value.encode("utf-8", "surrogateescape"))
    if match is None:
        return None
    sign, digits, unit = match.groups()
    if digits[:2] in (b"0x", b"0X"):
        number = int(digits[2:], 16)
    else:
        number = int(digits, 8 if digits.startswith(b"0") else 10)
    number *= _GIT_UNIT_FACTORS[unit.lower()]
    if number > _GIT_INT_MAX + (sign == b"-"):
        return None
    return -number if sign == b"-" else number


def config_bool(value: str | None, default: bool) -> bool:
    """``parse_bool`` for settings where an unusable value means the default."""
    if value is None:
        return default
    try:
        return parse_bool("", value)
    except GitError:
        return default


def autocrlf(config: Mapping[str, str]) -> str:
    """``core.autocrlf`` as git reads it (config.c): "input", "true" or "false"."""
    value = config.get("core.autocrlf")
    if value is None:
        return "false"
    if value.lower() == "input":
        return "input"
    return "true" if parse_bool("core.autocrlf", value) else "false"


def runs_git_lfs(config: Mapping[str, str]) -> bool:
    """Whether git's filter for ``lfs`` is git-lfs, however it is called (its ``process``
    when set, else its ``smudge``): git-lfs installs its hooks when git starts it."""
    process = config.get("filter.lfs.process")
    command = process if process is not None else config.get("filter.lfs.smudge") or ""
    return re.search(r"\bgit[- ]lfs\b", command) is not None
