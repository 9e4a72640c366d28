"""Fault-suite fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.manifest_faults_setup import make_good_project


@pytest.fixture
def marker(tmp_path) -> Path:
    """Where a hostile pickle would write if it were ever executed."""
    return tmp_path / "EXECUTED"


@pytest.fixture(scope="session")
def good_project(tmp_path_factory) -> Path:
    """A project whose ``feature_extraction`` + ``env_construction`` run completed (env local): read
    by the fault modules, copied by each case that changes it (one Kedro run for the whole suite)."""
    return make_good_project(tmp_path_factory.mktemp("faults") / "project")
