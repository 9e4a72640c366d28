"""Setups built once per test run rather than once per pytest-xdist worker.

Under ``-n 2 --dist worksteal`` a module's tests, and the users of a session fixture, can run on
both workers, and each worker would build the fixture again: a Kedro session or a training of tens
of seconds. A setup whose result is a folder that its tests only read is built once under the run's
own temporary folder (the workers' parent), behind a file lock: the other worker waits for the
build and reads the same folder. Without xdist the folder is the process's own, as before."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

BUILT = ".built"  # written next to the folder once its build returned


def run_root(request: pytest.FixtureRequest) -> Path:
    """The temporary folder that every process of this test run sees: the run's own basetemp."""
    basetemp = request.getfixturevalue("tmp_path_factory").getbasetemp()
    # xdist gives each worker <the run's basetemp>/<worker id>
    return basetemp.parent if hasattr(request.config, "workerinput") else basetemp


def shared_folder(request: pytest.FixtureRequest, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name`` after ``build(folder)`` ran on it, once for every worker of this run."""
    if not hasattr(request.config, "workerinput"):  # no xdist (or its controller): nothing to share
        folder = request.getfixturevalue("tmp_path_factory").mktemp(name, numbered=True)
        build(folder)
        return folder
    root = run_root(request)
    folder, built = root / name, root / f"{name}{BUILT}"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not built.exists():  # first here, or the worker before failed half-way: build afresh
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            built.touch()
    return folder
