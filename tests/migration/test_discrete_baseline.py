"""The discrete PPO baseline learns a planted edge with base's learner settings (reward scale, gamma),
sees its rewards scaled while the env's are not, and refuses settings it cannot use."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from trading_rl.config import ConfigError
from trading_rl.data.synthetic import MarketModel, synthetic_prices
from trading_rl.envs import EnvConfig, build_env_spec
from trading_rl.integration.config_loader import ProjectConfigLoader
from trading_rl.migration import train_discrete_baseline
from trading_rl.migration.params import CheckpointMigrationParams
from trading_rl.settings import CONFIG_LOADER_ARGS

CONF = Path(__file__).resolve().parents[2] / "conf"
RANDOM_POLICIES = 20


def _section(env: str = "base") -> dict:
    return yaml.safe_load((CONF / env / "parameters_checkpoint_migration.yml").read_text())["checkpoint_migration"]


def _planted_edge_spec():
    """1,000 bars whose return is AR(1) with phi 0.5 (the ``fast`` family, strongly), observed as
    its last log return and a noise feature; train on the first 600 bars, judge on the rest."""
    prices = synthetic_prices(MarketModel(family="fast", strength=0.5, n_bars=1000, seed=7))
    log_return = np.log(prices["close"]).diff().fillna(0.0)
    noise = np.random.default_rng(0).normal(size=len(prices))
    features = pd.DataFrame({"logret_1": log_return / log_return.std(), "noise": noise}, index=prices.index)
    days = [str(day.date()) for day in prices.index]
    splits = {"train": {"start": days[0], "end": days[600]}, "validation": {"start": days[601], "end": days[-1]}}
    return build_env_spec("EDGE", prices, features, splits, EnvConfig(window_size=1), 252.0)


def _held_out_log_growth(spec, choose) -> float:
    """The sum of the evaluation env's rewards (log growth, costs included) over the held-out bars."""
    env = spec.make_env("validation", kind="discrete", evaluation=True)
    observation, _ = env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        observation, reward, terminated, truncated, _ = env.step(choose(observation))
        total += reward
        done = terminated or truncated
    return total


def _random_policy(seed: int):
    rng = np.random.default_rng(seed)
    return lambda _: int(rng.integers(7))


@pytest.mark.slow
def test_the_baseline_with_base_settings_beats_every_random_policy_on_a_planted_edge():
    """Measured: base's settings grow 0.09-0.12 in log on the held-out bars at 1,024 steps (seeds 0-2),
    the best of 20 random policies 0.04, the seeds' settings (raw rewards, gamma 0.99) 0.00-0.03."""
    baseline = CheckpointMigrationParams.from_mapping(_section(), "checkpoint_migration").discrete_baseline
    spec = _planted_edge_spec()
    model = train_discrete_baseline(
        spec.make_env("train", kind="discrete", seed=0),
        hidden_sizes=baseline.hidden_sizes,
        total_timesteps=1024,
        seed=0,
        ppo_kwargs=baseline.ppo.to_dict(),
        reward_scale=baseline.reward_scale,
    )
    learned = _held_out_log_growth(spec, lambda observation: int(model.predict(observation, deterministic=True)[0]))
    random = [_held_out_log_growth(spec, _random_policy(k)) for k in range(RANDOM_POLICIES)]
    assert learned > max(random) > 0.0


def test_ppo_sees_scaled_rewards_and_the_env_keeps_its_own(toy_env):
    ppo = {"n_steps": 16, "batch_size": 16, "n_epochs": 1}
    env = toy_env(6)
    model = train_discrete_baseline(env, hidden_sizes=(8,), total_timesteps=16, seed=0, ppo_kwargs=ppo, reward_scale=50)
    scaled = model.rollout_buffer.rewards.ravel()
    env.reset(seed=0)
    assert np.abs(scaled).max() > 10.0  # the toy env's rewards are N(0, 1)
    _, reward, *_ = env.step(0)
    assert abs(reward) < 10.0


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan")])
def test_a_reward_scale_that_is_not_positive_is_refused(toy_env, scale):
    with pytest.raises(ValueError, match="reward_scale must be > 0"):
        train_discrete_baseline(toy_env(6), hidden_sizes=(8,), total_timesteps=16, reward_scale=scale)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("reward_scale", 0, r"checkpoint_migration\.discrete_baseline\.reward_scale.*\(0, inf\)"),
        ("ppo.gamma", 1.5, r"checkpoint_migration\.discrete_baseline\.ppo\.gamma.*\[0, 1\]"),
    ],
)
def test_bad_learner_settings_name_their_parameter(key, value, message):
    section = _section()
    target = section["discrete_baseline"]
    *parents, leaf = key.split(".")
    for parent in parents:
        target = target[parent]
    target[leaf] = value
    with pytest.raises(ConfigError, match=message):
        CheckpointMigrationParams.from_mapping(section, "checkpoint_migration")


def test_the_seeds_env_keeps_the_original_learner_and_fine_tune_and_base_the_one_that_learns():
    def learner(env):
        loader = ProjectConfigLoader(conf_source=str(CONF), env=env, **CONFIG_LOADER_ARGS)
        raw = loader["parameters"]["checkpoint_migration"]
        params = CheckpointMigrationParams.from_mapping(raw, "checkpoint_migration")
        baseline = params.discrete_baseline
        return baseline.reward_scale, baseline.ppo.gamma, params.fine_tune.total_timesteps

    assert learner("base") == (100.0, 0.0, 0)  # the fine-tune lost the migrated agent's edge: off
    assert learner("seeds") == (1.0, 0.99, 1500)
