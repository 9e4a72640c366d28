"""Kedro's project bootstrap, once per test process.

``bootstrap_project`` configures Kedro for the installed ``trading_rl`` package (its settings and
pipeline registry); every project copy a test makes shares that package and ``pyproject.toml``, so
one call per process configures them all. Each call costs about a second in a test process:
dynaconf looks for env-named settings files with ``inspect.stack()``, which resolves the module of
every frame of pytest's deep stack against thousands of imported modules."""

from __future__ import annotations

import functools
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def bootstrap() -> None:
    """Configure Kedro for this project's package (the first call does the work)."""
    from kedro.framework.startup import bootstrap_project

    bootstrap_project(PROJECT_ROOT)
