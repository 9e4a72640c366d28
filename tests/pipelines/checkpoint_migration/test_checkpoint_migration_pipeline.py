"""The checkpoint_migration pipeline with the real catalog entries (paths moved to tmp_path), the ci
parameters and a tiny env spec: fresh run, batch of legacy checkpoints, and bad input."""

import hashlib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from helpers.tearsheet_inputs import tearsheet_inputs
from kedro.io import DataCatalog
from kedro.runner import SequentialRunner
from stable_baselines3 import DQN, PPO

from trading_rl.migration import discrete_policy_from_checkpoint, sb3_zip_bytes
from trading_rl.pipelines.checkpoint_migration import create_pipeline

CONF = Path(__file__).resolve().parents[3] / "conf"
OUTPUTS = (
    "legacy_checkpoint_backups",
    "discrete_checkpoints",
    "migrated_models",
    "fine_tuned_models",
    "migration_report",
    "migration_comparison",
)

pytestmark = pytest.mark.slow


def _catalog(tmp_path, env_spec, params_override=None, save_version="2026-11-25T00.00.00.000Z"):
    config = yaml.safe_load((CONF / "base" / "catalog_checkpoint_migration.yml").read_text())
    for entry in config.values():
        for key in ("path", "filepath"):
            if key in entry:
                entry[key] = str(tmp_path / entry[key])
        if "device" in entry:
            entry["device"] = "cpu"
    catalog = DataCatalog.from_config(config, save_version=save_version)
    params = yaml.safe_load((CONF / "ci" / "parameters_checkpoint_migration.yml").read_text())
    params = params["checkpoint_migration"]
    params.update(params_override or {})
    catalog["env_spec"] = env_spec
    catalog["params:checkpoint_migration"] = params
    catalog["params:seed"] = 7
    for name, dataset in tearsheet_inputs().items():
        catalog[name] = dataset
    catalog["run_metadata"] = {"seed": 7, "config_hash": "test", "git_commit": "test"}
    return catalog


def _load(tmp_path, env_spec, name):
    return _catalog(tmp_path, env_spec, save_version=None).load(name)


class _Env(gym.Env):
    """Only the spaces: enough to build a legacy-shaped SB3 model."""

    def __init__(self, obs_dim):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = gym.spaces.Discrete(7)


def _legacy(obs_dim, hidden, seed, algorithm=PPO):
    kwargs = dict(net_arch=dict(pi=list(hidden), vf=list(hidden))) if algorithm is PPO else dict(net_arch=list(hidden))
    extra = {} if algorithm is PPO else {"buffer_size": 10}
    model = algorithm("MlpPolicy", _Env(obs_dim), seed=seed, policy_kwargs=kwargs, **extra)
    return model, sb3_zip_bytes(model)


def _output_files(tmp_path):
    return sorted(p for p in (tmp_path / "data").rglob("*") if "01_raw" not in p.parts)


def test_fresh_run_trains_the_baseline_and_migrates_it(tmp_path, tiny_env_spec):
    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, tiny_env_spec))
    discrete = _load(tmp_path, tiny_env_spec, "discrete_checkpoints")
    assert list(discrete) == ["sp500.zip"]
    assert _load(tmp_path, tiny_env_spec, "legacy_checkpoint_backups") == {}
    assert _load(tmp_path, tiny_env_spec, "fine_tuned_models") == {}

    stored = sorted(
        p.name for p in (tmp_path / "data" / "06_models" / "discrete_checkpoints").rglob("*") if p.is_file()
    )
    assert stored == ["sp500.zip.pt"]  # extracted tensors and metadata, not an SB3 zip
    baseline = discrete_policy_from_checkpoint(discrete["sp500.zip"], _Env(tiny_env_spec.layout.dim))
    assert [m.out_features for m in baseline.policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)] == [
        256,
        128,
    ]
    assert baseline.policy.action_net.out_features == 7
    migrated = _load(tmp_path, tiny_env_spec, "migrated_models")["sp500.zip"]
    obs = torch.as_tensor(np.random.default_rng(0).normal(size=(50, tiny_env_spec.layout.dim)), dtype=torch.float32)
    with torch.no_grad():
        assert torch.equal(baseline.policy.mlp_extractor.forward_actor(obs), migrated.policy.actor.latent_pi(obs))

    report = _load(tmp_path, tiny_env_spec, "migration_report")["checkpoints"]["sp500.zip"]
    assert report["validation"]["passed"] and report["validation"]["hidden_weights_max_abs_diff"] == 0.0
    assert report["metadata"]["source_sha256"] == discrete["sp500.zip"].sha256
    assert report["metadata"]["hidden_sizes"] == [256, 128] and report["metadata"]["run"]["seed"] == 7
    assert report["metadata"]["head_fit"]["states"] == "deterministic discrete rollout, whole train split"
    assert report["greedy_agreement"]["passed"]

    comparison = _load(tmp_path, tiny_env_spec, "migration_comparison")
    entry = comparison["checkpoints"]["sp500.zip"]
    assert set(entry["agents"]) == {"discrete", "migrated"} and comparison["split"] == "validation"
    assert entry["gate"]["continuous_agent"] == "migrated"
    assert entry["gate"]["discrete_diversity"] == entry["agents"]["discrete"]["action_entropy"]
    assert {"buy_and_hold", "cash", "random", "sma_crossover"} <= set(comparison["baselines"])
    n_validation_steps = entry["agents"]["discrete"]["n_steps"]
    assert n_validation_steps == comparison["baselines"]["cash"]["n_steps"] > 50
    # the migration's held-out check and the comparison measure the same states: the discrete
    # policy's own pass over the validation split
    assert report["greedy_agreement"]["n_states"] == n_validation_steps
    assert entry["greedy_agreement"]["migrated"] == report["greedy_agreement"]

    # the tearsheet shows the migrated agent's run on the comparison split
    rollout = _load(tmp_path, tiny_env_spec, "checkpoint_migration_rollout")
    migrated_rows = rollout[rollout["agent"] == "sp500.zip migrated"]
    assert len(migrated_rows) == n_validation_steps
    assert migrated_rows["equity_index"].iloc[-1] - 1.0 == pytest.approx(entry["agents"]["migrated"]["total_return"])
    assert "checkpoint_migration: sp500.zip on sp500, validation split" in _load(
        tmp_path, tiny_env_spec, "checkpoint_migration_tearsheet"
    )


