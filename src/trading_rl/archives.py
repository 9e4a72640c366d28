"""Zip archives read back by the project (env specs, resume checkpoints, SB3 model zips): every
member's declared size is checked before any member is read.

A member that declares more bytes than the machine has memory for would otherwise be inflated until
``MemoryError`` (a 12 GB member stopped a run at 4.9 GB RSS). Nothing the project writes comes near
the limits: a member may declare at most the memory available now, and a deflated member at most
``MAX_RATIO`` times its compressed size (a zip bomb; the project's zips compress about 1-10x).
"""

from __future__ import annotations

import io
import os
import zipfile

MAX_RATIO = 1000
_RATIO_FROM_BYTES = 1 << 20  # small members may compress better (JSON of zeros)


class ArchiveTooLargeError(ValueError):
    """A zip member declares more bytes than may be inflated; nothing of it was read."""


def available_memory() -> int:
    """Bytes of memory available now (``MemAvailable``), else the physical memory."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_member_sizes(archive: zipfile.ZipFile, source: str, limit: int | None = None) -> None:
    """Raise :class:`ArchiveTooLargeError` naming ``source``, the member and its declared size when a
    member of ``archive`` would inflate beyond ``limit`` (default: the memory available) in all, or
    beyond ``MAX_RATIO`` times its compressed size."""
    limit = available_memory() if limit is None else limit
    total = 0
    for member in archive.infolist():
        total += member.file_size
        bomb = member.file_size > _RATIO_FROM_BYTES and member.file_size > MAX_RATIO * max(member.compress_size, 1)
        if bomb or total > limit:
            why = (
                f"compresses {member.file_size / max(member.compress_size, 1):.0f}:1 (over {MAX_RATIO}:1)"
                if bomb
                else f"brings the archive to {total:,} bytes, over the {limit:,} bytes that may be inflated"
            )
            raise ArchiveTooLargeError(
                f"{source}: zip member {member.filename!r} declares {member.file_size:,} bytes and {why}. Nothing "
                "of it was read: this project never writes such a file. Fix: restore the file, or rerun the "
                "phase that writes it"
            )


def checked_zip(raw: bytes, source: str, limit: int | None = None) -> zipfile.ZipFile:
    """``zipfile.ZipFile`` over ``raw`` after :func:`check_member_sizes`."""
    archive = zipfile.ZipFile(io.BytesIO(raw))
    try:
        check_member_sizes(archive, source, limit)
    except ArchiveTooLargeError:
        archive.close()
        raise
    return archive
