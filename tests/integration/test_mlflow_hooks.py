"""MLflow conventions, checked through the MLflow client against a local store in tmp_path: run name
and tags, clean ``phase/metric`` keys without NaN, figures and reports as artifacts, one logged
model (with signature) per trained agent, and a registered version only when the gates passed."""

from __future__ import annotations

import logging
import math
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import mlflow  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from helpers.mlflow_store import empty_store
from kedro.framework.hooks.manager import _create_hook_manager  # noqa: E402
from kedro.io import DataCatalog  # noqa: E402
from kedro.pipeline import Node, Pipeline  # noqa: E402
from kedro.runner import SequentialRunner  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from trading_rl.integration.mlflow_hooks import MlflowConventionHooks  # noqa: E402
from trading_rl.integration.mlflow_tracking import metric_key, run_name  # noqa: E402

VERSION = "2030-01-01T00.00.00.000Z"


@pytest.fixture(scope="module")
def tracking(tmp_path_factory):
    """One local sqlite store for the module (creating one costs seconds); each test its own experiment."""
    store = tmp_path_factory.mktemp("mlruns")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(empty_store(store / "mlflow.db"))
    yield store
    mlflow.set_tracking_uri(previous)


@pytest.fixture(scope="module")
def agent():
    from stable_baselines3 import SAC

    return SAC(
        "MlpPolicy",
        "Pendulum-v1",
        learning_starts=0,
        buffer_size=100,
        policy_kwargs={"net_arch": [8]},
        device="cpu",
        seed=0,
    )


def _catalog(tmp_path, registered: str) -> DataCatalog:
    reporting = {"kedro-viz": {"layer": "reporting"}}
    config = {
        "agent_model": {
            "type": "trading_rl.integration.datasets.SB3ModelDataset",
            "filepath": str(tmp_path / "agent.zip"),
            "model_class": "stable_baselines3.SAC",
            "device": "cpu",
            "versioned": True,
            "metadata": {
                "kedro-viz": {"layer": "models"},
                "mlflow": {
                    "model": "agent",
                    "metrics": "sac_icm_evaluation_report",
                    "registered_model": registered,
                    "gates": ["agent_collapse_report", "validation_report"],
                },
            },
        },
        "agent_collapse_report": {
            "type": "json.JSONDataset",
            "filepath": str(tmp_path / "collapse.json"),
            "metadata": reporting,
        },
        "validation_report": {
            "type": "json.JSONDataset",
            "filepath": str(tmp_path / "validation.json"),
            "metadata": reporting,
        },
        "agent_metrics": {
            "type": "trading_rl.integration.datasets.mlflow_metrics.PhaseMetricsDataset",
            "prefix": "sac_icm",
            "metadata": reporting,
        },
        "agent_plot": {
            "type": "matplotlib.MatplotlibDataset",
            "filepath": str(tmp_path / "plot.png"),
            "metadata": reporting,
        },
        # a figure per file name (a tearsheet's PNGs): one artifact each, no JSON of figure reprs; the
        # project's dataset keeps what it wrote, so the artifact is that file, drawn once
        "agent_tearsheet_plot": {
            "type": "trading_rl.integration.datasets.RenderedFiguresDataset",
            "filepath": str(tmp_path / "tearsheet_plot"),
            "metadata": reporting,
        },
        "agent_tearsheet": {"type": "text.TextDataset", "filepath": str(tmp_path / "t.html"), "metadata": reporting},
        "sac_icm_evaluation_report": {
            "type": "json.JSONDataset",
            "filepath": str(tmp_path / "evaluation.json"),
            "metadata": reporting,
        },
    }
    catalog = DataCatalog.from_config(config, save_version=VERSION)
    catalog["params:env_construction"] = {"symbol": "GOOGL"}
    catalog["run_metadata"] = {"seed": 1, "save_version": VERSION}
    return catalog


def _figure(label: str = ""):
    figure, axis = plt.subplots()
    figure.set_label(label)
    axis.plot([1, 2, 3])
    return figure


