"""What a destination directory holds, before anything is written (no writer imported)."""

from __future__ import annotations

import os
from pathlib import Path

from pcheckout.errors import DestinationError


def occupants(root: Path, *, ignore_git: bool = True) -> list[bytes]:
    """What is in ``root`` besides .git (sorted, a few are enough to name)."""
    try:
        with os.scandir(os.fsencode(root)) as it:
            names = sorted(e.name for e in it if not (ignore_git and e.name == b".git"))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise DestinationError(f"cannot read {root}: {exc.strerror}") from None
    return names