def test_batch_of_legacy_checkpoints_is_backed_up_and_migrated(tmp_path, tiny_env_spec):
    dim = tiny_env_spec.layout.dim
    legacy = tmp_path / "data" / "01_raw" / "legacy"
    legacy.mkdir(parents=True)
    models = {}
    for seed, (name, hidden) in enumerate([("sp500.zip", (16, 8)), ("nasdaq.zip", (8,)), ("dax.zip", (12, 6, 4))]):
        models[name], raw = _legacy(dim, hidden, seed)
        (legacy / name).write_bytes(raw)
    sources = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in legacy.iterdir()}

    SequentialRunner().run(create_pipeline(), _catalog(tmp_path, tiny_env_spec, {"expected_hidden_sizes": None}))

    backups = _load(tmp_path, tiny_env_spec, "legacy_checkpoint_backups")
    assert {name: hashlib.sha256(raw).hexdigest() for name, raw in backups.items()} == sources
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in legacy.iterdir()} == sources
    migrated = _load(tmp_path, tiny_env_spec, "migrated_models")
    assert sorted(migrated) == sorted(sources)
    for name, source in models.items():
        source_linears = [m for m in source.policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
        target_linears = [m for m in migrated[name].policy.actor.latent_pi if isinstance(m, torch.nn.Linear)]
        assert len(source_linears) == len(target_linears)
        for s, t in zip(source_linears, target_linears):
            assert torch.equal(s.weight, t.weight) and torch.equal(s.bias, t.bias)
        assert migrated[name].migration_metadata["source_sha256"] == sources[name]
    report = _load(tmp_path, tiny_env_spec, "migration_report")["checkpoints"]
    assert all(report[name]["validation"]["passed"] for name in sources)
    assert sorted(_load(tmp_path, tiny_env_spec, "migration_comparison")["checkpoints"]) == sorted(sources)


@pytest.mark.parametrize(
    "case, expected",
    [
        ("hidden_sizes", "hidden sizes [16, 8], expected [256, 128]"),
        ("observation_dim", "observation dimension"),
        ("truncated", "corrupt or truncated"),
        ("dqn", "DQNPolicy (DQN)"),
    ],
)
def test_bad_legacy_checkpoint_stops_the_run_and_writes_nothing(case, expected, tmp_path, tiny_env_spec):
    dim = tiny_env_spec.layout.dim
    legacy = tmp_path / "data" / "01_raw" / "legacy"
    legacy.mkdir(parents=True)
    (legacy / "good.zip").write_bytes(_legacy(dim, (256, 128), 0)[1])
    bad = {
        "hidden_sizes": lambda: _legacy(dim, (16, 8), 1)[1],
        "observation_dim": lambda: _legacy(dim + 1, (256, 128), 1)[1],
        "truncated": lambda: _legacy(dim, (256, 128), 1)[1][:5000],
        "dqn": lambda: _legacy(dim, (256, 128), 1, algorithm=DQN)[1],
    }[case]()
    (legacy / "bad.zip").write_bytes(bad)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in legacy.iterdir()}

    with pytest.raises(Exception) as error:
        SequentialRunner().run(create_pipeline(), _catalog(tmp_path, tiny_env_spec))
    assert "'bad.zip'" in str(error.value) and expected in str(error.value)
    assert _output_files(tmp_path) == []
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in legacy.iterdir()} == before
