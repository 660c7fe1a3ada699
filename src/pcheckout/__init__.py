"""pcheckout: a filesystem-aware parallel checkout tool for git."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
