"""One `kedro run` at a time per data root.

Two runs writing into one data folder load each other's outputs: a node that loads the *latest*
version of a dataset gets the other run's (a walk-forward summary of another configuration's
returns was recorded that way). The lock is a kernel ``flock`` on ``.run_locks/<data_root>/run.lock``
under the project (outside the data root, so a run, refused or not, changes no file there), taken
before any other hook starts anything (MLflow run, manifest) and released when the run ends; a
killed run's lock goes with its process. Other commands (``kedro viz``, ``catalog list``, a
notebook's session) take no lock."""

from __future__ import annotations

import os
import shlex
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
from kedro.framework.hooks import hook_impl

from trading_rl.file_lock import FileLock

LOCK_FOLDER, LOCK_NAME = ".run_locks", "run.lock"


def lock_path(project_path: Path, data_root: str) -> Path:
    return project_path / LOCK_FOLDER / data_root / LOCK_NAME


class DataRootBusyError(click.ClickException):
    """Another run holds the data root: one sentence on the command line, no traceback."""


def holder_text() -> str:
    command = shlex.join(["kedro", *sys.argv[1:]]) if sys.argv and sys.argv[0].endswith("kedro") else "a Kedro session"
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"pid {os.getpid()} on {socket.gethostname()}, started {started}: {command}"


def busy_message(data_root: str, held: Path) -> str:
    try:
        holder = held.read_text().strip() or "unknown"
    except OSError:
        holder = "unknown"
    return (
        f"another run is writing to {data_root}/ ({holder}). Two runs on one data folder load each "
        "other's newest versions. Wait for it to finish, or run in a config env whose globals.yml "
        "sets its own data_root (as conf/ci does). Nothing was run."
    )


class RunLockHooks:
    def __init__(self) -> None:
        self._data_root: str | None = None
        self._lock_path: Path | None = None
        self._lock: FileLock | None = None

    @hook_impl
    def after_context_created(self, context) -> None:
        self._data_root = context.config_loader.data_root()
        self._lock_path = lock_path(Path(context.project_path), self._data_root)

    @hook_impl(tryfirst=True)
    def before_pipeline_run(self) -> None:
        if self._lock_path is None or self._data_root is None:
            return
        self._release()  # a run refused by a later before_pipeline_run hook never reached its end hooks
        self._lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(self._lock_path)
        if not lock.acquire():
            raise DataRootBusyError(busy_message(self._data_root, self._lock_path))
        lock.note(holder_text())
        self._lock = lock

    @hook_impl
    def after_pipeline_run(self) -> None:
        self._release()

    @hook_impl
    def on_pipeline_error(self) -> None:
        self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
