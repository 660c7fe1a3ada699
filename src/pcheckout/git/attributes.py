"""Do the contents need git's checkout conversion, or are blobs written as is?

Conversion (eol/text/crlf, ident, working-tree-encoding, smudge filters) is
driven by attributes and a little config.  When nothing can set an attribute
and ``core.autocrlf`` is off, every blob is written verbatim and the plain
``cat-file --batch`` path is exact, so the common case pays nothing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from pcheckout.git.config import config_bool
from pcheckout.git.tree import Entry

GITATTRIBUTES = b".gitattributes"


def is_gitattributes(path: bytes) -> bool:
    return path == GITATTRIBUTES or path.endswith(b"/" + GITATTRIBUTES)


def _global_attributes_file(config: Mapping[str, str]) -> Path | None:
    configured = config.get("core.attributesfile")
    if configured:
        return Path(os.path.expanduser(configured))
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(xdg) / "git" / "attributes"


def conversion_reasons(
    entries: Sequence[Entry], config: Mapping[str, str], common_dir: Path
) -> list[str]:
    """Why conversion is needed (empty list: it is not)."""
    reasons: list[str] = []
    if any(is_gitattributes(e.path) for e in entries):
        reasons.append("the tree has .gitattributes")
    # "input" converts only when adding, so only a true value matters here.
    if config_bool(config.get("core.autocrlf"), False):
        reasons.append("core.autocrlf=true")
    info = common_dir / "info" / "attributes"
    if info.is_file() and info.stat().st_size > 0:
        reasons.append("$GIT_DIR/info/attributes exists")
    glob = _global_attributes_file(config)
    if glob is not None and glob.is_file() and glob.stat().st_size > 0:
        reasons.append(f"global attributes file {glob}")
    system = Path("/etc/gitattributes")
    if not os.environ.get("GIT_ATTR_NOSYSTEM") and system.is_file() and system.stat().st_size > 0:
        reasons.append("system attributes file /etc/gitattributes")
    # Attributes set nowhere cannot select a filter driver or eol, so filter.*
    # and core.eol alone change nothing; they matter only through the above.
    return reasons
