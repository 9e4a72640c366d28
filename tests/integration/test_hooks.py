"""Project hooks: every run ends with a summary; failed gates follow at WARNING, named."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.gates import gate_sections
from kedro.framework.hooks.manager import _create_hook_manager
from kedro.io import DataCatalog, Version
from kedro.pipeline import Node, Pipeline
from kedro.runner import SequentialRunner

from trading_rl import settings
from trading_rl.evaluation.reporting.tearsheet import EMPTY_PAGE_MARK
from trading_rl.evaluation.validation.gates import evaluate_gates
from trading_rl.integration.hooks import RunSummaryHooks
from trading_rl.pipelines.typed_node import typed_node
from trading_rl.pipelines.validation.nodes import enforce_gates

# The summary hook names the run's MLflow runs through the process-wide tracking URI.
pytestmark = pytest.mark.usefixtures("own_mlflow_store")

GATES = {
    "max_drawdown": {"metric": "max_drawdown_median", "comparison": "<", "threshold": 0.15},
    "sharpe": {"metric": "sharpe_median", "comparison": ">", "threshold": 0.5},
}
IDLE = {"windows": 9.0, "idle_windows": 9.0, "max_drawdown_median": None, "sharpe_median": None}
NAMED = "validation gates failed: max_drawdown (agent never traded in 9 of 9 windows"


def _run(report: dict, with_validation: bool = True) -> None:
    """A run like ``kedro run``: the runner fires the node hooks, the session ``after_pipeline_run``."""
    hook_manager = _create_hook_manager()
    hook_manager.register(RunSummaryHooks())
    nodes = [Node(lambda: "done", inputs=None, outputs="other", name="later_node")]
    if with_validation:
        nodes += [
            Node(lambda: report, inputs=None, outputs="validation_report", name="build_validation_report"),
            typed_node(
                enforce_gates,
                inputs=["validation_report", "comparison", "params:validation"],
                outputs=None,
                name="enforce_validation_gates",
            ),
        ]
    pipeline = Pipeline(nodes)
    catalog = DataCatalog()
    catalog["comparison"] = {}
    catalog["params:validation"] = {
        "primary_agent": "sac_icm",
        "gates": GATES,
        "fail_on_gate": False,
        "comparison": {"tolerance": 0.05},
    }
    hook_manager.hook.before_pipeline_run(run_params={}, pipeline=pipeline, catalog=catalog)
    SequentialRunner().run(pipeline, catalog, hook_manager)
    logging.getLogger("trading_rl.other").info("a node logs after the gates")
    hook_manager.hook.after_pipeline_run(run_params={}, run_result={}, pipeline=pipeline, catalog=catalog)


def test_failed_gates_are_warned_by_the_node_and_again_as_the_last_line_of_the_run(caplog):
    with caplog.at_level(logging.INFO):
        _run(evaluate_gates(IDLE, gate_sections(GATES)))
    last = caplog.records[-1]
    assert last.levelno == logging.WARNING and last.name == "trading_rl.integration.hooks"
    assert NAMED in last.getMessage() and "sharpe ('sharpe_median' is undefined)" in last.getMessage()
    from_node = [r for r in caplog.records if r.name == "trading_rl.pipelines.validation.nodes"]
    assert [r.levelno for r in from_node] == [logging.WARNING] and NAMED in from_node[0].getMessage()


def test_passing_gates_and_runs_without_validation_say_nothing(caplog):
    passing = evaluate_gates({"max_drawdown_median": 0.05, "sharpe_median": 1.0}, gate_sections(GATES))
    with caplog.at_level(logging.INFO):
        _run(passing)
        _run(evaluate_gates(IDLE, gate_sections(GATES)), with_validation=False)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_hook_is_registered_in_the_project_settings():
    assert any(isinstance(hook, RunSummaryHooks) for hook in settings.HOOKS)


SAC_ICM_REPORT = {
    "agent": "sac_icm",
    "metrics": {"sharpe": 1.234, "total_return": 0.051, "max_drawdown": -0.021},
    "baselines": {
        "buy_and_hold": {"sharpe": 0.5, "total_return": 0.02, "max_drawdown": -0.03},
        "random": {"sharpe": -0.7, "total_return": -0.01, "max_drawdown": -0.04},
    },
}
COLLAPSED = {
    "agent": "sac_icm",
    "collapsed": True,
    "deterministic": {
        "collapsed": True,
        "gates": [{"gate": "dominance", "passed": False}, {"gate": "entropy", "passed": True}],
    },
    "stochastic": {"collapsed": False, "gates": []},
}


def test_summary_names_agents_baselines_gates_mlflow_run_and_written_tearsheet(tmp_path, caplog, monkeypatch):
    import mlflow
    from kedro_datasets.text import TextDataset

    active = SimpleNamespace(info=SimpleNamespace(run_id="0123abcd", experiment_id="7"))
    monkeypatch.setattr(mlflow, "active_run", lambda: active)  # as kedro-mlflow leaves it during the nodes
    hooks = RunSummaryHooks()
    hook_manager = _create_hook_manager()
    hook_manager.register(hooks)
    catalog = DataCatalog(save_version="2026-11-26T10.00.00.000Z")
    catalog["sac_icm_tearsheet"] = TextDataset(
        filepath=str(tmp_path / "08_reporting/sac_icm_tearsheet.html"),
        version=Version(None, "2026-11-26T10.00.00.000Z"),
    )
    # unversioned, like the staging file of an MLflow artifact: not listed, and no error
    catalog["staging_plot"] = TextDataset(filepath=str(tmp_path / "08_reporting/mlflow_staging/plot.txt"))
    # a phase with nothing to show (forward without new bars): its page is not listed as a tearsheet
    catalog["forward_tearsheet"] = TextDataset(
        filepath=str(tmp_path / "08_reporting/forward_tearsheet.html"),
        version=Version(None, "2026-11-26T10.00.00.000Z"),
    )
    pipeline = Pipeline(
        [
            Node(
                lambda: (SAC_ICM_REPORT, COLLAPSED, "<html></html>", "x", f"<html>{EMPTY_PAGE_MARK}</html>"),
                inputs=None,
                outputs=[
                    "sac_icm_evaluation_report",
                    "sac_icm_collapse_report",
                    "sac_icm_tearsheet",
                    "staging_plot",
                    "forward_tearsheet",
                ],
                name="evaluate_sac_icm",
            ),
        ]
    )
    hook_manager.hook.before_pipeline_run(run_params={}, pipeline=pipeline, catalog=catalog)
    with caplog.at_level(logging.INFO):
        SequentialRunner().run(pipeline, catalog, hook_manager)
    monkeypatch.setattr(mlflow, "active_run", lambda: None)  # kedro-mlflow closes it before this hook
    with caplog.at_level(logging.INFO):
        hook_manager.hook.after_pipeline_run(run_params={}, run_result={}, pipeline=pipeline, catalog=catalog)
    summary = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("run summary"))
    row = next(line for line in summary.splitlines() if line.startswith("sac_icm "))
    assert "1.23 / 5.1% / -2.1%" in row and "0.50 / 2.0% / -3.0%" in row and "-0.70 / -1.0% / -4.0%" in row
    assert "COLLAPSED" in row
    assert any(
        line.split()[:4] == ["sac_icm", "sac_icm_collapse_report", "FAILED", "deterministic:"]
        for line in summary.splitlines()
    )
    assert "mlflow: run 0123abcd" in summary and "http://127.0.0.1:5000/#/experiments/7/runs/0123abcd" in summary
    written = tmp_path / "08_reporting/sac_icm_tearsheet.html/2026-11-26T10.00.00.000Z/sac_icm_tearsheet.html"
    assert written.is_file() and f"tearsheets:\n  {written}" in summary
    assert "mlflow_staging" not in summary and "forward_tearsheet" not in summary
    last = caplog.records[-1]
    assert last.levelno == logging.WARNING and "sac_icm gates failed: deterministic: dominance" in last.getMessage()


def test_a_run_summary_over_mlflows_tag_limit_arrives_whole_as_an_artifact(tmp_path):
    """The summary was only the run's description, a tag that MLflow cut at 8,000 characters."""
    import mlflow
    from helpers.mlflow_store import empty_store
    from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

    from trading_rl.integration.hooks import SUMMARY_ARTIFACT

    client = mlflow.MlflowClient(empty_store(tmp_path / "mlflow.db"))
    experiment = client.create_experiment("summary", artifact_location=(tmp_path / "artifacts").as_uri())
    summaries = {
        "long": "run summary\n" + "\n".join(f"| row {index:05d} | {'x' * 60} |" for index in range(400)),
        "short": "run summary\n| one row |",
    }
    hooks = RunSummaryHooks()
    for kind, summary in summaries.items():
        run_id = client.create_run(experiment).info.run_id
        client.set_terminated(run_id)  # the summary is written after kedro-mlflow ended the run
        hooks._runs = {run_id: "a run"}
        previous_uri = mlflow.get_tracking_uri()
        mlflow.set_tracking_uri(client.tracking_uri)
        try:
            hooks._describe_runs(summary)
        finally:
            mlflow.set_tracking_uri(previous_uri)
        artifact = Path(client.download_artifacts(run_id, SUMMARY_ARTIFACT, str(tmp_path / kind)))
        assert artifact.read_text() == summary
        description = client.get_run(run_id).data.tags["mlflow.note.content"]
        assert len(description) <= MAX_TAG_VAL_LENGTH
        if kind == "long":
            assert len(summary) > MAX_TAG_VAL_LENGTH and description.startswith("```\nrun summary\n| row 00000")
            assert f"is the run's artifact {SUMMARY_ARTIFACT}" in description
        else:
            assert description == f"```\n{summary}\n```"
