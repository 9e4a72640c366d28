"""The migration node fits the mean head on the train split, reports agreement on the validation split,
and stops a migration whose agent never moves where the discrete policy trades."""

from pathlib import Path

import pytest
import torch
import yaml
from helpers.synthetic_prices import tiny_env_spec
from stable_baselines3 import PPO

from trading_rl.migration import inspect_discrete_checkpoint, sb3_zip_bytes
from trading_rl.migration.params import CheckpointMigrationParams
from trading_rl.phases.checkpoint_migration import MigrationValidationError, migrate_checkpoints

CONF = Path(__file__).resolve().parents[2] / "conf"


@pytest.fixture(scope="module")
def setting():
    spec = tiny_env_spec()
    ci = yaml.safe_load((CONF / "ci" / "parameters_checkpoint_migration.yml").read_text())
    params = CheckpointMigrationParams.from_mapping(ci["checkpoint_migration"], "checkpoint_migration")
    ppo = PPO("MlpPolicy", spec.make_env("train", kind="discrete"), policy_kwargs={"net_arch": [16, 8]}, seed=1)
    checkpoint = inspect_discrete_checkpoint(sb3_zip_bytes(ppo), "x.zip", spec.layout.dim)
    return spec, params, {"x.zip": checkpoint}


def test_the_report_has_the_head_fit_and_the_held_out_agreement(setting):
    spec, params, checkpoints = setting
    models, report = migrate_checkpoints(checkpoints, spec, params, seed=0, run_metadata={})
    entry = report["checkpoints"]["x.zip"]
    head_fit = entry["metadata"]["head_fit"]
    assert head_fit["states"] == "deterministic discrete rollout, whole train split"
    train_steps = len(spec.prices["train"]) - spec.env_config().window_size
    assert 0 < head_fit["n_states"] <= train_steps + 1
    agreement = entry["greedy_agreement"]
    assert agreement["states"] == "deterministic discrete rollout, whole validation split"
    assert agreement["passed"] and 0.0 <= agreement["agreement"] <= 1.0
    assert models["x.zip"].migration_metadata == entry["metadata"]


def test_an_agent_that_never_moves_where_the_discrete_policy_trades_stops_the_migration(setting, monkeypatch):
    spec, params, checkpoints = setting

    def fresh_head(model, demonstration):  # the head of before: mu ~ 0
        with torch.no_grad():
            model.policy.actor.mu.weight.mul_(0.0)
            model.policy.actor.mu.bias.zero_()
        return {}

    monkeypatch.setattr("trading_rl.migration.migrated_sac.distil_mean_head", fresh_head)
    with pytest.raises(MigrationValidationError, match=r"'x.zip'.*greedy agreement.*'migrated_active_share': 0.0"):
        migrate_checkpoints(checkpoints, spec, params, seed=0, run_metadata={})
