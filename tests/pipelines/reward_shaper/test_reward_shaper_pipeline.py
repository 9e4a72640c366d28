"""The reward_shaper pipeline on an in-memory catalog with a tiny budget, and its datasets."""

import mlflow
import pytest
import torch
from helpers.mlflow_store import empty_store
from helpers.tearsheet_inputs import tearsheet_inputs
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner

from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM, build_agent
from trading_rl.data import load_prices
from trading_rl.envs import EnvConfig, build_env_spec
from trading_rl.features import FeatureParams, apply_scaler, compute_features, fit_scaler, make_splits
from trading_rl.integration.datasets.torch_module import TorchModuleDataset
from trading_rl.phases.reward_shaper import fit_reward_shaper, report_reward_shaping
from trading_rl.pipelines.reward_shaper import create_pipeline
from trading_rl.rewards import OBJECTIVES, ObjectiveWeightNetwork, PotentialNetwork
from trading_rl.rewards.shaped_training import RewardShaperParams
from trading_rl.training.params import AgentParams

PARAMS = {
    "device": "cpu",
    "rollouts": {"steps": 160},
    "weight_network": {"hidden_dim": 16, "epochs": 6, "batch_size": 32},
    "potential": {"hidden_dim": 16, "epochs": 3, "batch_size": 32},
    "shaping": {"adapt_every": 40, "window": 40},
    "training": {"n_envs": 4, "continue_timesteps": 120, "learning_starts": 40, "eval_freq": 60},
}


class KeptDataset(MemoryDataset):
    """Keeps its data after the runner releases it, so the test can read intermediate outputs."""

    def _release(self) -> None:
        pass


def _spec():
    prices = load_prices("sp500").iloc[:700]
    features = compute_features(prices, FeatureParams(garch=None)).dropna()
    splits = make_splits(features.index, {"train_fraction": 0.6, "validation_fraction": 0.2})
    scaler = fit_scaler(features.loc[: splits["train"]["end"]])
    return build_env_spec(
        "sp500", prices.loc[features.index], apply_scaler(features, scaler), splits, EnvConfig(episode_length=80), 252.0
    )


@pytest.mark.slow
def test_pipeline_shapes_and_reports(tmp_path):
    spec = _spec()
    source = build_agent(
        spec.make_env("train"),
        AgentParams.from_mapping(
            {"policy": {"net_arch": [16, 16]}, "reward_scale": 100.0, "icm": {"feature_dim": 8, "hidden_dim": 16}},
            "sac_icm.agent",
        ),
        seed=0,
        device="cpu",
    )
    catalog = DataCatalog(
        {
            "env_spec": MemoryDataset(spec),
            "sac_icm_model": MemoryDataset(source, copy_mode="assign"),
            "params:reward_shaper": MemoryDataset({**PARAMS, "resume_dir": str(tmp_path / "resume")}),
            "params:seed": MemoryDataset(5),
            **tearsheet_inputs(),
        }
    )
    for name in (
        "objective_weight_network",
        "potential_function",
        "reward_shaper_fit",
        "reward_shaped_model",
        "reward_shaper_training",
        "reward_shaping_report",
        "reward_shaper_metrics",
        "reward_shaper_rollouts",
        "reward_shaper_rollout",
        "reward_shaper_tearsheet_plot",
        "reward_shaper_tearsheet",
    ):
        catalog[name] = KeptDataset(copy_mode="assign")
    mlflow.set_tracking_uri(empty_store(tmp_path / "mlflow.db"))
    mlflow.set_experiment("reward_shaper")
    try:
        with mlflow.start_run() as run:
            SequentialRunner().run(create_pipeline(), catalog)
        client = mlflow.MlflowClient()
        streamed = {
            key: [(p.step, p.value) for p in client.get_metric_history(run.info.run_id, key)]
            for key in client.get_run(run.info.run_id).data.metrics
        }
    finally:
        mlflow.set_tracking_uri("")

    shaped = catalog.load("reward_shaped_model")
    assert isinstance(shaped, SACWithICM) and shaped.num_timesteps == 120
    # The shaped reward is O(1): the P&L-sized learner scale of the source must not apply to it.
    assert (shaped.reward_scale, source.reward_scale) == (1.0, 100.0)
    assert source.num_timesteps == 0, "the source model must not be trained in place"
    report = catalog.load("reward_shaping_report")
    assert {row["gate"] for row in report["weight_gates"]} == {"max_weight", "weight_entropy", "weight_stability"}
    assert {"buy_and_hold", "cash"} <= set(report["baselines"])
    assert "sharpe" in report["shaped_agent"]["metrics"] and "sharpe" in report["source_agent"]["metrics"]
    rollout = catalog.load("reward_shaper_rollout")
    finals = rollout[rollout["kind"] == "agent"].groupby("agent")["equity_index"].last() - 1.0
    assert finals["reward_shaped"] == pytest.approx(report["shaped_agent"]["metrics"]["total_return"])
    assert finals["sac_icm (source)"] == pytest.approx(report["source_agent"]["metrics"]["total_return"])
    assert "reward_shaped" in catalog.load("reward_shaper_tearsheet")
    assert [row["timestep"] for row in report["training_reward"]] == [60, 120]
    # reward/* streamed at every evaluation, once (the node-end metrics hold the final numbers only)
    for name in OBJECTIVES:
        for key in (f"reward/{name}_component", f"reward/{name}_share", f"reward/weight_{name}"):
            assert [step for step, _ in streamed[f"reward_shaper/{key}"]] == [60, 120], key
    shares = [streamed[f"reward_shaper/reward/{name}_share"][-1][1] for name in OBJECTIVES]
    assert sum(shares) == pytest.approx(1.0)
    assert "reward_shaper/reward/shaping_term" in streamed
    metrics = catalog.load("reward_shaper_metrics")
    assert "final/total_return" in metrics and not any(key.startswith(("reward/", "eval/")) for key in metrics)

    failing = RewardShaperParams.from_mapping(
        {**PARAMS, "gates": {"fail_on_gate": True, "min_entropy": 5.0}}, "reward_shaper"
    )
    _, _, failing_fit = fit_reward_shaper(catalog.load("reward_shaper_rollouts"), source, failing, 5)
    assert not failing_fit["weight_gates_passed"]
    with pytest.raises(ValueError, match="weight gates failed"):
        report_reward_shaping(shaped, source, spec, failing_fit, catalog.load("reward_shaper_training"), failing, 5)


@pytest.mark.parametrize("module", [ObjectiveWeightNetwork(7, 16), PotentialNetwork(7, 16)])
def test_torch_module_dataset_round_trip(tmp_path, module):
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(torch.randn_like(parameter))
    dataset = TorchModuleDataset(str(tmp_path / "module.pt"), f"{type(module).__module__}.{type(module).__name__}")
    dataset.save(module)
    loaded = dataset.load()
    x = torch.randn(4, 7)
    assert type(loaded) is type(module) and not loaded.training
    assert torch.equal(loaded(x), module.eval()(x))
