"""Every conf environment loads through the typed sections, and the code defaults are conf/base's."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.config import ConfigError, Section, setting
from trading_rl.integration.parameter_sections import SECTIONS, resolve_parameters
from trading_rl.training.params import AgentParams

PROJECT_ROOT = Path(__file__).resolve().parents[1]
ENVIRONMENTS = sorted(path.name for path in (PROJECT_ROOT / "conf").iterdir() if path.is_dir() and path.name != "local")


def load_parameters(env: str) -> dict[str, Any]:
    """Parameters as Kedro merges them for ``--env env``: conf/base, then the env on top (soft)."""
    from kedro.config import OmegaConfigLoader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # omegaconf's resolver deprecation notice
        loader = OmegaConfigLoader(
            str(PROJECT_ROOT / "conf"), base_env="base", default_run_env=env, merge_strategy={"parameters": "soft"}
        )
        return loader["parameters"]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_environment_loads_through_the_sections(env):
    parameters = load_parameters(env)
    assert set(parameters) - {"seed", "torch_threads"} == set(SECTIONS), "a section file without a dataclass"
    resolve_parameters(parameters)


def _default_of(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def disagreements(section: Section, prefix: str, defaults: Section | None = None) -> list[str]:
    """Dotted keys whose conf/base value (in ``section``) differs from the dataclass default (for a
    nested section, its field's default instance: ``options_her.sac`` has other defaults than
    ``sac_icm.agent.sac``)."""
    found = []
    for field in dataclasses.fields(section):
        value, key = getattr(section, field.name), f"{prefix}.{field.name}"
        default = _default_of(field) if defaults is None else getattr(defaults, field.name)
        if isinstance(value, Section) and type(value) is type(default):
            found += disagreements(value, key, default)
        elif default is not dataclasses.MISSING and value != default:
            found.append(f"{key}: conf/base {value!r}, code {default!r}")
    return found


def test_code_defaults_equal_conf_base():
    """Defaults live in the dataclasses; conf/base states them for users, and must state the same."""
    base = load_parameters("base")
    found = [
        problem
        for name, section in SECTIONS.items()
        for problem in disagreements(section.from_mapping(base[name], name), name)
    ]
    assert found == []


def test_an_empty_agent_config_gets_the_default_runs_reward_scale():
    scale = load_parameters("base")["sac_icm"]["agent"]["reward_scale"]
    model = build_agent(gym.make("Pendulum-v1"), AgentParams.from_mapping({}, "sac_icm.agent"), seed=0, device="cpu")
    assert scale == 100.0 and model.reward_scale == scale


def test_a_changed_default_is_caught():
    """The agreement check can fail: a section whose default differs from what conf says."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Budget(Section):
        total_timesteps: int = setting(100_000, interval="[1, inf)")

    assert disagreements(Budget.from_mapping({"total_timesteps": 10_000}, "x"), "x") == [
        "x.total_timesteps: conf/base 10000, code 100000"
    ]


def test_unknown_top_level_sections_are_refused_with_a_suggestion():
    parameters = load_parameters("ci")
    with pytest.raises(ConfigError, match=r"unknown parameter 'sac_icn' \(did you mean 'sac_icm'\?\)"):
        resolve_parameters({**parameters, "sac_icn": {"agent": {}}})


def test_an_identity_is_the_same_whether_conf_writes_a_default_out_or_not():
    """``Section.identity`` hashes the typed values: conf/ may state a default or leave it to the code."""
    from trading_rl.envs.continuous import EnvConfig
    from trading_rl.features.params import FeatureParams, ScalerParams
    from trading_rl.provenance import identity_hash

    for kind in (EnvConfig, FeatureParams, ScalerParams, AgentParams):
        left_out = kind.from_mapping({}, "section")
        written_out = kind.from_mapping(left_out.to_dict(), "section")
        assert identity_hash(left_out.identity()) == identity_hash(written_out.identity())
    changed = EnvConfig.from_mapping({"window_size": 2}, "section")
    assert identity_hash(changed.identity()) != identity_hash(EnvConfig().identity())


def test_an_overlay_field_is_checked_as_its_section_and_kept_as_written():
    """``Overlay[X]``: the keys are checked as ``X``'s when the field is parsed (no section re-parses
    them in ``validate``), ``over_defaults`` is ``X`` with them laid over its code defaults, and the
    mapping stays as written (an integer for a float key too), as identities recorded it."""
    from trading_rl.config import Overlay
    from trading_rl.evaluation.validation.regimes import RegimeParams
    from trading_rl.phases.walk_forward import WalkForwardParams
    from trading_rl.training.params import AuxiliaryParams

    auxiliary = AuxiliaryParams.from_mapping({"regimes": {"trend_threshold": 1}}, "sac_icm.agent.auxiliary")
    assert isinstance(auxiliary.regimes, Overlay) and dict(auxiliary.regimes) == {"trend_threshold": 1}
    assert auxiliary.regimes.over_defaults == RegimeParams(trend_threshold=1.0)
    assert auxiliary.to_dict()["regimes"] == {"trend_threshold": 1}
    assert AuxiliaryParams().regimes == {} and AuxiliaryParams().regimes.over_defaults == RegimeParams()
    with pytest.raises(ConfigError, match=r"'sac_icm.agent.auxiliary.regimes.vol_windw' \(did you mean"):
        AuxiliaryParams.from_mapping({"regimes": {"vol_windw": 5}}, "sac_icm.agent.auxiliary")
    with pytest.raises(ConfigError, match=r"'walk_forward.agent_overrides.sac.batch_size' must be in"):
        WalkForwardParams.from_mapping({"agent_overrides": {"sac": {"batch_size": 0}}}, "walk_forward")
    with pytest.raises(ConfigError, match=r"parameter 'walk_forward.agent_overrides' must be a mapping, got 3"):
        WalkForwardParams.from_mapping({"agent_overrides": 3}, "walk_forward")
