"""Fault-suite fixtures; the toy trading env and agent of tests/agents are made importable here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The toy env/agent module lives with the agents tests (it is also run there as a script).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))


@pytest.fixture
def marker(tmp_path) -> Path:
    """Where a hostile pickle would write if it were ever executed."""
    return tmp_path / "EXECUTED"
