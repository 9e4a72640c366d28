"""The options_her pipeline on an in-memory catalog with a tiny budget."""

import pytest
import torch
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from tearsheet_inputs import tearsheet_inputs

from trading_rl.agents.hierarchical import HierarchicalAgent
from trading_rl.agents.sac_icm import build_agent
from trading_rl.data import load_prices
from trading_rl.envs import build_env_spec
from trading_rl.evaluation.tearsheet import PANELS
from trading_rl.features import apply_scaler, compute_features, fit_scaler, make_splits
from trading_rl.pipelines.options_her import create_pipeline
from trading_rl.pipelines.options_her.nodes import evaluate_options_her

torch.set_num_threads(1)

PARAMS = {
    "device": "cpu",
    "env_overrides": {"allow_short": True, "smoothing_window": 1, "episode_length": 50},
    "controller": {"hidden_dim": 16, "warmup_steps": 20, "batch_size": 8, "buffer_size": 500},
    "sac": {"learning_starts": 60, "batch_size": 16, "buffer_size": 2000},
    "training": {"total_timesteps": 120, "log_freq": 40},
    "evaluation": {"goal_episodes": 2},
}


class KeptDataset(MemoryDataset):
    """Keeps its data after the runner releases it, so the test can read intermediate outputs."""

    def _release(self) -> None:
        pass


def _spec_and_scaler():
    prices = load_prices("sp500").iloc[:800]
    features = compute_features(prices, {"garch": None}).dropna()
    splits = make_splits(features.index, {"train_fraction": 0.6, "validation_fraction": 0.2})
    scaler = fit_scaler(features.loc[: splits["train"]["end"]])
    spec = build_env_spec(
        "sp500", prices.loc[features.index], apply_scaler(features, scaler), splits, {}, 252.0, feature_scaler=scaler
    )
    return spec, scaler


@pytest.mark.slow
def test_pipeline_trains_and_reports():
    spec, scaler = _spec_and_scaler()
    source = build_agent(spec.make_env("train"), {"policy": {"net_arch": [16, 16]}}, seed=0, device="cpu")
    catalog = DataCatalog(
        {
            "env_spec": MemoryDataset(spec),
            "sac_icm_model": MemoryDataset(source, copy_mode="assign"),
            "params:options_her": MemoryDataset(PARAMS),
            "params:seed": MemoryDataset(3),
            **tearsheet_inputs(),
        }
    )
    for name in ("options_her_model", "options_her_metrics", "options_her_training",
                 "option_usage_report", "her_report", "options_her_evaluation",
                 "options_her_rollout", "options_her_tearsheet_plot", "options_her_tearsheet"):
        catalog[name] = KeptDataset(copy_mode="assign")
    SequentialRunner().run(create_pipeline(), catalog)
    agent = catalog.load("options_her_model")
    assert isinstance(agent, HierarchicalAgent) and agent.uses_options and agent.her is not None
    # the options measure the trend from a zero 20-bar return, placed by the spec's feature scaler
    assert agent.trend_zero == pytest.approx(-scaler["center"]["ret_20"] / scaler["scale"]["ret_20"])
    assert agent.trend_zero != 0.0
    usage = catalog.load("option_usage_report")
    assert {row["gate"] for row in usage["training_gates"]} >= {"max_usage", "avg_duration"}
    assert usage["final_controller"]["temperature"] < 1.0
    her = catalog.load("her_report")
    assert her["relabelled_fraction"] == 0.8 and her["episodes"] == 2
    assert set(her["control"]) >= {"goal_achievement_rate"} and len(her["achievement_difference_ci"]) == 2
    evaluation = catalog.load("options_her_evaluation")
    assert {"buy_and_hold", "cash"} <= set(evaluation["baselines"]) and "sharpe" in evaluation["agent"]
    metrics = catalog.load("options_her_metrics")
    assert [point["step"] for point in metrics["temperature"]] == [40, 80, 120]
    rollout = catalog.load("options_her_rollout")
    agent_rows = rollout[rollout["agent"] == "options_her"]
    assert len(agent_rows) == evaluation["agent"]["n_steps"]
    assert agent_rows["equity_index"].iloc[-1] == pytest.approx(1.0 + evaluation["agent"]["total_return"])
    assert all(title in catalog.load("options_her_tearsheet") for title in PANELS.values())

    failing = {**PARAMS, "gates": {"fail_on_gate": True, "max_usage": 0.0}}
    with pytest.raises(ValueError, match="option gates failed"):
        evaluate_options_her(agent, spec, catalog.load("options_her_training"), failing, 3)
