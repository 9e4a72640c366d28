"""MLflow under ``--runner ThreadRunner``: what nodes log from Kedro's worker threads reaches the
pipeline's run, and only that run. MLflow keeps the active run per thread; kedro-mlflow's
``before_node_run`` reopens the pipeline's run in each node's thread, and the project relies on it
(docs/scale_out.md). A real session of the project (its hooks and kedro-mlflow's, a throw-away
store) runs a probe pipeline whose two nodes are in flight at once."""

from __future__ import annotations

import threading
import time

import mlflow
import pytest
from helpers.kedro_project import bootstrap
from kedro.framework.project import pipelines
from kedro.framework.session import KedroSession
from kedro.pipeline import Node, Pipeline
from kedro.runner import ThreadRunner
from matplotlib.figure import Figure

from trading_rl import pipeline_registry
from trading_rl.pipelines.tracking import stream_to_mlflow

REPORTING = "metadata: {kedro-viz: {layer: reporting}}"
CATALOG = f"""
probe_metrics:
  type: trading_rl.integration.datasets.mlflow_metrics.PhaseMetricsDataset
  prefix: probe
  {REPORTING}
probe_report:
  type: json.JSONDataset
  filepath: data/08_reporting/probe_report.json
  {REPORTING}
probe_plot:
  type: matplotlib.MatplotlibDataset
  filepath: data/08_reporting/probe_plot.png
  {REPORTING}
"""
# Both nodes wait here until the other one runs too: the run is concurrent, not one node after the other.
meeting = threading.Barrier(2, timeout=30)
node_threads: list[str] = []


def _meet() -> None:
    meeting.wait()
    node_threads.append(threading.current_thread().name)


def train() -> tuple[dict, dict]:
    """A training node: curves streamed while it runs, final metrics through kedro-mlflow's dataset."""
    _meet()
    stream_to_mlflow("probe")({"train/loss": 0.5}, 10)
    return {"eval/sharpe": {"step": 10, "value": 1.0}}, {"sharpe": 1.0}


def report() -> tuple[Figure, dict]:
    """A reporting node: a figure and a gate report, logged by the project's ``after_dataset_saved``."""
    _meet()
    figure = Figure()  # not pyplot: its figure registry is not thread-safe
    figure.add_subplot().plot([1, 2, 3])
    return figure, {"passed": True, "training_gates": []}


def fail() -> None:
    _meet()
    stream_to_mlflow("probe")({"fail/loss": 2.0}, 1)
    raise RuntimeError("probe node failed")


def _probe_pipelines() -> dict[str, Pipeline]:
    trained = Node(train, None, ["probe_metrics", "probe_report"], name="train")
    reported = Node(report, None, ["probe_plot", "option_usage_report"], name="report")
    failing = Node(fail, None, "probe_never", name="fail")  # a node needs an input or an output
    return {
        name: Pipeline(nodes, namespace="probe", prefix_datasets_with_namespace=False)
        for name, nodes in {"probe": [trained, reported], "probe_failing": [trained, failing]}.items()
    }


@pytest.fixture
def probe_project(tmp_path, project_copy, monkeypatch):
    """A project copy with the probe catalog and the probe pipelines registered. Its MLflow store is
    the ci one (``sqlite:///data/ci/mlflow.db``), which MLflow may resolve to an earlier session's
    file in this process: the runs that count are the ones started since the fixture (ms, MLflow's clock)."""
    bootstrap()
    project = project_copy(tmp_path / "project")
    (project / "conf/ci/catalog_probe.yml").write_text(CATALOG)
    monkeypatch.setattr(pipeline_registry, "register_pipelines", _probe_pipelines)
    pipelines.configure("trading_rl.pipeline_registry")  # load the patched registry on the next access
    monkeypatch.chdir(project)
    meeting.reset()
    node_threads.clear()
    yield project, int(time.time() * 1000)
    pipelines.configure("trading_rl.pipeline_registry")  # the next access loads the real registry again


def _run_threaded(project, pipeline: str) -> None:
    with KedroSession.create(project_path=project, env="ci") as session:
        session.run(pipeline_names=[pipeline], runner=ThreadRunner())


def _only_run(started: int):
    """The one run started since ``started``: none started by a node thread that saw no active run."""
    client = mlflow.MlflowClient()
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    runs = [run for run in runs if run.info.start_time >= started]
    assert len(runs) == 1, [(r.info.run_name, r.info.status) for r in runs]
    return client, runs[0]


def _artifacts(client, run_id: str, folder: str | None = None) -> set[str]:
    paths: set[str] = set()
    for entry in client.list_artifacts(run_id, folder):
        paths |= _artifacts(client, run_id, entry.path) if entry.is_dir else {entry.path}
    return paths


def test_what_nodes_log_from_worker_threads_reaches_the_pipeline_run(probe_project):
    project, started = probe_project
    _run_threaded(project, "probe")

    assert len(set(node_threads)) == 2 and threading.main_thread().name not in node_threads
    client, run = _only_run(started)
    assert run.info.status == "FINISHED" and run.data.tags["runner"] == "ThreadRunner"
    assert mlflow.active_run() is None  # nothing left open in the main thread
    metrics = run.data.metrics
    assert metrics["probe/train/loss"] == 0.5  # streamed by the node itself
    assert metrics["probe/eval/sharpe"] == 1.0  # kedro-mlflow's metric dataset, saved in the node's thread
    assert metrics["gates/option_usage_report"] == 1.0 and run.data.tags["gate.option_usage_report"] == "passed"
    assert {"probe/reports/probe_report.json", "probe/plots/probe_plot.png"} <= _artifacts(client, run.info.run_id)
    # the project's node hooks saw the run from the worker threads: its tags, and the summary as description
    assert run.data.tags["trading_rl.seed"] == "42"
    assert "run summary" in run.data.tags["mlflow.note.content"]


def test_a_node_error_in_a_worker_thread_ends_the_pipeline_run_failed(probe_project):
    project, started = probe_project
    with pytest.raises(RuntimeError, match="probe node failed"):
        _run_threaded(project, "probe_failing")

    _, run = _only_run(started)
    assert run.info.status == "FAILED"
    assert mlflow.active_run() is None
    assert run.data.metrics["probe/fail/loss"] == 2.0  # logged by the failing node before it raised
    assert run.data.metrics["probe/train/loss"] == 0.5  # and by the one beside it
