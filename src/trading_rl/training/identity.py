"""The configuration of a trained ``sac_icm`` agent as its identity sees it: recorded in the model
when it is trained, rebuilt from a run's parameters when the model is evaluated on the test split
(``evaluation.ledger.final``), so the two can be compared key by key."""

from __future__ import annotations

from typing import Any

from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.evaluation.ledger.final import trained_configuration
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.training.params import AgentParams


def sac_icm_configuration(
    agent_params: AgentParams,
    env_construction: EnvConstructionParams,
    feature_extraction: FeatureExtractionParams,
    seed: int,
) -> dict[str, Any]:
    """``trained_configuration`` of the sac_icm phase's agent: ``sac_icm.agent`` without its
    run-time keys and switched-off sections (``AgentParams.identity_view``)."""
    agent = AgentParams.identity_view(agent_params.to_dict())
    return trained_configuration("sac_icm", agent, env_construction, feature_extraction, seed)
