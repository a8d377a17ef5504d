"""Directory handling of a checkpoint: the temporary directory, fsync, the atomic replacement.

A checkpoint is written into a new directory next to its target (``.NAME.tmp-XXXX``) and only
when complete takes the target's place. On Linux an existing checkpoint is swapped with the new
one in one ``renameat2(RENAME_EXCHANGE)`` call, so the target always names a complete
checkpoint; elsewhere the old one is renamed aside first (a crash in between leaves it intact as
``.NAME.old-XXXX``). All of this runs on rank 0 only.

Examples:
    >>> tmp = make_temporary("ckpt/step-100")      # ckpt/.step-100.tmp-1f3a...
    >>> # ... write everything into tmp, flush it
    >>> replace_directory(tmp, "ckpt/step-100")
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable

__all__ = ["METADATA", "OBJECTS", "check_target", "fsync_directory", "fsync_file",
           "is_temporary", "make_temporary", "remove_path", "remove_stale", "replace_directory",
           "replace_file", "stale_temporaries", "temporary_name"]

METADATA = "metadata.json"
OBJECTS = "objects.pkl"


def check_target(path: str) -> None:
    """Raise unless ``path`` may be replaced by a checkpoint: absent, empty, or a checkpoint.

    Args:
        path: the checkpoint directory to be written.

    Raises:
        FileExistsError: ``path`` is a file, or a directory that holds something other than a
            checkpoint (saving must never delete a user's other data).
    """
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path):
        raise FileExistsError(f"{path} exists and is not a directory; a checkpoint is a "
                              "directory")
    if os.listdir(path) and not os.path.exists(os.path.join(path, METADATA)):
        raise FileExistsError(f"refusing to replace {path}: it is a directory that is not an "
                              f"mpiflow checkpoint (it has no {METADATA})")


_TEMPORARY = re.compile(r"\.(?P<name>.+)\.tmp-[0-9a-f]{12}")


def is_temporary(path: str) -> bool:
    """Whether ``path`` names a save's temporary directory (``.NAME.tmp-XXXXXXXXXXXX``).

    Examples:
        >>> is_temporary("ckpt/.step-3.tmp-0123456789ab"), is_temporary("ckpt/step-3")
        (True, False)
    """
    return _TEMPORARY.fullmatch(os.path.basename(os.path.normpath(path))) is not None


def stale_temporaries(path: str) -> list[str]:
    """The temporary directories that saves of ``path`` left behind (interrupted saves).

    Args:
        path: a checkpoint directory.

    Returns:
        Their paths, sorted; empty if the parent directory does not exist.
    """
    parent, name = os.path.split(os.path.abspath(path))
    try:
        entries = os.listdir(parent)
    except OSError:
        return []
    return sorted(os.path.join(parent, e) for e in entries
                  if (m := _TEMPORARY.fullmatch(e)) is not None and m["name"] == name)


def remove_stale(path: str) -> list[str]:
    """Remove the temporary directories that interrupted saves of ``path`` left behind.

    A save killed (SIGKILL, the watchdog's abort, Ctrl-C) before it finished leaves its
    ``.NAME.tmp-*`` directory; the next save of the same path calls this first. A save of the
    same path that runs at the same moment in another job would lose its directory: one job at
    a time may write a checkpoint path.

    Args:
        path: a checkpoint directory.

    Returns:
        The directories removed.

    Examples:
        >>> os.makedirs("ckpt/.step-3.tmp-0123456789ab")
        >>> [os.path.basename(p) for p in remove_stale("ckpt/step-3")]
        ['.step-3.tmp-0123456789ab']
    """
    stale = stale_temporaries(path)
    for tmp in stale:
        remove_path(tmp)
    return stale


def remove_path(path: str) -> None:
    """Remove the file or directory tree at ``path``, if any (best effort, for clean-ups)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(path)


def temporary_name(path: str) -> str:
    """A new name next to ``path`` for a file or directory that will take its place.

    Examples:
        >>> os.path.basename(temporary_name("data/run.h5")).startswith(".run.h5.tmp-")
        True
    """
    parent, name = os.path.split(os.path.abspath(path))
    return os.path.join(parent, f".{name}.tmp-{uuid.uuid4().hex[:12]}")


def make_temporary(path: str) -> str:
    """Create an empty directory next to ``path`` (its parents too) and return its path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = temporary_name(path)
    os.mkdir(tmp)
    return tmp


def replace_file(tmp: str, path: str) -> None:
    """Make the complete file ``tmp`` appear at ``path`` in one rename, flushed to disk.

    Args:
        tmp: the new file (next to ``path``).
        path: where it goes; a file there is replaced atomically, a directory is refused.

    Raises:
        IsADirectoryError: ``path`` is a directory.
    """
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; refusing to replace it by a file")
    fsync_file(tmp)
    os.replace(tmp, path)
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def fsync_file(path: str) -> None:
    """Flush the file at ``path`` to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(path: str) -> None:
    """Flush the entries of directory ``path`` to disk (a no-op where directories cannot be)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _exchange(a: str, b: str) -> bool:
    """Swap the paths ``a`` and ``b`` atomically; False where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        rename = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_cwd, exchange = -100, 2  # AT_FDCWD, RENAME_EXCHANGE
    rename.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                       ctypes.c_uint]
    if rename(at_cwd, os.fsencode(a), at_cwd, os.fsencode(b), exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), b)


def replace_directory(tmp: str, path: str,
                      check: Callable[[str], None] = check_target) -> None:
    """Make the complete directory ``tmp`` appear at ``path``, replacing what was there.

    Args:
        tmp: the new checkpoint, flushed to disk.
        path: where it goes (absent, empty, or an old checkpoint: see :func:`check_target`).
        check: raises unless what is at ``path`` may be replaced (:func:`check_target`, or
            the check of another kind of directory, such as a Zarr store).
    """
    check(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.lexists(path):
        os.rename(tmp, path)
    elif _exchange(tmp, path):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the old checkpoint
    else:
        old = os.path.join(parent, f".{os.path.basename(path)}.old-{uuid.uuid4().hex[:12]}")
        os.rename(path, old)
        try:
            os.rename(tmp, path)
        except BaseException:
            os.rename(old, path)
            raise
        shutil.rmtree(old, ignore_errors=True)
    fsync_directory(parent)
