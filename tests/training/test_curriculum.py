"""The curriculum wrapper: stages from the training bars, advancement, costs, and no validation bars."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from arch.data import sp500
from helpers.seeds_env import seeds_env_config
from stable_baselines3.common.vec_env import DummyVecEnv

from trading_rl.envs import build_env_spec
from trading_rl.training.curriculum import (
    Curriculum,
    CurriculumParams,
    curriculum_entry,
    curriculum_states,
    load_curriculum_states,
)

SPLITS = {
    "train": {"start": "2004-01-01", "end": "2010-12-31"},
    "validation": {"start": "2011-01-01", "end": "2012-12-31"},
    "test": {"start": "2013-01-01", "end": "2014-12-31"},
}
# Two easy stages an always-long policy passes in trending windows, then the real task.
STAGES = [
    {
        "name": "bull",
        "regimes": ["bull"],
        "min_regime_share": 0.6,
        "max_volatility_quantile": 0.6,
        "cost_multiplier": 0.1,
        "min_sharpe": 0.0,
        "min_win_rate": 0.0,
    },
    {
        "name": "bull_sideways",
        "regimes": ["bull", "sideways"],
        "min_regime_share": 0.5,
        "max_volatility_quantile": 0.8,
        "cost_multiplier": 0.5,
        "min_sharpe": -100.0,
        "min_win_rate": 0.0,
    },
    {"name": "real", "regimes": "all", "cost_multiplier": 1.0},
]
SETTINGS = {
    "enabled": True,
    "episode_length": 40,
    "min_episodes": 3,
    "window": 2,
    "success_rate": 0.5,
    "stages": STAGES,
}
PREFIX = "sac_icm.agent.curriculum"
PARAMS = CurriculumParams.from_mapping(SETTINGS, PREFIX)


def _frames(prices: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    log_close = np.log(prices["close"])
    features = pd.DataFrame({"r1": log_close.diff(), "r5": log_close.diff(5)}, index=prices.index)
    return prices, (features - features.mean()) / features.std()


@pytest.fixture(scope="module")
def market():
    return _frames(sp500.load().loc["2002-01-01":"2014-12-31"].rename(columns=str.lower))


@pytest.fixture(scope="module")
def spec(market):
    return build_env_spec("sp500", *market, SPLITS, seeds_env_config(episode_length=100), 252.0)


def _run_episode(env, action: float) -> list[dict]:
    env.reset()
    infos, done = [], False
    while not done:
        _, _, terminated, truncated, info = env.step(np.array([action], dtype=np.float32))
        infos.append(info)
        done = terminated or truncated
    return infos


def test_a_scripted_long_policy_advances_stage_by_stage_and_pays_less_in_stage_zero(spec):
    env = Curriculum(spec.make_env("train"), PARAMS)
    env.reset(seed=3)
    fee_rates = {}
    for _ in range(40):
        stage = env.stage
        infos = _run_episode(env, 1.0)
        traded = sum(abs(i["trade_value"]) for i in infos)
        fee_rates.setdefault(stage, infos[-1]["total_fees"] / traded)
        if env.stage == 2:
            break
    assert env.stage == 2
    changes = env.report()["changes"]
    assert [(c["from_stage"], c["to_stage"]) for c in changes] == [(0, 1), (1, 2)]
    assert all(c["episodes_in_stage"] >= 3 and c["recent_success_rate"] >= 0.5 for c in changes)
    assert changes[0]["step"] < changes[1]["step"] and changes[0]["to_stage_name"] == "bull_sideways"
    infos = _run_episode(env, 1.0)
    fee_rates[2] = infos[-1]["total_fees"] / sum(abs(i["trade_value"]) for i in infos)
    commission = spec.config.commission_rate
    assert fee_rates[0] == pytest.approx(0.1 * commission, rel=1e-6)
    assert fee_rates[1] == pytest.approx(0.5 * commission, rel=1e-6)
    assert fee_rates[2] == pytest.approx(commission, rel=1e-6)
    assert env.report()["held_back_by"] == "final stage reached"


def test_stage_zero_episodes_start_in_calm_bull_windows(spec):
    env = Curriculum(spec.make_env("train"), PARAMS)
    starts = env.starts[0]
    in_bull = np.array([np.mean(env.labels[s : s + 40] == "bull") for s in starts])
    assert len(starts) >= 10 and (in_bull >= 0.6).all()
    assert len(env.starts[2]) > len(starts)  # the last stage may start anywhere
    env.reset(seed=0)
    assert env.unwrapped.episode_bounds[0] in set(starts.tolist())


def test_a_policy_that_never_trades_is_held_back_with_the_threshold_named(spec):
    env = Curriculum(spec.make_env("train"), PARAMS)
    env.reset(seed=1)
    for _ in range(4):
        _run_episode(env, 0.0)
    assert env.stage == 0
    held = env.report()["held_back_by"]
    assert "recent success rate 0.00 < success_rate 0.5" in held and "missed sharpe nan < 0.0" in held


def test_the_curriculum_never_steps_on_validation_or_test_bars(market, spec):
    env = Curriculum(
        spec.make_env("train"), CurriculumParams.from_mapping({**SETTINGS, "min_episodes": 1, "window": 1}, PREFIX)
    )
    env.reset(seed=0)
    train_end = pd.Timestamp(SPLITS["train"]["end"])
    seen = [info["timestamp"] for _ in range(30) for info in _run_episode(env, 1.0)]
    assert max(seen) <= train_end and env.stage == 2
    # Stages are built from closes up to the training end only: changing later bars changes nothing.
    prices, features = market
    shocked = prices.copy()
    shocked.loc[shocked.index > train_end, ["open", "high", "low", "close"]] *= 3.0
    other = build_env_spec("sp500", *_frames(shocked), SPLITS, seeds_env_config(episode_length=100), 252.0)
    again = Curriculum(other.make_env("train"), PARAMS)
    for mine, theirs in zip(Curriculum(spec.make_env("train"), PARAMS).starts, again.starts):
        np.testing.assert_array_equal(mine, theirs)
    with pytest.raises(ValueError, match="training env only"):
        Curriculum(spec.make_env("validation"), PARAMS)


def test_observation_noise_touches_the_feature_window_only(spec):
    noisy = [{**STAGES[0], "observation_noise": 0.5}, STAGES[-1]]
    env = Curriculum(spec.make_env("train"), CurriculumParams.from_mapping({**SETTINGS, "stages": noisy}, PREFIX))
    obs, _ = env.reset(seed=0)
    clean = env.unwrapped._obs
    window = env.unwrapped.layout["features"]
    assert not np.allclose(obs[window], clean[window])
    np.testing.assert_array_equal(obs[window.stop :], clean[window.stop :])


def test_state_round_trips_through_a_vec_env_and_reports_history_keys(spec):
    vec = DummyVecEnv([lambda: Curriculum(spec.make_env("train"), PARAMS)])
    vec.seed(0)
    vec.reset()
    for _ in range(3 * 40 + 1):
        vec.step(np.array([[1.0]], dtype=np.float32))
    states = curriculum_states(vec)
    assert list(states) == [0] and states[0]["episodes"] == 3
    fresh = DummyVecEnv([lambda: Curriculum(spec.make_env("train"), PARAMS)])
    load_curriculum_states(fresh, states)
    entry = curriculum_entry(fresh)
    assert entry["curriculum/stage"] == states[0]["stage"] and entry["curriculum/episodes"] == 3
    with pytest.raises(ValueError, match="no curriculum"):
        load_curriculum_states(DummyVecEnv([lambda: spec.make_env("train")]), states)
    assert curriculum_entry(DummyVecEnv([lambda: spec.make_env("train")])) == {}


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"window": 0}, "curriculum.window"),
        ({"stages": [{"regimes": ["moon"]}]}, r"stages\[0\].regimes"),
        ({"stages": [{"name": "a", "min_sharpe": None}, {"name": "b"}]}, r"stages\[0\].min_sharpe"),
        ({"stages": [{"speed": 1}]}, r"stages\[0\].speed"),
        ({"regimes": {"trend_window": 1}}, "curriculum.regimes"),
    ],
)
def test_bad_parameters_name_the_key(params, match):
    with pytest.raises(ValueError, match=match):
        CurriculumParams.from_mapping(params, PREFIX)


def test_env_reset_options_fix_the_start_and_scale_costs(spec):
    env = spec.make_env("train")
    env.reset(seed=0, options={"start_bar": 50, "cost_multiplier": 0.0})
    assert env.episode_bounds == (50, 150)
    _, _, _, _, info = env.step(np.array([1.0], dtype=np.float32))
    assert info["trade_value"] > 0 and info["fees"] == 0.0
    env.reset(seed=0)  # without options: full costs again
    assert env._portfolio.commission_rate == spec.config.commission_rate
    with pytest.raises(ValueError, match="start_bar"):
        env.reset(options={"start_bar": env.n_bars})
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"speed": 2})
