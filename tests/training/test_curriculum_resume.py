"""A resumed sac_icm run continues its curriculum where the resume checkpoint left it."""

from __future__ import annotations

import pytest
from helpers.sp500_env import sp500_returns_spec

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.training.loop import train_agent
from trading_rl.training.params import AgentParams

PARAMS = {
    "sac": {"learning_starts": 32, "batch_size": 16, "buffer_size": 1000},
    "policy": {"net_arch": [16]},
    "icm": {"enabled": False},
    "curriculum": {"enabled": True, "episode_length": 20, "min_episodes": 1, "window": 1, "success_rate": 0.0},
    "training": {"total_timesteps": 160, "eval_freq": 80, "resume_every": 50},
}


IDENTITY = {"phase": "sac_icm", "symbol": "sp500", "periods_per_year": 252.0}  # the resume checkpoint's run identity


class _Stop(Exception):
    pass


@pytest.mark.slow
def test_resume_restores_the_curriculum_stage(tmp_path):
    splits = {
        "train": {"start": "2006-01-01", "end": "2008-12-31"},
        "validation": {"start": "2009-01-01", "end": "2009-12-31"},
    }
    spec = sp500_returns_spec("2005-01-01", "2009-12-31", splits)

    def stop_after_first_evaluation(metrics, step):
        raise _Stop

    model = build_agent(
        spec.make_env("train", seed=0), AgentParams.from_mapping(PARAMS, "sac_icm.agent"), seed=0, device="cpu"
    )
    with pytest.raises(_Stop):
        train_agent(
            model,
            lambda: spec.make_env("validation"),
            AgentParams.from_mapping(PARAMS, "sac_icm.agent"),
            tmp_path,
            metrics_callback=stop_after_first_evaluation,
            **IDENTITY,
        )
    assert model.get_env().get_attr("stage")[0] >= 3  # success_rate 0: one stage per finished episode

    fresh = build_agent(
        spec.make_env("train", seed=0), AgentParams.from_mapping(PARAMS, "sac_icm.agent"), seed=0, device="cpu"
    )
    outcome = train_agent(
        fresh,
        lambda: spec.make_env("validation"),
        AgentParams.from_mapping(PARAMS, "sac_icm.agent"),
        tmp_path,
        **IDENTITY,
    )
    assert outcome.resumed_from == 50
    # The curriculum counts on from the checkpoint (a fresh one would have seen 110 steps) and
    # reports each stage change once, in order.
    assert outcome.model.get_env().get_attr("steps")[0] == 160
    changes = [c for entry in outcome.history for c in entry["curriculum/changes"]]
    assert [c["to_stage"] for c in changes] == [1, 2, 3, 4]
    assert [c["step"] for c in changes] == [20, 40, 70, 90]  # the resumed run starts a fresh episode at 50
