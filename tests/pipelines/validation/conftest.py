"""The validation pipeline runs in-process here, without a Kedro session: its forward nodes read the
model registry through MLflow's process-wide tracking URI. Each test gets its own empty store, so it
neither reads whichever store an earlier test of the same worker left set (and that store's
champion, whose files this project lacks) nor creates ``mlflow.db`` in the checkout."""

from __future__ import annotations

import mlflow
import pytest
from helpers.mlflow_store import empty_store


@pytest.fixture(autouse=True)
def own_mlflow_store(tmp_path):
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(empty_store(tmp_path / "own_mlflow_store" / "mlflow.db"))
    yield
    mlflow.set_tracking_uri(previous)
