"""One `kedro run` per data root: a second run on a data folder that a live run holds is refused in
one sentence before anything starts, and a finished run frees the folder."""

from __future__ import annotations

import os

import mlflow
import pytest

from trading_rl.file_lock import FileLock
from trading_rl.integration.run_lock import LOCK_NAME, DataRootBusyError


def written_files(project) -> list[str]:
    return sorted(
        str(path.relative_to(project))
        for path in (project / "data").rglob("*")
        if path.is_file() and path.name not in (LOCK_NAME, "mlflow.db")  # the store opens with the context
    )


def mlflow_runs(project) -> list:
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{project / 'data' / 'ci' / 'mlflow.db'}")
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    return client.search_runs(experiments) if experiments else []


@pytest.mark.slow
def test_a_second_run_on_a_held_data_root_is_refused_and_a_finished_run_frees_it(project_copy, kedro_run, tmp_path):
    project = project_copy(tmp_path / "project")
    cwd = os.getcwd()
    os.chdir(project)
    try:
        other_run = FileLock(project / "data" / LOCK_NAME)
        assert other_run.acquire()
        other_run.note("pid 4242 on host, started 2026-11-27 10:00:00 UTC: kedro run --env research")
        before = written_files(project)
        with pytest.raises(DataRootBusyError) as refused:
            kedro_run(project, ["feature_extraction"])
        message = refused.value.format_message()
        assert "another run is writing to data/ (pid 4242" in message and "kedro run --env research" in message
        assert message.endswith("Nothing was run.") and "data_root" in message
        assert written_files(project) == before, "a refused run writes no version"
        assert mlflow_runs(project) == [], "a refused run starts no MLflow run"

        other_run.release()
        kedro_run(project, ["feature_extraction"])
        assert any(name.startswith("data/02_intermediate") for name in written_files(project))
        assert len(mlflow_runs(project)) == 1
        assert FileLock(project / "data" / LOCK_NAME).acquire(), "the finished run released the data root"
    finally:
        os.chdir(cwd)
