"""Empty MLflow sqlite stores for tests, copied from one made per test process.

Creating a sqlite tracking store runs MLflow's whole schema migration (3–6 s on this project's
2-core machine, about 20 times per suite); a copy of a freshly migrated, never used file is the
same empty store in milliseconds."""

from __future__ import annotations

import contextlib
import functools
import shutil
import sqlite3
import tempfile
from pathlib import Path


@functools.cache
def _template() -> Path:
    """A migrated, empty store (made once per process, left for the OS to clean with its tmp)."""
    import mlflow

    path = Path(tempfile.mkdtemp(prefix="mlflow-template-")) / "mlflow.db"
    mlflow.MlflowClient(f"sqlite:///{path}").search_experiments()  # runs the migrations
    return path


def empty_store(path: Path) -> str:
    """Put an empty, migrated store at ``path`` (replacing none: it must not exist) and return its
    tracking URI."""
    if path.exists():
        raise FileExistsError(f"{path} exists: an empty store would replace its runs")
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_template(), path)
    return f"sqlite:///{path}"


def add_empty_stores(project: Path) -> None:
    """Empty MLflow stores where base (``mlflow.db``) and ci (``data/ci/mlflow.db``, conf/ci/mlflow.yml)
    log, so that no session of the suite pays for creating one."""
    for store in (project / "mlflow.db", project / "data" / "ci" / "mlflow.db"):
        empty_store(store)


def copy_without_runs(project: Path, target: Path) -> Path:
    """``project``'s files (data included) at ``target`` with empty MLflow stores: its earlier runs'
    data without their tracking."""
    shutil.copytree(project, target, ignore=shutil.ignore_patterns("mlflow.db", "mlartifacts"))
    add_empty_stores(target)
    return target


def without_fsync() -> None:
    """Every SQLite connection SQLAlchemy opens in this process from now on commits without waiting
    for the disk (``PRAGMA synchronous=OFF``). MLflow commits each logged parameter and metric on its
    own: a ci session's 170 parameters spent about 2 s of its 5-7 s waiting on fsync on this
    project's VM, idle cores under ``-n 2``. What other processes read is the same (the OS holds
    the writes); only a crash of the machine itself could lose them, which no test is about."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", _unsynchronised):
        event.listen(Engine, "connect", _unsynchronised)


def _unsynchronised(connection, _record) -> None:
    if isinstance(connection, sqlite3.Connection):
        # A file that is no database (a test's corrupt store) fails at its first query, as without the
        # pragma; failing here instead, at connect, sends MLflow into 100 s of retries.
        with contextlib.suppress(sqlite3.DatabaseError):
            connection.execute("PRAGMA synchronous=OFF")