def _run(tmp_path, agent, registered: str, collapsed: bool, validation_passed: bool | None):
    """A run as `kedro run` makes it: kedro-mlflow's open run, the project hook, the runner
    (``validation_passed=None``: a run without the validation phase)."""
    experiment = mlflow.create_experiment(registered, artifact_location=(tmp_path / "artifacts").as_uri())
    metrics = {
        "train/actor_loss": [{"step": 10, "value": 1.5}, {"step": 20, "value": float("nan")}],
        "eval/sharpe": {"step": 20, "value": float("inf")},
        "sac_icm/eval/total_return": {"step": 20, "value": 0.1},
    }
    evaluation = {"agent": "agent", "metrics": {"sharpe": 0.7, "total_return": 0.05}, "baselines": {}}
    nodes = [
        Node(lambda: agent, None, "agent_model", name="train"),
        Node(
            lambda: (
                {"collapsed": collapsed},
                metrics,
                _figure(),
                {"sp500_validation.png": _figure("tearsheet")},
                "<html>page</html>",
                evaluation,
            ),
            None,
            [
                "agent_collapse_report",
                "agent_metrics",
                "agent_plot",
                "agent_tearsheet_plot",
                "agent_tearsheet",
                "sac_icm_evaluation_report",
            ],
            name="evaluate",
        ),
    ]
    if validation_passed is not None:
        nodes.append(
            Node(
                lambda: {
                    "passed": validation_passed,
                    "failed": [] if validation_passed else ["sharpe"],
                    "gates": {"sharpe": {"value": 0.1, "comparison": ">=", "threshold": 0.5}},
                },
                None,
                "validation_report",
                name="validate",
            )
        )
    pipeline = Pipeline(nodes, namespace="sac_icm", prefix_datasets_with_namespace=False)
    hooks = MlflowConventionHooks()
    hook_manager = _create_hook_manager()
    hook_manager.register(hooks)
    catalog = _catalog(tmp_path, registered)
    with mlflow.start_run(experiment_id=experiment) as run:
        hooks.after_catalog_created(catalog=catalog, save_version=VERSION)
        hooks.before_pipeline_run(
            run_params={"pipeline_names": ["sac_icm"], "env": "ci"}, pipeline=pipeline, catalog=catalog
        )
        SequentialRunner().run(pipeline, catalog, hook_manager)
        hooks.after_pipeline_run()
    return mlflow.MlflowClient(), run.info.run_id


