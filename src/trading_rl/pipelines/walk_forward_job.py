"""The ``WalkForwardJob`` of the nodes that run walk-forwards (``walk_forward``, ``tuning``): their
sections resolved once from the node inputs."""

from __future__ import annotations

from typing import Any

import pandas as pd

from trading_rl.envs import EnvConfig, periods_per_year_by_symbol
from trading_rl.features.params import PARAMS_PREFIX, FeatureExtractionParams
from trading_rl.phases.walk_forward import WalkForwardJob
from trading_rl.training.params import AgentParams


def walk_forward_job(
    frames: dict[str, pd.DataFrame],
    feature_params: dict[str, Any],
    env_params: dict[str, Any],
    sac_icm_agent_params: dict[str, Any],
    seed: int,
) -> WalkForwardJob:
    """``frames``: prices by symbol (their periods per year); ``feature_params``: the
    ``feature_extraction`` section; ``env_params``: the ``env_construction`` section;
    ``sac_icm_agent_params``: ``sac_icm.agent``."""
    return WalkForwardJob(
        feature_params=feature_params,
        feature_extraction=FeatureExtractionParams.from_mapping(feature_params, PARAMS_PREFIX),
        env_config=dict(env_params.get("env") or {}),
        env=EnvConfig.from_mapping(env_params.get("env"), "env_construction.env"),
        periods_per_year=periods_per_year_by_symbol(env_params.get("periods_per_year"), frames),
        agent_params={"sac_icm": AgentParams.from_mapping(sac_icm_agent_params, "sac_icm.agent")},
        seed=seed,
    )
