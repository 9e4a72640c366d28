"""Auxiliary heads: targets never leak into the observation, come from training bars only, and the
heads' losses fall; the agent saves, reloads and stays plain SAC(+ICM) when they are off."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
import torch as th
from arch.data import sp500
from helpers.seeds_env import seeds_env_config
from stable_baselines3.common.torch_layers import FlattenExtractor

from trading_rl.algorithms.sac_icm.auxiliary import (
    PARAMS_PREFIX,
    TARGETS_INFO_KEY,
    AuxiliaryHeads,
    AuxiliaryReplayBuffer,
    AuxiliaryTargets,
    MarketEncoder,
)
from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM, build_agent
from trading_rl.algorithms.sac_icm.training_env import wrap_training_env
from trading_rl.envs import build_env_spec
from trading_rl.training.curriculum import CurriculumParams
from trading_rl.training.params import HEADS, AgentParams, AuxiliaryParams

SPLITS = {
    "train": {"start": "2004-01-01", "end": "2008-12-31"},
    "validation": {"start": "2009-01-01", "end": "2010-12-31"},
}
ON = {"enabled": True, "latent_dim": 16, "hidden_dim": 32}
SMALL = {
    "sac": {"learning_starts": 64, "batch_size": 32, "buffer_size": 2000},
    "policy": {"net_arch": [32, 32]},
    "icm": {"enabled": False},
}


def _features(prices: pd.DataFrame) -> pd.DataFrame:
    log_close = np.log(prices["close"])
    features = pd.DataFrame(
        {"r1": log_close.diff(), "r5": log_close.diff(5), "v10": log_close.diff().rolling(10).std()}, index=prices.index
    )
    return (features - features.mean()) / features.std()


@pytest.fixture(scope="module")
def prices():
    return sp500.load().loc["2003-01-01":"2010-12-31"].rename(columns=str.lower)


def _spec(prices):
    return build_env_spec("sp500", prices, _features(prices), SPLITS, seeds_env_config(episode_length=100), 252.0)


@pytest.fixture(scope="module")
def spec(prices):
    return _spec(prices)


def _observations_and_targets(env, steps: int = 60):
    obs, _ = env.reset(seed=0, options={"start_bar": 200})
    rows, targets = [obs], []
    for _ in range(steps):
        obs, _, _, _, info = env.step(np.array([0.5], dtype=np.float32))
        rows.append(obs)
        targets.append(info.get(TARGETS_INFO_KEY))
    return np.array(rows), targets


def test_no_target_leaks_into_the_observation(prices, spec):
    config = AuxiliaryParams.from_mapping(ON, PARAMS_PREFIX).config()
    wrapped = AuxiliaryTargets(spec.make_env("train"), config)
    plain_obs, _ = _observations_and_targets(spec.make_env("train"))
    wrapped_obs, targets = _observations_and_targets(wrapped)
    np.testing.assert_array_equal(wrapped_obs, plain_obs)  # the wrapper adds labels, never inputs
    assert all(t is not None and t.shape == (len(HEADS),) for t in targets)
    assert not set(HEADS) & {name.removeprefix("feature:") for name in wrapped.unwrapped.layout.names}

    # Future bars change the labels of bar t, not the observation at bar t.
    base = wrapped.unwrapped
    t = 230
    when = base._timestamp_list[t]
    shocked = prices.copy()
    later = shocked.index > when
    shocked.loc[later, ["open", "high", "low", "close"]] *= np.linspace(1.5, 0.5, later.sum())[:, None]
    shocked.loc[later, "volume"] *= 7.0
    other = AuxiliaryTargets(
        build_env_spec(
            "sp500", shocked, _features(prices), SPLITS, seeds_env_config(episode_length=100), 252.0
        ).make_env("train"),
        config,
    )
    np.testing.assert_array_equal(other.unwrapped._obs_rows[: t + 1], base._obs_rows[: t + 1])
    assert not np.allclose(other.table[t, :3], wrapped.table[t, :3], equal_nan=True)
    # The causal regime label of bar t uses closes up to t only.
    assert other.table[t, HEADS.index("regime")] == wrapped.table[t, HEADS.index("regime")]


def test_targets_come_from_training_bars_only(prices, spec):
    config = AuxiliaryParams.from_mapping(ON, PARAMS_PREFIX).config()
    train_env = spec.make_env("train")
    table = AuxiliaryTargets(train_env, config).table
    assert len(table) == train_env.n_bars
    # the last bar has no next bar in the training split: no label, not one from validation bars
    assert np.isnan(table[-1, HEADS.index("next_return")]) and np.isnan(table[-1, HEADS.index("volume")])
    assert np.isnan(table[-config.volatility_horizon :, HEADS.index("volatility")]).all()
    shocked = prices.copy()
    shocked.loc[shocked.index > pd.Timestamp(SPLITS["train"]["end"]), ["open", "high", "low", "close", "volume"]] *= 3.0
    again = AuxiliaryTargets(_spec(shocked).make_env("train"), config).table
    np.testing.assert_array_equal(again, table)


def test_each_head_loss_falls_on_training_data(spec):
    th.manual_seed(0)
    np.random.seed(0)
    config = AuxiliaryParams.from_mapping({**ON, "lr": 3e-3}, PARAMS_PREFIX).config()
    env = AuxiliaryTargets(spec.make_env("train"), config)
    buffer = AuxiliaryReplayBuffer(1000, env.observation_space, env.action_space, device="cpu")
    obs, _ = env.reset(seed=0)
    action = np.array([0.3], dtype=np.float32)
    for _ in range(300):
        next_obs, reward, terminated, truncated, info = env.step(action)
        buffer.add(obs[None], next_obs[None], action[None], np.array([reward]), np.array([terminated]), [info])
        obs = env.reset()[0] if terminated or truncated else next_obs
    encoder = MarketEncoder(env.observation_space, env.unwrapped.layout["features"].stop, 16, 32)
    heads = AuxiliaryHeads(16, config)
    heads.attach(encoder)
    observations, targets = buffer.sample_labelled(128)
    first = {name: value.item() for name, value in heads.losses(encoder.encode_market(observations), targets).items()}
    for _ in range(60):
        heads.update(encoder, observations, targets)
    last = {name: value.item() for name, value in heads.losses(encoder.encode_market(observations), targets).items()}
    assert set(first) == set(HEADS)
    assert all(last[head] < 0.8 * first[head] for head in HEADS), (first, last)


def test_agent_trains_logs_per_head_losses_and_reloads_with_its_heads(spec):
    model = build_agent(
        spec.make_env("train", seed=0),
        AgentParams.from_mapping({**SMALL, "auxiliary": ON}, "sac_icm.agent"),
        seed=0,
        device="cpu",
    )
    assert isinstance(model.policy.actor.features_extractor, MarketEncoder)
    assert model.policy.critic.features_extractor is model.policy.actor.features_extractor
    model.learn(total_timesteps=96)
    stats = model.pop_train_stats()
    assert {f"aux/{head}_loss" for head in HEADS} | {"aux/total_loss"} <= set(stats)
    assert model.replay_buffer.unlabelled_transitions == 0

    saved = io.BytesIO()
    model.save(saved)
    saved.seek(0)
    reloaded = SACWithICM.load(saved, device="cpu")
    for name, tensor in model.auxiliary.state_dict().items():
        th.testing.assert_close(reloaded.auxiliary.state_dict()[name], tensor)
    batch = np.stack([spec.make_env("validation").reset(seed=0)[0]] * 3)
    np.testing.assert_array_equal(
        model.predict(batch, deterministic=True)[0], reloaded.predict(batch, deterministic=True)[0]
    )


def test_switched_off_the_agent_is_unchanged(spec):
    env = spec.make_env("train", seed=0)
    model = build_agent(env, AgentParams.from_mapping(SMALL, "sac_icm.agent"), seed=0, device="cpu")
    assert model.auxiliary is None and isinstance(model.policy.actor.features_extractor, FlattenExtractor)
    assert wrap_training_env(env, CurriculumParams(), None) is env


def test_a_walk_forward_fine_tune_keeps_labelling_transitions(spec):
    from trading_rl.phases.walk_forward import train_sac

    params = AgentParams.from_mapping({**SMALL, "auxiliary": ON, "curriculum": {"enabled": True, "episode_length": 30}})
    model = train_sac(spec, params, seed=0, timesteps=70, device="cpu")
    model = train_sac(spec, params, seed=0, timesteps=40, model=model, device="cpu")
    vec = model.get_env()
    assert vec.env_is_wrapped(AuxiliaryTargets)[0] and vec.get_attr("stage")[0] == 0
    assert model.replay_buffer.unlabelled_transitions == 0 and model.num_timesteps == 110


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"weights": {"sentiment": 1.0}}, "auxiliary.weights.sentiment"),
        ({"weights": {head: 0.0 for head in HEADS}}, "every head weight 0"),
        ({"volume_quantiles": [0.7, 0.3]}, "volume_quantiles"),
        ({"volatility_horizon": 1}, "volatility_horizon"),
        ({"depth": 3}, "auxiliary.depth"),
    ],
)
def test_bad_parameters_name_the_key(params, match):
    with pytest.raises(ValueError, match=match):
        AuxiliaryParams.from_mapping({"enabled": True, **params}, PARAMS_PREFIX)
