"""The validation pipeline runs in-process here, without a Kedro session: its forward nodes read the
model registry through MLflow's process-wide tracking URI. Each test gets its own empty store, so it
neither reads whichever store an earlier test of the same worker left set (and that store's
champion, whose files this project lacks) nor creates ``mlflow.db`` in the checkout."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _every_test_has_its_own_mlflow_store(own_mlflow_store):
    yield
