"""Live feedback while training: one INFO line per evaluation, a progress bar only on a terminal,
and metrics streamed to MLflow with their steps (episode reward included, no NaN)."""

import io
import logging
import math

import pytest
from helpers.mlflow_store import empty_store
from helpers.sac_icm_toy import ToyTradingEnv, toy_agent

from trading_rl.pipelines.tracking import stream_to_mlflow
from trading_rl.training.loop import progress_bar_enabled, train_agent
from trading_rl.training.params import AgentParams


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_auto_follows_the_terminal(monkeypatch):
    monkeypatch.setattr("sys.stdout", io.StringIO())
    assert progress_bar_enabled("auto") is False and progress_bar_enabled(None) is False
    assert progress_bar_enabled(True) is True and progress_bar_enabled(False) is False
    monkeypatch.setattr("sys.stdout", _Terminal())
    assert progress_bar_enabled("auto") is True
    with pytest.raises(ValueError, match="'progress_bar' must be true, false or auto, got 'yes'"):
        progress_bar_enabled("yes")


def test_every_evaluation_logs_one_info_line(tmp_path, caplog):
    model, params = toy_agent(seed=1, total_timesteps=200)
    with caplog.at_level(logging.INFO, logger="trading_rl.training.loop"):
        outcome = train_agent(
            model,
            ToyTradingEnv,
            AgentParams.from_mapping(params, "sac_icm.agent"),
            tmp_path,
            periods_per_year=252.0,
            phase="toy",
            symbol="TOY",
        )
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("evaluation at step")]
    assert [line.split(":")[0] for line in lines] == ["evaluation at step 100/200", "evaluation at step 200/200"]
    final = outcome.history[-1]
    assert (
        f"sharpe {final['eval/sharpe']:.2f}" in lines[-1]
        and f"entropy {final['collapse_det/entropy']:.2f}" in lines[-1]
    )
    for word in ("return ", "dominance ", "collapsed ", "elapsed 0:00:", "ETA 0:00:00"):
        assert word in lines[-1], word
    assert outcome.history[-1]["train/episode_reward"] == pytest.approx(
        sum(info["r"] for info in model.ep_info_buffer) / len(model.ep_info_buffer)
    )


@pytest.mark.slow
def test_training_metrics_reach_mlflow_with_their_steps(tmp_path):
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = empty_store(tmp_path / "mlflow.db")
    mlflow.set_tracking_uri(uri)
    # Its own experiment: an earlier Kedro session in this process may have left another active.
    mlflow.set_experiment("live_feedback")
    try:
        model, params = toy_agent(seed=1, total_timesteps=200)
        with mlflow.start_run() as run:
            train_agent(
                model,
                ToyTradingEnv,
                AgentParams.from_mapping(params, "sac_icm.agent"),
                tmp_path / "work",
                metrics_callback=stream_to_mlflow("sac_icm"),
                periods_per_year=252.0,
                phase="toy",
                symbol="TOY",
            )
        client = MlflowClient(uri)
        keys = set(client.get_run(run.info.run_id).data.metrics)
        assert {"sac_icm/eval/sharpe", "sac_icm/train/episode_reward", "sac_icm/collapse_det/entropy"} <= keys
        for key in keys:
            history = client.get_metric_history(run.info.run_id, key)
            assert all(math.isfinite(point.value) for point in history), key
        assert [p.step for p in client.get_metric_history(run.info.run_id, "sac_icm/eval/sharpe")] == [100, 200]
    finally:
        mlflow.set_tracking_uri("")
