"""A tiny real setup for the export tests: the pipeline's feature steps on the last 600 S&P 500
bars of ``arch``, an env spec with a short validation split and a SACWithICM trained 50 steps."""

from __future__ import annotations

from types import SimpleNamespace

import arch.data.sp500
import numpy as np
import torch

from helpers.tiny import tiny_agent
from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.envs import EnvConfig, build_env_spec
from trading_rl.features import apply_scaler, compute_features, fit_garch, fit_scaler
from trading_rl.features.indicators import FeatureParams, GarchParams
from trading_rl.training.params import AgentParams

TRAIN_END = "2018-08-31"
SPLITS = {
    "train": {"start": "2016-01-01", "end": TRAIN_END},
    "validation": {"start": "2018-09-01", "end": "2018-11-30"},
}
AGENT_PARAMS = tiny_agent(
    sac={"learning_starts": 20, "buffer_size": 500}, policy={"net_arch": [32, 32]}, icm={"warmup_steps": 10}
)
ENV_CONFIG = {"window_size": 4, "episode_length": 60, "min_trade_value": 0.0}


def build() -> SimpleNamespace:
    torch.set_num_threads(1)
    prices = arch.data.sp500.load().iloc[-600:].astype(np.float64)
    prices.columns = [column.lower().replace(" ", "_") for column in prices.columns]
    prices.index.name = "timestamp"
    # As feature_extraction does: GARCH fitted on the training bars, stored in the feature params.
    train_returns = np.log(prices.loc[:TRAIN_END, "close"]).diff().dropna()
    feature_params = FeatureParams(garch=GarchParams(params=fit_garch(train_returns)))
    features = compute_features(prices, feature_params).dropna(how="any")
    scaler = fit_scaler(features.loc[:TRAIN_END])
    spec = build_env_spec(
        "sp500", prices, apply_scaler(features, scaler), SPLITS, EnvConfig.from_mapping(ENV_CONFIG), 252.0
    )
    model = build_agent(
        spec.make_env("train", seed=0), AgentParams.from_mapping(AGENT_PARAMS, "sac_icm.agent"), seed=0, device="cpu"
    )
    model.learn(50)
    return SimpleNamespace(prices=prices, feature_params=feature_params, scaler=scaler, spec=spec, model=model)
