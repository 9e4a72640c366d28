"""Fault-suite fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def marker(tmp_path) -> Path:
    """Where a hostile pickle would write if it were ever executed."""
    return tmp_path / "EXECUTED"
