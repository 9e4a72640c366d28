"""Fault-suite helpers: hostile pickles and a digest of a folder tree (what "data/ unchanged" compares)."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path


class Hostile:
    """Unpickling this object creates ``marker``: proof that loading a file ran code from it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def hostile_pickle(marker: Path) -> bytes:
    return pickle.dumps(Hostile(marker))


def tree_digest(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root``."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }
