"""The ``options_her`` parameter section as a typed dataclass.

Its schema is read from ``phases.options_her.DEFAULT_PHASE_PARAMS``; the HER and option
sub-sections are ``agents.her.HerParams`` and ``agents.options.OptionParams`` (each read from the
defaults dict next to the code that uses it). Those dicts stay the one copy of the defaults, and a
key added there is accepted (and type-checked) without a second edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trading_rl.agents.controller import ControllerConfig
from trading_rl.agents.her import HerParams
from trading_rl.agents.options import OptionParams
from trading_rl.agents.sac_icm import CurriculumParams, SacParams
from trading_rl.config import section_from_defaults, setting
from trading_rl.envs.continuous import EnvConfig
from trading_rl.phases.options_her import DEFAULT_PHASE_PARAMS

PARAMS_PREFIX = "options_her"


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
    # The training env's curriculum, as sac_icm.agent.curriculum (the same keys, stages and rule).
    curriculum: CurriculumParams = setting(CurriculumParams())  # type: ignore[valid-type]  # a Section made at run time by section_from_defaults

    def validate(self, prefix: str) -> None:
        EnvConfig.from_mapping(self.env_overrides, f"{prefix}.env_overrides")
