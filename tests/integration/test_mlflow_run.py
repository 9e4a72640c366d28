"""A real default `kedro run --env ci` (every phase of ``__default__``, the ``ci_default_run`` fixture's,
which the end-to-end serve test shares) queried through the MLflow API:
one logged model per trained agent, every phase's training metrics logged with their steps, once, no
NaN, every parameter section parsed once, and every value a node reads logged as a parameter.
(The hook-level conventions and the gated registration: ``test_mlflow_hooks.py``.)"""

from __future__ import annotations

import json
import math
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from helpers.kedro_project import bootstrap
from kedro.framework.project import pipelines

from trading_rl.integration.parameter_sections import SECTIONS

SYMBOLS = ("sp500", "nasdaq")  # conf/ci/parameters_feature_extraction.yml


@pytest.fixture
def run_store(ci_default_run):
    """A client of the run's store, which is the process's tracking URI meanwhile: MLflow lists a
    run's logged-model artifacts through the latter whatever client asks."""
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(ci_default_run.tracking_uri)
    yield mlflow.MlflowClient(ci_default_run.tracking_uri)
    mlflow.set_tracking_uri(previous)


@pytest.mark.slow
def test_a_default_run_parses_each_section_once_and_logs_one_model_per_trained_agent(
    ci_default_run, run_store, tmp_path
):
    project, parses, client = ci_default_run.project, ci_default_run.parses, run_store
    run = client.get_run(ci_default_run.run_id)

    # every section the default run reads was parsed once, by the run's parameter check (the nodes got
    # it typed; kedro-mlflow logged its resolved values)
    bootstrap()  # the pipeline registry
    read = {name.removeprefix("params:") for name in pipelines["__default__"].inputs()} & set(SECTIONS)
    assert len(read) == 15 and read <= set(parses) and set(parses.values()) == {1}, parses
    # a value conf/ leaves to the code is logged as the run used it
    assert run.data.params["sac_icm.agent.sac.gamma"] == "0.99"
    assert "gamma" not in (project / "conf/base/parameters_sac_icm.yml").read_text()

    # ci walk_forward: 2 seeds x 2 folds in one chain (retrain_frequency 2), per symbol
    chains = [f"{symbol}_sac_icm_seed{seed}_folds0-1" for symbol in SYMBOLS for seed in (0, 1)]
    models = [m for m in client.search_logged_models([run.info.experiment_id]) if m.source_run_id == run.info.run_id]
    trained = ["sac_icm", "options_her", "reward_shaped", "migrated_sp500", "sac_icm_model_onnx", "sac_icm_served"]
    assert sorted(m.name for m in models) == sorted([*trained, *(f"walk_forward_{c}" for c in chains)])

    def steps(key: str) -> list[int]:
        return [point.step for point in client.get_metric_history(run.info.run_id, key)]

    # streamed while training ran (sac_icm: every eval_freq; options_her: every log_freq), each step once
    evaluations = steps("sac_icm/eval/total_return")
    assert evaluations and evaluations == sorted(set(evaluations))
    assert steps("options_her/train/temperature") == [100, 200, 300]
    assert steps("options_her/train/episode_reward") == [60, 120, 180, 240, 300]  # 60-bar episodes
    # walk-forward: per chain, one point per fold at the env steps trained so far (150, then +50)
    for chain in chains:
        assert steps(f"walk_forward/{chain}/test/total_return") == [150, 200]
    for key in run.data.metrics:
        assert all(math.isfinite(point.value) for point in client.get_metric_history(run.info.run_id, key)), key

    # MLflow as the hub: each model carries its own evaluation and no other phase's metrics
    by_name = {m.name: {metric.key for metric in m.metrics or []} for m in models}
    # (ci agents rarely trade: an undefined Sharpe is not logged, the return and drawdown always are)
    assert {"models/sac_icm/total_return", "models/sac_icm/max_drawdown"} <= by_name["sac_icm"]
    assert {"models/options_her/total_return"} <= by_name["options_her"]
    for name, keys in by_name.items():
        assert all(key.startswith(f"models/{name}/") for key in keys), (name, keys)
    # each walk-forward chain's model carries the medians over its own test windows (folds.csv)
    folds = pd.read_csv(sorted((project / "data/08_reporting/walk_forward/folds.csv").rglob("*.csv"))[-1])
    for chain in chains:
        symbol, seed = chain.split("_")[0], int(chain.split("seed")[1][0])
        rows = folds[(folds["symbol"] == symbol) & (folds["agent"] == "sac_icm") & (folds["seed"] == seed)]
        keys = by_name[f"walk_forward_{chain}"]
        assert {"total_return", "max_drawdown", "sharpe", "n_windows"} == {k.rsplit("/", 1)[1] for k in keys}
        metric = f"models/walk_forward_{chain}/total_return"
        assert run.data.metrics[metric] == pytest.approx(rows["total_return"].median())
        assert run.data.metrics[f"models/walk_forward_{chain}/n_windows"] == 2.0
    evaluation = json.loads(
        sorted((project / "data/08_reporting/sac_icm_evaluation_report.json").rglob("*.json"))[-1].read_text()
    )
    assert run.data.metrics["models/sac_icm/total_return"] == pytest.approx(evaluation["metrics"]["total_return"])
    # one point per step: no duplicate metric points
    for key in ("sac_icm/final/total_return", "models/sac_icm/total_return", "sac_icm/eval/total_return"):
        history = [point.step for point in client.get_metric_history(run.info.run_id, key)]
        assert history and len(history) == len(set(history)), (key, history)
    # gates as tags (filterable) and metrics
    tags = run.data.tags
    for gate in ("sac_icm_collapse_report", "option_usage_report"):
        assert tags[f"gate.{gate}"] in {"passed", "FAILED"}
        assert run.data.metrics[f"gates/{gate}"] == (1.0 if tags[f"gate.{gate}"] == "passed" else 0.0)
    verdict = tags["gate.sac_icm_collapse_report"]
    filtered = client.search_runs([run.info.experiment_id], f"tags.`gate.sac_icm_collapse_report` = '{verdict}'")
    assert run.info.run_id in [r.info.run_id for r in filtered]
    assert all(r.data.tags["gate.sac_icm_collapse_report"] == verdict for r in filtered)
    # tags, name and description
    assert (tags["trading_rl.env"], tags["runner"]) == ("ci", "SequentialRunner")
    assert run.info.run_name.startswith("__default__ · sp500 · ")
    assert "run summary" in tags["mlflow.note.content"]  # the summary table as the run's description
    assert client.get_experiment(run.info.experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"
    # HTML tearsheets as artifacts, no `.png.png`, no JSON of figure reprs
    artifacts = _artifact_paths(client, run.info.run_id)
    for phase in ("sac_icm", "options_her", "walk_forward"):
        assert f"{phase}/tearsheets/{phase}_tearsheet.html" in artifacts
    assert not [path for path in artifacts if path.endswith(".png.png")]
    # each tearsheet page's PNG is the file saved in data/, byte for byte (drawn once, not again for MLflow)
    saved = {path.read_bytes() for path in (project / "data/08_reporting/sac_icm_tearsheet").rglob("*.png")}
    logged = [path for path in artifacts if path.startswith("sac_icm/plots/sac_icm_tearsheet_plot")]
    assert saved and len(logged) == len(saved)
    for path in logged:
        assert Path(client.download_artifacts(run.info.run_id, path, str(tmp_path))).read_bytes() in saved, path
    for path in (p for p in artifacts if p.endswith(".json")):
        assert "Figure(" not in Path(client.download_artifacts(run.info.run_id, path, str(tmp_path))).read_text(), path


def _artifact_paths(client, run_id: str, folder: str | None = None) -> list[str]:
    paths = []
    for entry in client.list_artifacts(run_id, folder):
        paths += _artifact_paths(client, run_id, entry.path) if entry.is_dir else [entry.path]
    return paths
