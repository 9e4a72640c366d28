"""benchmarks/learning_curve.py variants reach the phase-E switches of the agent it trains."""

from __future__ import annotations

import pytest
from helpers.sp500_env import sp500_returns_spec
from learning_curve import agent_params, load_parameters, parse_variant

from trading_rl.algorithms.sac_icm.auxiliary import AuxiliaryTargets, MarketEncoder
from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.training.curriculum import Curriculum
from trading_rl.training.params import AgentParams

VARIANTS = {
    "sac_icm": "sac_icm",
    "aux": "aux auxiliary.enabled=true",
    "curriculum": "curriculum curriculum.enabled=true",
    "aux_curriculum": "aux_curriculum auxiliary.enabled=true curriculum.enabled=true",
}


@pytest.mark.slow
def test_the_four_phase_e_variants_build_the_agents_they_name():
    splits = {
        "train": {"start": "2010-01-01", "end": "2013-12-31"},
        "test": {"start": "2014-01-01", "end": "2014-12-31"},
    }
    spec = sp500_returns_spec("2009-01-01", "2014-12-31", splits)
    params = load_parameters("base")
    built = {}
    for text in VARIANTS.values():
        variant, overrides = parse_variant(text)
        model = build_agent(
            spec.make_env("train", seed=0),
            AgentParams.from_mapping(agent_params(params, overrides), "sac_icm.agent"),
            seed=0,
            device="cpu",
        )
        env = model.get_env()
        built[variant] = (
            isinstance(model.policy.actor.features_extractor, MarketEncoder),
            env.env_is_wrapped(AuxiliaryTargets)[0],
            env.env_is_wrapped(Curriculum)[0],
        )
    assert built == {
        "sac_icm": (False, False, False),
        "aux": (True, True, False),
        "curriculum": (False, False, True),
        "aux_curriculum": (True, True, True),
    }