@pytest.mark.slow
def test_a_run_whose_gates_passed_logs_clean_metrics_artifacts_and_a_registered_model(
    tmp_path, tracking, agent, monkeypatch
):
    registered = "passing_agent"
    drawn: Counter[str] = Counter()
    savefig = Figure.savefig

    def counted_savefig(figure, *args, **kwargs):
        drawn[figure.get_label()] += 1
        return savefig(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", counted_savefig)
    client, run_id = _run(tmp_path, agent, registered, collapsed=False, validation_passed=True)
    assert drawn["tearsheet"] == 1  # saved and logged from one drawing
    run = client.get_run(run_id)

    assert run.info.run_name == run_name(["sac_icm"], "GOOGL", VERSION)
    assert run.data.tags["trading_rl.symbol"] == "GOOGL" and run.data.tags["trading_rl.env"] == "ci"

    assert run.data.tags["runner"] == "SequentialRunner" and run.data.tags["gate.validation_report"] == "passed"
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # the UI's training view
    assert set(run.data.metrics) == {
        "sac_icm/train/actor_loss",
        "sac_icm/eval/total_return",  # inf dropped
        "gates/validation_report",  # 1: passed
        "models/agent/sharpe",  # the model's own evaluation, linked to it
        "models/agent/total_return",
    }
    assert run.data.metrics["gates/validation_report"] == 1.0
    history = client.get_metric_history(run_id, "sac_icm/train/actor_loss")
    assert [(m.step, m.value) for m in history] == [(10, 1.5)]  # the NaN point is not logged
    assert all(math.isfinite(v) for v in run.data.metrics.values())

    artifacts = {
        a.path
        for folder in ("sac_icm/plots", "sac_icm/reports", "sac_icm/tearsheets", "gates")
        for a in client.list_artifacts(run_id, folder)
    }
    assert {
        "sac_icm/plots/agent_plot.png",
        "sac_icm/reports/agent_collapse_report.json",
        "sac_icm/reports/validation_report.json",
        "sac_icm/plots/agent_tearsheet_plot_sp500_validation.png",
        "sac_icm/tearsheets/agent_tearsheet.html",
        f"gates/{registered}.json",
    } <= artifacts
    assert not any(path.endswith(".png.png") or "tearsheet_plot.json" in path for path in artifacts)
    artifact = "sac_icm/plots/agent_tearsheet_plot_sp500_validation.png"
    logged = Path(client.download_artifacts(run_id, artifact, tmp_path))
    assert logged.read_bytes() == (tmp_path / "tearsheet_plot" / "sp500_validation.png").read_bytes()

    models = mlflow.search_logged_models(experiment_ids=[run.info.experiment_id], output_format="list")
    assert [m.name for m in models] == ["agent"]  # one logged model per trained agent
    assert {m.key: m.value for m in models[0].metrics} == {
        "models/agent/sharpe": 0.7,
        "models/agent/total_return": 0.05,
    }
    loaded = mlflow.pyfunc.load_model(models[0].model_uri)
    inputs = loaded.metadata.get_input_schema().inputs
    assert inputs[0].shape == (-1, *agent.observation_space.shape)
    actions = loaded.predict(np.zeros((2, *agent.observation_space.shape), dtype=np.float32))
    assert actions.shape == (2, *agent.action_space.shape)

    versions = client.search_model_versions(f"name='{registered}'")
    assert len(versions) == 1
    assert versions[0].tags["gate_report"] == f"runs:/{run_id}/gates/{registered}.json"
    assert versions[0].tags["gate.validation_report"] == "passed"


@pytest.mark.slow
@pytest.mark.parametrize(("collapsed", "validation_passed"), [(True, True), (False, False)])
def test_no_registered_version_when_a_gate_failed(tmp_path, tracking, agent, caplog, collapsed, validation_passed):
    registered = f"failing_agent_{collapsed}_{validation_passed}"
    with caplog.at_level(logging.WARNING, logger="trading_rl.integration.mlflow_hooks"):
        client, run_id = _run(tmp_path, agent, registered, collapsed=collapsed, validation_passed=validation_passed)
    assert client.search_model_versions(f"name='{registered}'") == []
    models = mlflow.search_logged_models(
        experiment_ids=[client.get_run(run_id).info.experiment_id], output_format="list"
    )
    assert [m.name for m in models] == ["agent"]  # still logged, only not registered
    failed = "agent_collapse_report collapsed" if collapsed else "validation_report failed: sharpe"
    assert any(failed in record.getMessage() for record in caplog.records)


@pytest.mark.slow
def test_a_run_without_the_validation_phase_registers_nothing_and_says_so_at_info(tmp_path, tracking, agent, caplog):
    registered = "agent_without_validation"
    with caplog.at_level(logging.INFO, logger="trading_rl.integration.mlflow_hooks"):
        client, _ = _run(tmp_path, agent, registered, collapsed=False, validation_passed=None)
    assert client.search_model_versions(f"name='{registered}'") == []
    [record] = [r for r in caplog.records if "not registered" in r.getMessage()]
    assert record.levelno == logging.INFO and "validation_report not produced by this run" in record.getMessage()


def test_metric_keys_get_the_phase_once():
    assert metric_key("sac_icm", "train/actor_loss") == "sac_icm/train/actor_loss"
    assert metric_key("sac_icm", "sac_icm/eval/sharpe") == "sac_icm/eval/sharpe"
    assert metric_key("", "sharpe") == "sharpe"


@pytest.mark.slow
def test_a_folder_of_agents_is_logged_as_one_model_per_agent(tmp_path, tracking, agent):
    experiment = mlflow.create_experiment("folder", artifact_location=(tmp_path / "artifacts").as_uri())
    catalog = DataCatalog.from_config(
        {"agents": {"type": "MemoryDataset", "metadata": {"mlflow": {"model": "fine_tuned"}}}}
    )
    hooks = MlflowConventionHooks()
    hooks.after_catalog_created(catalog=catalog, save_version=VERSION)
    node = Node(lambda: None, None, "agents", name="fine_tune", namespace="checkpoint_migration")
    with mlflow.start_run(experiment_id=experiment):
        hooks.after_dataset_saved(dataset_name="agents", data={"sp500.zip": agent, "nasdaq.zip": agent}, node=node)
    models = mlflow.search_logged_models(experiment_ids=[experiment], output_format="list")
    assert sorted(m.name for m in models) == ["fine_tuned_nasdaq", "fine_tuned_sp500"]


def test_only_a_parallel_runner_is_told_what_mlflow_leaves_out(tmp_path, tracking, caplog):
    """Worker processes keep what the project's hooks collect (one warning at the start); threads log
    to the run like the main thread (``test_mlflow_threads.py``), so ``ThreadRunner`` is not warned."""
    experiment = mlflow.create_experiment("runners", artifact_location=(tmp_path / "artifacts").as_uri())
    pipeline = Pipeline([Node(lambda: 1, None, "x", name="n")])
    hooks = MlflowConventionHooks()
    hooks.after_catalog_created(catalog=DataCatalog(), save_version=VERSION)
    with mlflow.start_run(experiment_id=experiment):
        for runner, warned in (
            ("<kedro.runner.parallel_runner.ParallelRunner object at 0x7f>", True),
            ("<kedro.runner.thread_runner.ThreadRunner object at 0x7f>", False),
            (None, False),
        ):
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="trading_rl.integration.mlflow_hooks"):
                hooks.before_pipeline_run(
                    run_params={"pipeline_names": ["x"], "runner": runner}, pipeline=pipeline, catalog=DataCatalog()
                )
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == warned, (runner, warnings)
            if warned:
                assert warnings[0].startswith("--runner ParallelRunner: ") and "none is registered" in warnings[0]
