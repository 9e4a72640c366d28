"""An exclusive, non-blocking file lock that the kernel releases when its process dies, so a killed
run never leaves a stale lock behind (checkpoints, a data root's run lock)."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path


class FileLock:
    """An exclusive, non-blocking ``flock`` on ``path`` — released by the kernel when the process dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    return False
                raise
            try:
                current = os.stat(self.path).st_ino
            except FileNotFoundError:
                current = None
            if current == os.fstat(fd).st_ino:
                self._fd = fd
                return True
            os.close(fd)  # the file was swept (unlinked) between open and flock: lock the new one

    def note(self, text: str) -> None:
        """Write ``text`` (who holds the lock) into the held file, for the message of a refused one."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, text.encode(), 0)

    def unlink_held(self) -> None:
        """Remove the lock file while holding it (a run that opened it meanwhile retries on a new file)."""
        if self._fd is not None:
            self.path.unlink(missing_ok=True)

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
