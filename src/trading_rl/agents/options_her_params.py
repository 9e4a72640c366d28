"""The ``options_her`` parameter section and its HER and options sub-sections, as typed dataclasses.

Their schemas are read from the defaults dicts next to the code that uses them
(``her.DEFAULT_HER_PARAMS``, ``options.DEFAULT_OPTION_PARAMS``, ``hierarchical.DEFAULT_PHASE_PARAMS``):
those dicts stay the one copy of the defaults, and a key added there is accepted (and type-checked)
here without a second edit. Ranges and cross-field rules are the ones below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trading_rl.agents.controller import ControllerConfig
from trading_rl.agents.her import DEFAULT_HER_PARAMS, GOAL_SELECTION_STRATEGIES
from trading_rl.agents.hierarchical import DEFAULT_PHASE_PARAMS
from trading_rl.agents.options import DEFAULT_OPTION_PARAMS, OPTION_NAMES
from trading_rl.agents.sac_icm import SacParams
from trading_rl.config import ConfigError, section_from_defaults, setting
from trading_rl.envs.continuous import EnvConfig

PARAMS_PREFIX = "options_her"

HerParams = section_from_defaults(
    "HerParams",
    DEFAULT_HER_PARAMS,
    ranges={
        "n_sampled_goal": {"interval": "[1, inf)"},
        "goal_selection_strategy": {"choices": GOAL_SELECTION_STRATEGIES},
        "tolerance": {"interval": "[0, inf)"},
        "reward_distance": {"interval": "(0, inf)"},
    },
    module=__name__,
)

_OPTION_RANGES = {
    f"{name}.{key}": value
    for name in OPTION_NAMES
    for key, value in {
        "action_scale": {"interval": "[0, 1]"},
        "min_duration": {"interval": "[0, inf)"},
        "steepness": {"interval": "(0, inf)"},
    }.items()
}


@dataclass(frozen=True, kw_only=True)
class OptionParams(
    # a base made at run time by section_from_defaults
    section_from_defaults("OptionDefaults", DEFAULT_OPTION_PARAMS, ranges=_OPTION_RANGES, module=__name__)  # type: ignore[misc]
):
    """The option rules (``options_her.options`` without ``enabled``)."""

    def validate(self, prefix: str) -> None:
        for name in OPTION_NAMES:
            option = getattr(self, name)
            if not option.min_duration <= option.max_steps <= option.hard_timeout:
                raise ConfigError(
                    f"parameter '{prefix}.{name}.min_duration' ({option.min_duration}) must be <= max_steps "
                    f"({option.max_steps}) <= hard_timeout ({option.hard_timeout})"
                )


@dataclass(frozen=True, kw_only=True)
class OptionsSectionParams(OptionParams):
    """``options_her.options``: the option rules, or ``enabled: false`` for a flat low-level SAC."""

    enabled: bool = True


_PhaseDefaults = section_from_defaults(
    "OptionsHerDefaults",
    {key: value for key, value in DEFAULT_PHASE_PARAMS.items() if key in ("device", "training", "evaluation", "gates")},
    ranges={
        "training.total_timesteps": {"interval": "[1, inf)"},
        "training.log_freq": {"interval": "[1, inf)"},
        "evaluation.split": {"choices": ("train", "validation", "test")},
        "evaluation.goal_episodes": {"interval": "[1, inf)"},
    },
    module=__name__,
)


@dataclass(frozen=True, kw_only=True)
class OptionsHerParams(_PhaseDefaults):  # type: ignore[valid-type,misc]  # a base made at run time by section_from_defaults
    """The ``options_her`` section. ``env_overrides`` are env config keys (checked as such);
    ``sac`` is the low-level SAC (the keys and ranges of ``sac_icm.agent.sac``)."""

    env_overrides: dict[str, Any] = setting(DEFAULT_PHASE_PARAMS["env_overrides"])
    options: OptionsSectionParams = setting(OptionsSectionParams())
    controller: ControllerConfig = setting(ControllerConfig())
    her: HerParams = setting(HerParams())  # type: ignore[valid-type]  # a Section made at run time by section_from_defaults
    sac: SacParams = setting(SacParams())

    def validate(self, prefix: str) -> None:
        EnvConfig.from_mapping(self.env_overrides, f"{prefix}.env_overrides")
