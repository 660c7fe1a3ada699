"""Write git clone's git dir on local scratch space, then copy it to the destination.

On a latency-bound destination most of ``git clone --no-checkout --shared``
is git's metadata work there, one round trip at a time: writing the fetched
refs into packed-refs, git checks each new name against the loose refs
(refs.c:refs_verify_refname_available iterates "refs/tags/NAME/"), an lstat
of .git/refs/tags/NAME per tag that no cache answers.  With 1,006 tags on
the 1 ms latency filesystem those lstats summed to 1.35-1.42 s in traced
runs of a clone that takes 1.79 s untraced (docs/benchmarks.md, "pcheckout
clone").  The same clone into a local directory takes a fraction of that,
and the git dir it leaves is a few dozen small files when the objects are
borrowed (``--shared``, ``--reference``): copying those costs a few round
trips per file, in parallel (~75 ms there).

So ``pcheckout clone`` runs ``git clone --separate-git-dir=SCRATCH/git``
(git itself creates the work tree, with its own checks and messages, and
writes the git dir exactly as for a normal clone: ``--separate-git-dir``
only adds the ``.git`` file pointing at it, which is replaced), then
recreates that git dir as DEST/.git: every directory, file and symlink,
bytes and permission bits as git left them.  Nothing in a clone's git dir
records its own path, so the result is the one ``git clone`` writes (the
tests compare every file of both).

Not staged: bare and mirror clones (no checkout: nothing of pcheckout's to
add), a user's own ``--separate-git-dir``, and clones that bring a pack
(without borrowed objects the pack would be written twice, once locally and
once to the destination, while git streams it to the destination as it
arrives).  ``PCHECKOUT_CLONE_STAGE=always|never`` overrides the choice
(tests and benchmarks).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pcheckout.errors import DestinationError, WriteError
from pcheckout.fdio import write_all
from pcheckout.fs import detect as fsdetect

ENV = "PCHECKOUT_CLONE_STAGE"

#: Files copied at once: each costs ~4 round trips (lookup, create, write,
#: flush); files of different directories overlap, creates in one directory
#: are serialised by the kernel.  The largest directory of a fresh git dir is
#: hooks/ (13 samples from git's default template).
COPY_THREADS = 16

#: Read size when copying (packed-refs of many refs, a --dissociate pack).
CHUNK = 1 << 20


def worth_staging(work: Path) -> str | None:
    """Why staging pays for a clone into ``work`` (its filesystem is
    latency-bound and the scratch space's is not), or None."""
    dest = fsdetect.detect(str(work))
    if not dest.latency_bound:
        return None
    scratch = fsdetect.detect(tempfile.gettempdir())
    if scratch.latency_bound is not False:
        return None
    return f"{work} is on {dest.kind}, the scratch space {tempfile.gettempdir()} on {scratch.kind}"


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="pcheckout-clone-"))


def move_git_dir(src: Path, gitfile: Path) -> None:
    """Replace the ``.git`` file git wrote at ``gitfile`` by a copy of ``src``."""
    with open(gitfile, "rb") as f:
        if f.read(8) != b"gitdir: ":
            raise DestinationError(f"{gitfile} is not the .git file git clone wrote")
    os.unlink(gitfile)
    src_b, dst_b = os.fsencode(src), os.fsencode(gitfile)
    dirs: list[tuple[bytes, int]] = []
    files: list[tuple[bytes, int]] = []
    links: list[bytes] = []
    for dirpath, dirnames, filenames in os.walk(src_b):
        rel = os.path.relpath(dirpath, src_b)
        for name in dirnames + filenames:
            r = os.path.normpath(os.path.join(rel, name))
            st = os.lstat(os.path.join(src_b, r))
            if stat.S_ISLNK(st.st_mode):
                links.append(r)
            elif stat.S_ISDIR(st.st_mode):
                dirs.append((r, stat.S_IMODE(st.st_mode)))
            else:
                files.append((r, stat.S_IMODE(st.st_mode)))
    umask = os.umask(0o077)
    os.umask(umask)

    def mkdir(item: tuple[bytes, int]) -> None:
        r, mode = item
        path = dst_b if r == b"." else os.path.join(dst_b, r)
        try:
            os.mkdir(path, mode)
            if mode & ~umask != mode:  # bits the umask took (a shared repository's)
                os.chmod(path, mode)
        except OSError as exc:
            raise WriteError(path, exc) from None

    def copy(item: tuple[bytes, int]) -> None:
        r, mode = item
        target = os.path.join(dst_b, r)
        try:
            with open(os.path.join(src_b, r), "rb") as f:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
                try:
                    while chunk := f.read(CHUNK):
                        write_all(fd, chunk)
                    if mode & ~umask != mode:
                        os.fchmod(fd, mode)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise WriteError(target, exc) from None

    mkdir((b".", stat.S_IMODE(os.lstat(src_b).st_mode)))
    levels: dict[int, list[tuple[bytes, int]]] = {}
    for item in dirs:
        levels.setdefault(item[0].count(b"/"), []).append(item)
    with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="stage-copy") as pool:
        for depth in sorted(levels):  # parents before children, siblings side by side
            for _ in pool.map(mkdir, levels[depth]):
                pass
        for r in links:
            os.symlink(os.readlink(os.path.join(src_b, r)), os.path.join(dst_b, r))
        for _ in pool.map(copy, files):
            pass


def remove_partial_clone(work: Path, *, existed: bool) -> None:
    """What git clone leaves when it fails before the checkout: nothing it
    created (the work tree if it made it, else the work tree's contents)."""
    if not existed:
        shutil.rmtree(work, ignore_errors=True)
        return
    for entry in os.scandir(work):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            os.unlink(entry.path)
