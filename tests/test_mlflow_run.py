"""A real `kedro run` (ci budgets) queried through the MLflow API: one logged model per trained agent
of the phases it ran, and every phase's training metrics logged with their steps, once, no NaN.
(The hook-level conventions and the gated registration: ``test_mlflow_hooks.py``.)"""

from __future__ import annotations

import math
import os
import shutil

import mlflow
import pytest

SYMBOLS = ("sp500", "nasdaq")  # conf/ci/parameters_feature_extraction.yml


@pytest.mark.slow
def test_a_run_logs_one_model_per_trained_agent_and_every_phase_metrics_with_steps(
    foundation_project, kedro_run, tmp_path
):
    project = tmp_path / "project"
    shutil.copytree(foundation_project, project, ignore=shutil.ignore_patterns("mlflow.db", "mlartifacts"))
    cwd = os.getcwd()
    os.chdir(project)
    try:
        kedro_run(project, ["sac_icm", "options_her", "walk_forward"])
        # The store the run went to: MLflow keeps one store per URI in a process, and the
        # project's relative `sqlite:///mlflow.db` may already name an earlier session's file.
        client, run = mlflow.MlflowClient(), mlflow.last_active_run()
    finally:
        os.chdir(cwd)

    # ci walk_forward: 2 seeds x 2 folds in one chain (retrain_frequency 2), per symbol
    chains = [f"{symbol}_sac_icm_seed{seed}_folds0-1" for symbol in SYMBOLS for seed in (0, 1)]
    models = [m for m in client.search_logged_models([run.info.experiment_id]) if m.source_run_id == run.info.run_id]
    assert sorted(m.name for m in models) == sorted(["sac_icm", "options_her", *(f"walk_forward_{c}" for c in chains)])

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
