"""The documented kedro-airflow route: the DAG of the scheduled validation rerun (forward included)
is generated and is valid Python. Airflow itself is not installed (it is not needed to write the
DAG, and the 3.x scheduler is a heavy install); what its tasks run is the Kedro session the tests
of the pipelines cover."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_kedro_airflow_writes_the_validation_dag_with_the_forward_nodes_grouped(tmp_path, project_copy):
    kedro = Path(sys.executable).with_name("kedro")
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "1", "DO_NOT_TRACK": "1"}
    result = subprocess.run(
        [
            str(kedro),
            "airflow",
            "create",
            "--pipelines",
            "validation",
            "--env",
            "ci",
            "--group-by",
            "memory",
            "--target-dir",
            str(tmp_path),
            "--params",
            "schedule=0 6 * * 1",
        ],
        cwd=project_copy(tmp_path / "project"),  # a copy: the session opens the ci MLflow store (data/ci/mlflow.db)
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    source = (tmp_path / "trading_rl_ci_validation_dag.py").read_text()
    ast.parse(source)
    assert 'schedule="0 6 * * 1"' in source and 'env = "ci"' in source
    # forward_data lives in memory: every node that reads it runs in the task that makes it
    tasks = re.findall(r"_run_kedro_node\(node_names=\[(.*?)\]\)", source)
    [forward_task] = [task for task in tasks if "forward.prepare_forward_data" in task]
    for node in ("score_forward_bars", "report_forward", "measure_forward_drift", "render_forward_tearsheet"):
        assert f'"forward.{node}"' in forward_task
    assert "forward.check_forward_decay" in source and ">>" in source
