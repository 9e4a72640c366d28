"""Every conf environment loads through the typed sections, and conf/base states no code default."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.config import ConfigError, Section, plain, setting
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


# conf/base keys written out although they equal the code's default, each with why.
RESTATED = {
    "alerting.drift.features.warning": "the code's default is the integer 1; a parsed threshold is a number",
    "alerting.drift.features.critical": "the code's default is the integer 3; a parsed threshold is a number",
    "alerting.channels.jsonl": "under the env's data_root (${globals:data_root}): the default only in base",
}


def restatements(raw: Mapping[str, Any], section: Section, prefix: str, defaults: Section | None = None) -> list[str]:
    """Dotted keys that ``raw`` (a section as conf/base writes it, parsed into ``section``) states with
    the code's default value (for a nested section, its field's default instance: ``options_her.sac``
    has other defaults than ``sac_icm.agent.sac``)."""
    found = []
    known = {field.name: field for field in dataclasses.fields(section)}
    for key, value in raw.items():
        typed, dotted = getattr(section, key), f"{prefix}.{key}"
        default = _default_of(known[key]) if defaults is None else getattr(defaults, key)
        if isinstance(typed, Section) and isinstance(value, Mapping) and type(default) is type(typed):
            found += restatements(value, typed, dotted, default)
        elif default is not dataclasses.MISSING and plain(typed) == plain(default):
            found.append(dotted)
    return found


def test_conf_base_states_no_code_default():
    """Defaults live in the dataclasses, their one home: conf/base states only what has no code
    default or differs from it (``trading-rl params`` prints the resolved sections)."""
    base = load_parameters("base")
    found = [
        key
        for name, kind in SECTIONS.items()
        for key in restatements(base[name] or {}, kind.from_mapping(base[name], name), name)
    ]
    assert sorted(found) == sorted(RESTATED)


def test_the_default_runs_reward_scale_is_the_code_default():
    scale = resolve_parameters(load_parameters("base"))["sac_icm"].agent.reward_scale
    model = build_agent(gym.make("Pendulum-v1"), AgentParams.from_mapping({}, "sac_icm.agent"), seed=0, device="cpu")
    assert scale == 100.0 and model.reward_scale == scale


def test_a_restated_default_is_caught():
    """The one-home check can fail: a conf value equal to the code's default, nested ones too."""

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Budget(Section):
        total_timesteps: int = setting(100_000, interval="[1, inf)")
        seeds: int = setting(2, interval="[1, inf)")

    raw = {"total_timesteps": 100_000, "seeds": 3}
    assert restatements(raw, Budget.from_mapping(raw, "x"), "x") == ["x.total_timesteps"]
    agent = {"sac": {"gamma": 0.99, "tau": 0.01}}
    assert restatements(agent, AgentParams.from_mapping(agent, "a"), "a") == ["a.sac.gamma"]


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
