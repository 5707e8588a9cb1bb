"""Atomic writes of a local lake's files with plain system calls.

A local lake's small writes (journal appends, commits, staging entries) are most of
what a command does to the disk, and obstore's local store makes each one a hand-off
to a thread of its runtime, which costs more than the write itself when the cores are
busy. :class:`~limno.storage._obstore.ObStorage` therefore does them here, with the
system calls obstore would make and its guarantees: a put writes a new staging file
(``<name>#<digits>``, obstore's own convention, which listings skip) and renames it
into place, a create-only put hard-links it (which fails if the target exists), and a
put over an existing file swaps the two atomically (and a conditional replace swaps
them only if the one swapped out is the version compared). Anything these cannot do is left
to obstore, whose error then says what is wrong.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import Any

__all__ = [
    "create_staging",
    "exchange",
    "publish_new",
    "replace_by_exchange",
    "replace_if_same",
]

_RENAME_EXCHANGE = 2
_renameat2: Any = None


def exchange(a: str, b: str) -> bool | None:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``).

    True when swapped, False when ``b`` does not exist, None when the system or the
    filesystem cannot do it.
    """
    import ctypes  # the first call pays for it: only writes that replace a file get here

    global _renameat2
    if _renameat2 is None:
        _renameat2 = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                libc = ctypes.CDLL(None, use_errno=True)
                fn = libc.renameat2
                dirfd, name = ctypes.c_int, ctypes.c_char_p
                fn.argtypes = [dirfd, name, dirfd, name, ctypes.c_uint]
                fn.restype = ctypes.c_int
                _renameat2 = fn
    if not _renameat2:
        return None
    at_fdcwd = -100
    if _renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.ENOENT and os.path.exists(a):
        return False
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM, errno.EXDEV):
        _renameat2 = False if err == errno.ENOSYS else _renameat2
        return None
    raise OSError(err, os.strerror(err), b)


def create_staging(local: str) -> tuple[int, str]:
    """Create a new file ``<local>#<12 digits>`` exclusively; its descriptor and name."""
    import secrets  # writes only

    while True:
        tmp = f"{local}#{secrets.randbelow(10**12):012d}"
        try:
            return os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666), tmp
        except FileExistsError:
            continue


def publish_new(local: str, data: bytes, exclusive: bool) -> bool | None:
    """Write ``data`` as the file ``local`` atomically, as obstore's local store does: into
    a new staging file beside it (made with its directory if need be), then renamed into
    place, or for an ``exclusive`` put hard-linked, which fails if ``local`` exists.

    True when published, False when ``exclusive`` and ``local`` exists, None when it
    could not be done here (nothing is left behind: the caller asks obstore, whose
    error then says what is wrong).
    """
    try:
        try:
            fd, tmp = create_staging(local)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(local), exist_ok=True)
            fd, tmp = create_staging(local)
    except OSError:
        return None
    published = False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if not exclusive:
            os.replace(tmp, local)
            published = True
            return True
        try:
            os.link(tmp, local)
        except FileExistsError:
            return False
        return True
    except OSError:
        return None
    finally:
        if not published:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def replace_by_exchange(local: str, data: bytes) -> bool:
    """Replace the existing file ``local`` with ``data`` atomically; False if not done.

    A rename over an existing file makes ext4 flush the new file's blocks first
    (``auto_da_alloc``), which costs a millisecond or more per small put; swapping
    the two files with one atomic exchange and then deleting the old one does not.
    Readers see the old bytes or the new ones, as with a rename. The temporary file
    uses the staging name listings skip (see
    :meth:`~limno.storage._obstore.ObStorage.staging_file`).
    """
    try:
        fd, tmp = create_staging(local)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        swapped = exchange(tmp, local)
        if swapped is None:
            return False
        if not swapped:  # the target went away meanwhile: a plain rename creates it
            os.replace(tmp, local)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def replace_if_same(local: str, data: bytes, expected: bytes) -> bool:
    """Replace the file ``local`` with ``data`` only if its bytes are ``expected``, as one
    compare-and-swap; whether it did (False: missing, other bytes, or replaced meanwhile).

    The version compared is held open and locked (``flock``: conditional replaces of one
    version take turns, and a crashed holder's lock goes with its process), then the new
    file is swapped in by one atomic exchange, which hands back the file it displaced: if
    that is not the version compared (an unconditional write came in between), it is
    swapped back and the replace lost. Readers see the old bytes or the new ones, never
    no file; a crash leaves one of the two in place (and at most a staging file). Where
    the filesystem cannot exchange, the swap is a rename under the same lock: atomic
    against other conditional replaces, not against a plain write in the same instant.
    """
    import fcntl  # conditional replaces only
    import stat

    try:
        fd = os.open(local, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        seen = os.fstat(fd)
        if not stat.S_ISREG(seen.st_mode) or _read_fd(fd) != expected:
            return False  # a directory is no object
        try:
            now = os.stat(local)
        except FileNotFoundError:
            return False
        if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino):
            return False  # replaced since it was opened: the compared version is gone
        return _swap_in(local, data, seen.st_ino)
    finally:
        os.close(fd)  # and the lock with it


def _read_fd(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _swap_in(local: str, data: bytes, compared: int) -> bool:
    """Exchange a new file holding ``data`` with ``local`` if ``local`` is still the inode
    ``compared``; whether it was (see :func:`replace_if_same`)."""
    fd, tmp = create_staging(local)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            ours = os.fstat(f.fileno()).st_ino
        swapped = exchange(tmp, local)
        if swapped is None:
            os.replace(tmp, local)
            return True
        if not swapped:
            return False  # deleted after the compare: the delete came first
        if os.stat(tmp).st_ino == compared:
            return True
        # a plain write came between the compare and the swap: it came first, so it
        # stays (swapped back) and this replace lost; a newer write still goes back too
        if exchange(tmp, local) and os.stat(tmp).st_ino != ours:
            os.replace(tmp, local)
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
