"""The advisory lock of `jaxstream.checkpoint` and the removal of temporaries a killed save left.

Re-exported by `jaxstream.checkpoint`.
"""
from __future__ import annotations

import os

from ._ckpt_tree import CheckpointError


class CheckpointBusy(CheckpointError):
    """Another live process holds the checkpoint's lock (`lock`)."""

    __module__ = "jaxstream.checkpoint"


class lock:
    """An advisory, exclusive lock on a checkpoint path, for one writer at a time.

    A context manager: ``with checkpoint.lock(path): ...``. The lock is an
    ``flock`` on the file ``<path>.lock`` (created beside the checkpoint and
    left there; it holds the owner's pid and host for the message), taken
    without waiting. The operating system releases it when its holder exits or
    is killed, so a crashed job never leaves a stale lock. `run_stream_chunked`
    holds it for the whole run.

    Where ``fcntl`` is missing (Windows) the lock does nothing. On network file
    systems ``flock`` is as reliable as the file system makes it (NFSv4 and
    Lustre honour it across hosts; some older NFS mounts only within a host).

    Raises:
      CheckpointBusy: another process (or another open lock in this process)
        holds it.
    """

    def __init__(self, path):
        self.path = os.fspath(path) + ".lock"
        self._fd = None

    def __enter__(self) -> "lock":
        try:
            import fcntl
        except ImportError:  # no advisory locks on this platform
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                owner = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "an unknown process"
            except OSError:
                owner = "an unknown process"
            os.close(fd)
            raise CheckpointBusy(f"{self.path[:-5]} is in use by another job ({owner} holds {self.path}): two "
                                 "jobs writing one checkpoint would overwrite each other's progress; give each "
                                 "job its own checkpoint path, or wait for the other to finish") from None
        import socket
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None


def remove_stale_temporaries(path) -> list:
    """Delete the temporary files that a process killed inside `save` left beside `path`.

    `save` writes ``.<basename>.<random>.tmp`` in the checkpoint's directory
    and renames it over `path` when complete; a kill before the rename
    leaves the temporary behind (the checkpoint itself is intact). The
    checkpoint's `lock` is taken first, so a live job's save in progress is
    never removed.

    Returns:
      The paths removed.

    Raises:
      CheckpointBusy: another job holds the checkpoint's lock.
    """
    with lock(path):
        return _remove_temporaries(path)


def _remove_temporaries(path) -> list:
    """`remove_stale_temporaries` for a caller that already holds the lock."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    prefix, removed = f".{os.path.basename(path)}.", []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if name.startswith(prefix) and name.endswith(".tmp"):
            try:
                os.unlink(os.path.join(directory, name))
                removed.append(os.path.join(directory, name))
            except OSError:
                pass
    return removed
