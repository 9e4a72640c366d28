"""Every parameter section of ``conf/*/parameters*.yml``, by its top-level key, with its check.

``validate_parameters`` runs the checks of the sections a run reads (``hooks.ParameterValidationHooks``
calls it before the first node, so a bad parameter fails the run before anything is written) and
refuses top-level keys that no section owns. A new section is added here, next to its dataclass.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trading_rl.config import ConfigError, Section
from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.evaluation.ledger.final import FinalEvaluationParams
from trading_rl.evaluation.reporting.tearsheet_panels import TearsheetParams
from trading_rl.evaluation.validation.gates import ValidationParams
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.export.onnx_export import ExportParams
from trading_rl.features.indicators import FeatureParams
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.integration.model_registry import PromoteParams
from trading_rl.migration.params import CheckpointMigrationParams
from trading_rl.phases.forward import ForwardParams
from trading_rl.phases.multi_symbol import MultiSymbolParams
from trading_rl.phases.options_her import OptionsHerParams
from trading_rl.phases.reward_shaper import RewardShaperParams
from trading_rl.phases.tuning import TuningParams, check_pruning, check_search_space, trial_protocol
from trading_rl.phases.walk_forward import WalkForwardParams, agent_section
from trading_rl.runtime.engine import RuntimeParams
from trading_rl.training.params import AgentParams, SacIcmParams

# Top-level keys of conf/*/parameters.yml that are not sections (checked by hooks.ReproducibilityHooks).
RUN_KEYS = ("seed", "torch_threads")


SECTIONS: dict[str, type[Section]] = {
    "feature_extraction": FeatureExtractionParams,
    "env_construction": EnvConstructionParams,
    "sac_icm": SacIcmParams,
    "options_her": OptionsHerParams,
    "reward_shaper": RewardShaperParams,
    "checkpoint_migration": CheckpointMigrationParams,
    "export": ExportParams,
    "walk_forward": WalkForwardParams,
    "regime_validation": RegimeValidationParams,
    "validation": ValidationParams,
    "final_evaluation": FinalEvaluationParams,
    "multi_symbol": MultiSymbolParams,
    "runtime": RuntimeParams,
    "tearsheet": TearsheetParams,
    "tuning": TuningParams,
    "forward": ForwardParams,
    "promote": PromoteParams,
}


def _env_symbol_is_extracted(parameters: Mapping[str, Any]) -> None:
    symbol = parameters["env_construction"]["symbol"]
    if "feature_extraction" in parameters:
        section = FeatureExtractionParams.from_mapping(parameters["feature_extraction"], "feature_extraction")
        names = [entry.name for entry in section.symbols]
        if symbol not in names:
            raise ConfigError(
                f"parameter 'env_construction.symbol' is {symbol!r}, "
                f"which is not among feature_extraction.symbols {names}"
            )


def _features(parameters: Mapping[str, Any]) -> FeatureParams:
    """``feature_extraction.features``, whose longest look-back the walk-forward's gap must reach."""
    return FeatureParams.from_mapping(
        (parameters.get("feature_extraction") or {}).get("features"), "feature_extraction.features"
    )


def _walk_forward_agents(parameters: Mapping[str, Any]) -> None:
    config = WalkForwardParams.from_mapping(parameters.get("walk_forward"), "walk_forward")
    config.with_gap(_features(parameters))
    # What the walk-forward's SAC+ICM agents train with: sac_icm.agent under the overrides.
    agent = AgentParams.from_mapping((parameters.get("sac_icm") or {}).get("agent"), "sac_icm.agent")
    agent_section("sac_icm", {"sac_icm": agent}, config.agent_overrides)


def _tuning_bounds(parameters: Mapping[str, Any]) -> None:
    """What the trials run with is valid at every bound of the search space: the walk_forward
    section under ``tuning.walk_forward``, and ``sac_icm.agent`` under the overrides; with pruning,
    the trials have seeds beyond its rung."""
    tuning = TuningParams.from_mapping(parameters.get("tuning"), "tuning")
    walk_forward = WalkForwardParams.from_mapping(parameters.get("walk_forward"), "walk_forward")
    protocol = trial_protocol(walk_forward, tuning).with_gap(_features(parameters))
    check_pruning(tuning, protocol)
    check_search_space(
        tuning, protocol, AgentParams.from_mapping((parameters.get("sac_icm") or {}).get("agent"), "sac_icm.agent")
    )


# Checks that read more than their own section.
CROSS_CHECKS: dict[str, Callable[[Mapping[str, Any]], None]] = {
    "env_construction": _env_symbol_is_extracted,
    "walk_forward": _walk_forward_agents,
    "tuning": _tuning_bounds,
}


def validate_parameters(parameters: Mapping[str, Any], sections: Iterable[str] | None = None) -> None:
    """Refuse unknown top-level keys, then check ``sections`` (default: every section); the first
    problem raises ``ConfigError`` naming its dotted key."""
    known = [*RUN_KEYS, *SECTIONS]
    for key in parameters:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f"; known sections: {sorted(SECTIONS)}"
            raise ConfigError(f"unknown parameter '{key}'{hint}")
    for name in SECTIONS if sections is None else sections:
        if name in SECTIONS:
            SECTIONS[name].from_mapping(parameters.get(name), name)
            if name in CROSS_CHECKS:
                CROSS_CHECKS[name](parameters)
