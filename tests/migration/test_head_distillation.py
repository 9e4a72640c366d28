"""The migrated mean head, distilled from the discrete policy: the fit against numpy's least squares,
recovery of a known linear head, and agreement with a trained PPO's greedy actions on held-out
states, which the fresh near-zero head of before fails."""

import dataclasses
import io

import numpy as np
import pandas as pd
import pytest
import torch
from helpers.synthetic_prices import random_walk_prices
from stable_baselines3 import SAC

from trading_rl.envs import EnvConfig, build_env_spec
from trading_rl.envs.hybrid import ActionSpaceMigrator, DiscreteAction
from trading_rl.migration import (
    build_migrated_sac,
    discrete_policy_from_checkpoint,
    fit_mean_head,
    greedy_agreement,
    greedy_demonstration,
    inspect_discrete_checkpoint,
    sb3_zip_bytes,
    train_discrete_baseline,
)
from trading_rl.migration.distillation import RIDGE, SIGNAL_CLIP, last_hidden_features

LEVELS = np.array([0.0, 0.33, 0.66, 1.0, -0.5, -1.0, 0.5])


def _features_and_signals(n=300, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return np.tanh(rng.normal(size=(n, d))), rng.choice(LEVELS, size=n)


def test_fit_equals_numpy_lstsq_on_the_ridge_augmented_system():
    features, signals = _features_and_signals()
    n, d = features.shape
    targets = np.arctanh(np.clip(signals, -SIGNAL_CLIP, SIGNAL_CLIP))
    # mean squared error + RIDGE |w|^2  <=>  lstsq of [X 1; sqrt(n RIDGE) I 0] against [t; 0]
    design = np.block([[features, np.ones((n, 1))], [np.sqrt(n * RIDGE) * np.eye(d), np.zeros((d, 1))]])
    reference, *_ = np.linalg.lstsq(design, np.r_[targets, np.zeros(d)], rcond=None)
    fit = fit_mean_head(features, signals)
    np.testing.assert_allclose(fit.weight, reference[:d], atol=1e-10)
    assert fit.bias == pytest.approx(reference[d], abs=1e-10)
    residual = features @ reference[:d] + reference[d] - targets
    assert fit.r2 == pytest.approx(1 - residual @ residual / np.sum((targets - targets.mean()) ** 2), abs=1e-10)
    assert fit.n_states == n


def test_fit_recovers_a_linear_head_exactly_without_ridge_and_closely_with_it():
    features, _ = _features_and_signals(seed=1)
    weight, bias = np.linspace(-0.4, 0.3, features.shape[1]), 0.2
    signals = np.tanh(features @ weight + bias)
    assert np.abs(signals).max() < SIGNAL_CLIP  # no target is clipped
    exact = fit_mean_head(features, signals, ridge=0.0)
    np.testing.assert_allclose(exact.weight, weight, atol=1e-9)
    assert exact.bias == pytest.approx(bias, abs=1e-9) and exact.r2 == pytest.approx(1.0)
    ridged = fit_mean_head(features, signals)
    np.testing.assert_allclose(ridged.weight, weight, atol=0.01)


def test_a_policy_that_always_holds_gets_a_zero_head_and_no_r2():
    features, _ = _features_and_signals()
    fit = fit_mean_head(features, np.zeros(len(features)))
    assert fit.r2 is None and fit.bias == 0.0 and not fit.weight.any()


@pytest.mark.parametrize(
    "features, signals, clip, expected",
    [
        (np.zeros((5, 3)), np.zeros(4), SIGNAL_CLIP, "features must be (n, d)"),
        (np.zeros((1, 3)), np.zeros(1), SIGNAL_CLIP, "n >= 2"),
        (np.zeros((5, 3)), np.zeros(5), 1.0, "clip must lie in (0, 1)"),
    ],
)
def test_bad_fit_input_is_refused(features, signals, clip, expected):
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        fit_mean_head(features, signals, clip=clip)


def test_a_checkpoint_whose_greedy_signal_is_linear_in_h_gets_that_head(make_checkpoint, toy_env, demonstrate):
    """The last hidden layer's first unit saturates (tanh of a 200x input is ±1) and the action net
    buys large when it is +1, sells all when -1: the greedy signal is that unit, the fitted head
    ``atanh(0.95)`` times it."""
    _, raw = make_checkpoint("PPO", 6, (16, 8), seed=4)
    checkpoint = inspect_discrete_checkpoint(raw, "linear.zip")
    tensors = {key: value.clone() for key, value in checkpoint.state_dict.items()}
    tensors["mlp_extractor.policy_net.2.weight"][0] *= 200.0
    tensors["mlp_extractor.policy_net.2.bias"][0] = 0.0
    tensors["action_net.weight"].zero_()
    tensors["action_net.bias"].zero_()
    tensors["action_net.weight"][DiscreteAction.BUY_LARGE, 0] = 10.0
    tensors["action_net.weight"][DiscreteAction.SELL_ALL, 0] = -10.0
    linear = dataclasses.replace(checkpoint, state_dict=tensors)
    demonstration = demonstrate(discrete_policy_from_checkpoint(linear, toy_env(6)), 6)
    assert set(demonstration.actions) == {DiscreteAction.BUY_LARGE, DiscreteAction.SELL_ALL}

    sac = build_migrated_sac(linear, toy_env(6, continuous=True), demonstration, sac_kwargs=dict(buffer_size=10))
    unit = last_hidden_features(sac, demonstration.observations)[:, 0]
    assert np.mean(np.abs(unit) > 0.999) > 0.97  # saturated almost everywhere
    weight = sac.policy.actor.mu.weight.detach().numpy()[0]
    assert weight[0] == pytest.approx(np.arctanh(SIGNAL_CLIP), rel=0.05)
    assert np.abs(weight[1:]).max() < 0.1 and abs(float(sac.policy.actor.mu.bias.detach())) < 0.05
    assert sac.migration_metadata["head_fit"]["r2"] > 0.98
    assert greedy_agreement(sac, demonstrate(discrete_policy_from_checkpoint(linear, toy_env(6)), 6, seed=9))[
        "agreement"
    ] == pytest.approx(1.0, abs=0.02)


# --- a trained PPO on a small market ---------------------------------------------------------------

# Held-out floors for the trained PPO below: a 1-d linear head cannot reproduce an argmax over 7
# logits exactly (this one measured 0.57 agreement and 0.79 correlation); the fresh head agreed only
# where the discrete policy held (0.12).
MIN_HELD_OUT_AGREEMENT = 0.45
MIN_HELD_OUT_CORRELATION = 0.6


@pytest.fixture(scope="module")
def trained_migration():
    """A PPO (16, 8) trained 256 steps on a 300-bar random walk, migrated on its train-split states,
    and its greedy demonstration on the later 90 bars it was not fitted on."""
    prices = random_walk_prices(300, seed=0)
    returns = np.log(prices["close"]).diff().fillna(0.0)
    features = pd.DataFrame({"ret": returns * 50, "ret5": returns.rolling(5, min_periods=1).sum() * 20})
    dates = [str(day.date()) for day in prices.index]
    splits = {"train": {"start": dates[0], "end": dates[209]}, "validation": {"start": dates[210], "end": dates[-1]}}
    spec = build_env_spec("X", prices, features, splits, EnvConfig(window_size=2), 252.0)
    ppo = train_discrete_baseline(
        spec.make_env("train", kind="discrete", seed=0),
        hidden_sizes=(16, 8),
        total_timesteps=256,
        seed=0,
        ppo_kwargs=dict(n_steps=128, batch_size=32, n_epochs=2),
    )
    migrator = ActionSpaceMigrator(spec.layout, spec.env_config().hold_threshold)

    def demonstration(split):
        return greedy_demonstration(ppo, spec.make_env(split, kind="discrete", evaluation=True), migrator, split, 0)

    checkpoint = inspect_discrete_checkpoint(sb3_zip_bytes(ppo), "trained.zip")
    sac = build_migrated_sac(
        checkpoint, spec.make_env("train"), demonstration("train"), sac_kwargs=dict(buffer_size=10), seed=0
    )
    return sac, demonstration("validation")


def test_migrated_agent_acts_like_the_trained_discrete_policy_on_held_out_states(trained_migration):
    sac, held_out = trained_migration
    assert len(set(held_out.actions)) >= 3  # the discrete policy does several things there
    agreement = greedy_agreement(sac, held_out)
    assert agreement["passed"] and agreement["n_states"] == len(held_out.actions)
    assert agreement["agreement"] >= MIN_HELD_OUT_AGREEMENT
    assert agreement["correlation"] >= MIN_HELD_OUT_CORRELATION
    # its deterministic action is tanh of the fitted head on the copied features
    features = last_hidden_features(sac, held_out.observations)
    actions, _ = sac.predict(held_out.observations, deterministic=True)
    mu = sac.policy.actor.mu
    expected = np.tanh(features @ mu.weight.detach().numpy()[0].astype(np.float64) + float(mu.bias.detach()))
    np.testing.assert_allclose(actions[:, 0], expected, atol=1e-5)


def test_the_fresh_near_zero_head_fails_the_agreement_check(trained_migration):
    migrated, held_out = trained_migration
    fresh = SAC.load(io.BytesIO(sb3_zip_bytes(migrated)), device="cpu")  # written here: safe to load
    with torch.no_grad():  # the head the migration used to make: orthogonal gain 0.01, zero bias
        torch.nn.init.orthogonal_(fresh.policy.actor.mu.weight, gain=0.01)
        fresh.policy.actor.mu.bias.zero_()
    agreement = greedy_agreement(fresh, held_out)
    assert agreement["discrete_active_share"] > 0.5 and agreement["migrated_active_share"] == 0.0
    assert not agreement["passed"] and agreement["agreement"] < MIN_HELD_OUT_AGREEMENT
