"""Walk-forward arguments for tests from plain mappings, as a node resolves them: the
``walk_forward`` and ``feature_extraction`` sections and the ``WalkForwardJob`` (``sac_icm`` /
``source`` sections as ``AgentParams``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trading_rl.algorithms.es.es import EsParams
from trading_rl.algorithms.vtrace.actor_learner import VTraceLearnerParams
from trading_rl.envs import EnvConfig
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.phases.walk_forward import WalkForwardJob, WalkForwardParams
from trading_rl.training.params import AgentParams

# What a test's ``feature_extraction`` mapping (features and scaler) lacks to be the section: a
# symbol and splits (read by the walk-forward only for ``data_end: train / validation``).
FEATURE_SECTION_REST = {"symbols": ["sp500"], "splits": {"train_fraction": 0.6, "validation_fraction": 0.2}}


def section(params: Mapping[str, Any] | None = None) -> WalkForwardParams:
    return WalkForwardParams.from_mapping(params, "walk_forward")


def feature_section(feature_params: Mapping[str, Any] | None) -> FeatureExtractionParams:
    return FeatureExtractionParams.from_mapping({**FEATURE_SECTION_REST, **(feature_params or {})})


def agent_sections(agent_params: Mapping[str, Any]) -> dict[str, Any]:
    """``sac_icm`` as ``AgentParams`` (the ``source`` of ``options`` / ``shaped`` too), ``vtrace`` /
    ``es`` as their sections; others as given."""
    sections: dict[str, Any] = {}
    for name, value in agent_params.items():
        if name == "sac_icm":
            value = AgentParams.from_mapping(value, "sac_icm.agent")
        elif name == "vtrace":
            value = VTraceLearnerParams.from_mapping(value, "walk_forward.vtrace")
        elif name == "es":
            value = EsParams.from_mapping(value, "walk_forward.es")
        elif name in ("options", "shaped") and "source" in value:
            value = {**value, "source": AgentParams.from_mapping(value["source"], "sac_icm.agent")}
        sections[name] = value
    return sections


def job(
    feature_params: Mapping[str, Any] | None,
    env_config: Mapping[str, Any],
    periods_per_year: Mapping[str, float],
    agent_params: Mapping[str, Any],
    seed: int,
) -> WalkForwardJob:
    return WalkForwardJob(
        feature_extraction=feature_section(feature_params),
        env=EnvConfig.from_mapping(env_config),
        periods_per_year=periods_per_year,
        agent_params=agent_sections(agent_params),
        seed=seed,
    )
