"""Helpers for partial-clone tests: a local file:// server and blobless clones."""

from __future__ import annotations

import os
from pathlib import Path

from helpers import git


def serve(src: Path, name: str = "server.git") -> Path:
    """A bare copy of ``src`` that serves filtered fetches (uploadpack.allowFilter)."""
    bare = src.parent / name
    git(src.parent, "clone", "-q", "--bare", str(src), str(bare))
    git(bare, "config", "uploadpack.allowFilter", "true")
    git(bare, "config", "uploadpack.allowAnySHA1InWant", "true")
    return bare


def blobless_clone(server: Path, dest: Path) -> Path:
    """``git clone --filter=blob:none --no-checkout file://SERVER DEST``."""
    git(dest.parent, "clone", "-q", "--filter=blob:none", "--no-checkout",
        f"file://{server}", str(dest))  # fmt: skip
    return dest


def promisor_packs(repo: Path) -> list[str]:
    """The ``.promisor`` packs in ``repo`` (one per fetch, plus the clone's own)."""
    pack_dir = repo / ".git" / "objects" / "pack"
    return sorted(n for n in os.listdir(pack_dir) if n.endswith(".promisor"))


def local_blob_count(repo: Path) -> int:
    out = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objecttype)")
    return out.split().count(b"blob")
