"""The directory git clone creates: as given, or git's guess from the URL."""

from __future__ import annotations

import os

from pcheckout.clone.args import CloneArgs


def _is_git_directory(path: str) -> bool:
    # setup.c:is_git_directory, in short: HEAD, objects/ and refs/ are there
    return (
        os.path.isfile(os.path.join(path, "HEAD"))
        and os.path.isdir(os.path.join(path, "objects"))
        and os.path.isdir(os.path.join(path, "refs"))
    )


def _is_bundle(repo: str) -> bool:
    """builtin/clone.c:get_repo_path: is ``repo`` a local bundle file (checked
    after the repository forms, in git's order)?"""
    for suffix in ("/.git", "", ".git/.git", ".git"):
        path = repo + suffix
        if os.path.isdir(path) and _is_git_directory(path):
            return False
        if os.path.isfile(path) and os.path.getsize(path) > 8:
            with open(path, "rb") as f:
                if f.read(8) == b"gitdir: ":
                    return False
    return any(os.path.isfile(repo + suffix) for suffix in (".bundle", ""))


def guess_dir_name(repo: str, *, is_bundle: bool, is_bare: bool) -> str | None:
    """git's dir.c:git_url_basename (the "humanish" part of the URL): scheme
    and user info skipped, trailing slashes, spaces and "/.git" stripped, a
    bare host's port dropped, the last component without ".git" (".bundle"),
    control characters and runs of spaces folded to one space.  None where git
    dies with "No directory name could be guessed" (git is left to say so)."""
    start = repo.find("://")
    start = 0 if start < 0 else start + 3
    end = len(repo)
    ptr = start
    while ptr < end and repo[ptr] != "/":
        if repo[ptr] == "@":
            start = ptr + 1
        ptr += 1
    while start < end and (repo[end - 1] == "/" or repo[end - 1].isspace()):
        end -= 1
    if end - start > 5 and repo[end - 5] == "/" and repo[end - 4 : end] == ".git":
        end -= 5
        while start < end and repo[end - 1] == "/":
            end -= 1
    part = repo[start:end]
    if "/" not in part and ":" in part:  # "host:2222" -> "host", not "2222"
        ptr = end
        while start < ptr and repo[ptr - 1].isdigit():
            ptr -= 1
        if start < ptr and repo[ptr - 1] == ":":
            end = ptr - 1
    ptr = end
    while start < ptr and repo[ptr - 1] not in "/:":
        ptr -= 1
    name = repo[ptr:end]
    suffix = ".bundle" if is_bundle else ".git"
    if name.endswith(suffix):
        name = name[: -len(suffix)]
    if not name or name == "/":
        return None
    if is_bare:
        name += ".git"
    out: list[str] = []
    prev_space = True  # strips leading whitespace
    for ch in name:
        if ord(ch) < 0x20:
            ch = " "
        if ch in " \t\n\v\f\r":
            if prev_space:
                continue
            prev_space = True
        else:
            prev_space = False
        out.append(ch)
    if out and prev_space:
        out.pop()
    return "".join(out)


def destination(args: CloneArgs) -> str | None:
    """The directory git clone creates (as given, or guessed from the URL)."""
    if args.directory is not None:
        return args.directory
    bare = args.bare or args.mirror
    return guess_dir_name(args.url, is_bundle=_is_bundle(args.url), is_bare=bare)
