"""Every parameter section of ``conf/*/parameters*.yml``, by its top-level key, with its check: the
one place where a run's parameters are turned into typed sections.

``resolve_parameters`` resolves the sections a run reads (``hooks.ParameterValidationHooks`` calls it
before the first node, so a bad parameter fails the run before anything is written), runs the checks
that read several sections and refuses top-level keys that no section owns. ``resolved_section``
hands a node its typed section (``pipelines.typed_node``): the section parsed once per distinct
content in this process, so the hook's parse is the run's only one. A new section is added here,
next to its dataclass.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trading_rl.algorithms.options_her.from_spec import OptionsHerParams
from trading_rl.config import ConfigError, Section, plain
from trading_rl.envs.continuous import EnvConstructionParams
from trading_rl.evaluation.ledger.final import FinalEvaluationParams
from trading_rl.evaluation.reporting.tearsheet_panels import TearsheetParams
from trading_rl.evaluation.validation.gates import ValidationParams
from trading_rl.evaluation.validation.regimes import RegimeValidationParams
from trading_rl.export.onnx_export import ExportParams
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.integration.model_registry import PromoteParams
from trading_rl.migration.params import CheckpointMigrationParams
from trading_rl.monitoring.alerting import AlertingParams
from trading_rl.phases.forward.params import ForwardParams
from trading_rl.phases.multi_symbol import MultiSymbolParams
from trading_rl.phases.tuning.params import TuningParams, check_pruning, check_search_space, trial_protocol
from trading_rl.phases.walk_forward import WalkForwardParams, agent_section
from trading_rl.rewards.shaped_training import RewardShaperParams
from trading_rl.runtime.engine import RuntimeParams
from trading_rl.serving.package import ServingParams
from trading_rl.training.params import SacIcmParams

# Top-level keys of conf/*/parameters.yml that are not sections (checked by hooks.ReproducibilityHooks).
RUN_KEYS = ("seed", "torch_threads")
SYMBOL_SECTION = "env_construction"  # the section naming the symbol a run trains on


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
    "alerting": AlertingParams,
    "serving": ServingParams,
}


# Every distinct section content resolved in this process, by (section, content): the parse a node's
# wrapper finds instead of parsing again. Sections are frozen; nothing below mutates one.
_RESOLVED: dict[tuple[str, str], Section] = {}


def resolved_section(name: str, raw: Mapping[str, Any] | Section | None) -> Any:
    """The typed section ``name`` of a run's parameters (``raw``: what Kedro hands over for
    ``params:<name>``), parsed on its first request and the same object on every later one."""
    kind = SECTIONS[name]
    if isinstance(raw, Section):
        if not isinstance(raw, kind):
            raise TypeError(f"parameter '{name}' is a {type(raw).__name__}, not a {kind.__name__}")
        return raw
    key = (name, _content(raw))
    if key not in _RESOLVED:
        section = _RESOLVED[key] = kind.from_mapping(raw, name)
        # Its plain data (every value, code defaults included: what the parameter hook hands the
        # nodes) is the same section.
        _RESOLVED.setdefault((name, _content(plain(section))), section)
    return _RESOLVED[key]


def _content(raw: Any) -> str:
    return json.dumps(raw, sort_keys=True, default=repr)


def configured_symbol(catalog: Any) -> str | None:
    """The run's ``env_construction.symbol``, from its resolved section; ``None`` when the run's
    parameters hold no ``env_construction``. What the hooks name the MLflow run after and check the
    phases' inputs against."""
    section = catalog.load(f"params:{SYMBOL_SECTION}") if f"params:{SYMBOL_SECTION}" in catalog else None
    return resolved_section(SYMBOL_SECTION, section).symbol if section else None


SectionOf = Callable[[str], Any]


def _env_symbol_is_extracted(parameters: Mapping[str, Any], section: SectionOf) -> None:
    symbol = section("env_construction").symbol
    if "feature_extraction" in parameters:
        names = [entry.name for entry in section("feature_extraction").symbols]
        if symbol not in names:
            raise ConfigError(
                f"parameter 'env_construction.symbol' is {symbol!r}, "
                f"which is not among feature_extraction.symbols {names}"
            )


def _walk_forward_agents(parameters: Mapping[str, Any], section: SectionOf) -> None:
    config = section("walk_forward")
    config.with_gap(section("feature_extraction").features)
    # What the walk-forward's SAC+ICM agents train with: sac_icm.agent under the overrides.
    agent_section("sac_icm", {"sac_icm": section("sac_icm").agent}, config.agent_overrides)


def _tuning_bounds(parameters: Mapping[str, Any], section: SectionOf) -> None:
    """What the trials run with is valid at every bound of the search space: the walk_forward
    section under ``tuning.walk_forward``, and ``sac_icm.agent`` under the overrides; with pruning,
    the trials have seeds beyond its rung."""
    tuning = section("tuning")
    protocol = trial_protocol(section("walk_forward"), tuning).with_gap(section("feature_extraction").features)
    check_pruning(tuning, protocol)
    check_search_space(tuning, protocol, section("sac_icm").agent)


# Checks that read more than their own section.
CROSS_CHECKS: dict[str, Callable[[Mapping[str, Any], SectionOf], None]] = {
    "env_construction": _env_symbol_is_extracted,
    "walk_forward": _walk_forward_agents,
    "tuning": _tuning_bounds,
}


def resolve_parameters(parameters: Mapping[str, Any], sections: Iterable[str] | None = None) -> dict[str, Section]:
    """Refuse unknown top-level keys, then resolve ``sections`` (default: every section) and run their
    cross-section checks; the first problem raises ``ConfigError`` naming its dotted key."""
    known = [*RUN_KEYS, *SECTIONS]
    for key in parameters:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f"; known sections: {sorted(SECTIONS)}"
            raise ConfigError(f"unknown parameter '{key}'{hint}")

    def section(name: str) -> Any:
        return resolved_section(name, parameters.get(name))

    names = [name for name in (SECTIONS if sections is None else sections) if name in SECTIONS]
    resolved = {name: section(name) for name in names}
    for name in names:
        if name in CROSS_CHECKS:
            CROSS_CHECKS[name](parameters, section)
    return resolved
