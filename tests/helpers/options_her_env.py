"""A small real-data env spec (S&P 500 daily bars from ``arch``) for the options/HER tests."""

from __future__ import annotations

import functools

import numpy as np

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.data import load_prices
from trading_rl.envs import EnvConfig, build_env_spec
from trading_rl.features import FeatureParams, apply_scaler, compute_features, fit_scaler, make_splits
from trading_rl.training.params import AgentParams

SMALL_SAC = {
    "policy": {"net_arch": [32, 32], "activation": "relu"},
    "sac": {"learning_starts": 50, "batch_size": 32, "buffer_size": 2000},
    "icm": {"enabled": True, "warmup_steps": 10, "feature_dim": 8, "hidden_dim": 16},
}


@functools.lru_cache(maxsize=1)
def small_spec(n_bars: int = 900, episode_length: int = 60):
    """Train/validation/test on the first ``n_bars`` bars, shorting allowed, no smoothing."""
    prices = load_prices("sp500").iloc[:n_bars]
    features = compute_features(prices, FeatureParams(garch=None)).dropna()
    splits = make_splits(features.index, {"train_fraction": 0.6, "validation_fraction": 0.2})
    scaler = fit_scaler(features.loc[: splits["train"]["end"]])
    return build_env_spec(
        "sp500",
        prices.loc[features.index],
        apply_scaler(features, scaler),
        splits,
        EnvConfig(episode_length=episode_length, allow_short=True, smoothing_window=1),
        periods_per_year=252.0,
        feature_scaler=scaler,
    )


def small_source_model(spec, seed: int = 0):
    """An untrained SAC+ICM model on the spec's training env (weights are random but fixed)."""
    return build_agent(
        spec.make_env("train", seed=seed), AgentParams.from_mapping(SMALL_SAC, "sac_icm.agent"), seed=seed, device="cpu"
    )


def random_observations(spec, n: int, seed: int = 0) -> np.ndarray:
    env = spec.make_env("train", seed=seed)
    obs, _ = env.reset(seed=seed)
    rows = [obs]
    rng = np.random.default_rng(seed)
    while len(rows) < n:
        obs, _, terminated, truncated, _ = env.step(rng.uniform(-1, 1, size=1).astype(np.float32))
        rows.append(obs)
        if terminated or truncated:
            obs, _ = env.reset()
    return np.asarray(rows, dtype=np.float32)
