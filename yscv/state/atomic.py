"""Atomic file writes for checkpoints: a temporary file, fsync, rename.

`atomic_write` writes ``.<name>.yscv.tmp`` next to the target,
flushes and fsyncs it, ``os.replace``-s it over the target and fsyncs the
folder: a crash at any point leaves either the previous file or the new
one, never a mix. The temporary name is fixed per target and a writer holds
an ``flock`` on its temporary file until the rename, so a save killed
mid-write leaves at most one temporary file per target, which the next save
to that folder removes (it can tell a dead writer's file from a live one's).
New files get the permissions ``open()`` would give them (``0o666`` less
the umask; an existing target's mode is kept). A target that is a symbolic
link is written through (its final target is replaced; the link stays).
"""
from __future__ import annotations

import errno
import os
import stat

_TMP_SUFFIX = ".yscv.tmp"


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # e.g. Windows: directories cannot be opened; rename is durable there
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


try:
    import fcntl as _fcntl
except ImportError:  # Windows: no flock; temporary files are still one per target
    _fcntl = None


def _temp_path(path: str) -> str:
    """The one temporary name of ``path``: ``<folder>/.<name>.yscv.tmp``."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, "." + name + _TMP_SUFFIX)


def _lock(fd: int, block: bool):
    """``flock`` ``fd`` exclusively: True (held), False (another process
    holds it; only when not ``block``), None (no locks on this system or
    file system)."""
    if _fcntl is None:
        return None
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX | (0 if block else _fcntl.LOCK_NB))
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        return None


def _same_file(fd: int, path: str) -> bool:
    """``path`` still names the file open as ``fd`` (not renamed or unlinked)."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


_O_BINARY = getattr(os, "O_BINARY", 0)


def _open_temp(tmp: str) -> int:
    """Create ``tmp`` afresh (mode ``0o666`` less the umask, as ``open()``)
    and return its descriptor, locked where the system has ``flock``.

    A file already there is a killed save's (removed) or a live save's of
    the same target in another process (waited for: saves to one path run
    one after the other). Each writer checks, once it holds the lock, that
    the name still refers to its file, so no two writers ever share one."""
    for _ in range(1000):
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o666)
        except FileExistsError:
            if _fcntl is None:            # no locks: a killed save's file (open files
                try:                      # cannot be removed on Windows, so unlink first)
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
                continue
            try:
                old = os.open(tmp, os.O_RDONLY | _O_BINARY)
            except FileNotFoundError:
                continue                  # renamed or removed meanwhile: try again
            try:
                if _lock(old, block=True) is not False and _same_file(old, tmp):
                    os.unlink(tmp)        # no live writer: a killed save's file
            finally:
                os.close(old)
            continue
        got = _lock(fd, block=True)
        if got is None or _same_file(fd, tmp):
            return fd
        os.close(fd)                      # removed by another writer before we locked it
    raise FileExistsError(f"save_checkpoint: cannot create the temporary file {tmp!r} "
                          "(something keeps taking its name)")


def _remove_stale_temps(folder: str, mine: str) -> None:
    """Remove the temporary files of saves that were killed (any target in
    ``folder``): those no live writer holds locked. Only where ``flock``
    works: elsewhere a dead writer's file cannot be told from a live one's."""
    try:
        names = [e.name for e in os.scandir(folder)
                 if e.name.startswith(".") and e.name.endswith(_TMP_SUFFIX)]
    except OSError:
        return
    for name in names:
        tmp = os.path.join(folder, name)
        if tmp == mine:
            continue
        try:
            fd = os.open(tmp, os.O_RDONLY | _O_BINARY)
        except OSError:
            continue
        try:
            if _lock(fd, block=False) is True and _same_file(fd, tmp):
                os.unlink(tmp)
        except OSError:
            pass
        finally:
            os.close(fd)


def _atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temporary file, flush, fsync,
    ``os.replace``, fsync of the folder. The temporary file is removed on
    any error; one killed mid-save is removed by the next save.

    A ``path`` that is a symbolic link is written through, as
    ``open(path, "wb")`` would: the link's final target (created if the link
    dangles) is replaced atomically, in the target's folder, and the link
    stays a link."""
    if os.path.islink(path):
        path = os.path.realpath(path)
        if os.path.islink(path):  # a loop of links: open() would fail too
            raise OSError(errno.ELOOP, "save_checkpoint: too many levels of symbolic links",
                          path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = _temp_path(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)  # an existing target keeps its mode
    except OSError:
        mode = None
    fd = _open_temp(tmp)
    try:
        try:
            if mode is not None and hasattr(os, "fchmod"):
                os.fchmod(fd, mode)
            with os.fdopen(os.dup(fd), "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            if _fcntl is None:
                os.close(fd)              # Windows cannot rename an open file
                fd = -1
            os.replace(tmp, path)         # still locked: no other writer touches tmp
        except BaseException:
            try:
                if fd < 0 or _same_file(fd, tmp):
                    os.unlink(tmp)
            except OSError:
                pass
            raise
        _fsync_dir(folder)
    finally:
        if fd >= 0:
            os.close(fd)
    _remove_stale_temps(folder, tmp)
