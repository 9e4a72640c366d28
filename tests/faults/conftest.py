"""Fault-suite helpers: the toy trading env and agent of tests/agents, and hostile pickles."""

from __future__ import annotations

import hashlib
import pickle
import sys
from pathlib import Path

import pytest

# The toy env/agent module lives with the agents tests (it is also run there as a script).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))


class Hostile:
    """Unpickling this object creates ``marker``: proof that loading a file ran code from it."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def hostile_pickle(marker: Path) -> bytes:
    return pickle.dumps(Hostile(marker))


def tree_digest(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root``: what "data/ unchanged" compares."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / "EXECUTED"
