#!/usr/bin/env python3
"""Write the manual pages (man/man1/*.1) from the command line's parsers.

    python3 scripts/gen_man.py [--check]

The pages are generated from the same words as ``--help`` (src/pcheckout/cli/parser.py,
src/pcheckout/cli/manpage.py) and committed, so that ``pip install`` needs nothing to build
them; ``--check`` (and tests/test_manpages.py) fails where a committed page is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT / "src"))
from pcheckout.cli.manpage import pages  # noqa: E402  (this tree's, not an installed one)

OUT = PROJECT / "man" / "man1"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="only say which pages are stale")
    ns = ap.parse_args()
    stale = []
    made = pages()
    for name, text in made.items():
        path = OUT / name
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(name)
        if not ns.check:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    extra = sorted(p.name for p in OUT.glob("*.1") if p.name not in made) if OUT.exists() else []
    for name in extra:
        stale.append(name)
        if not ns.check:
            (OUT / name).unlink()
    if stale:
        print(("stale: " if ns.check else "written: ") + ", ".join(stale))
    return 1 if ns.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
