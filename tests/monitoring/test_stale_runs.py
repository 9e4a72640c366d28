"""Ending MLflow runs whose process died, against a real sqlite tracking store."""

import subprocess
import sys

import mlflow
import pytest
from helpers.mlflow_store import empty_store

from trading_rl.monitoring.stale_runs import ENDED_BY_TAG, HOST_TAG, PID_TAG, end_dead_runs, process_tags


@pytest.fixture
def client(tmp_path):
    return mlflow.MlflowClient(empty_store(tmp_path / "mlflow.db"))


def _dead_pid() -> str:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return str(child.pid)


@pytest.mark.slow
def test_only_running_runs_of_dead_processes_on_this_host_are_ended(client):
    experiment = client.create_experiment("trading_rl")
    here = process_tags()[HOST_TAG]
    runs = {
        "dead": {HOST_TAG: here, PID_TAG: _dead_pid()},
        "alive": process_tags(),
        "other_host": {HOST_TAG: "elsewhere", PID_TAG: _dead_pid()},
        "untagged": {},
        "current": {HOST_TAG: here, PID_TAG: _dead_pid()},
    }
    ids = {name: client.create_run(experiment, tags=tags).info.run_id for name, tags in runs.items()}
    finished = client.create_run(experiment, tags={HOST_TAG: here, PID_TAG: _dead_pid()}).info.run_id
    client.set_terminated(finished, status="FINISHED")

    ended = end_dead_runs(client, experiment, exclude_run_id=ids["current"])

    assert ended == [ids["dead"]]
    status = {name: client.get_run(run_id).info.status for name, run_id in ids.items()}
    assert status == {
        "dead": "KILLED",
        "alive": "RUNNING",
        "other_host": "RUNNING",
        "untagged": "RUNNING",
        "current": "RUNNING",
    }
    assert client.get_run(finished).info.status == "FINISHED"
    assert "was gone" in client.get_run(ids["dead"]).data.tags[ENDED_BY_TAG]
