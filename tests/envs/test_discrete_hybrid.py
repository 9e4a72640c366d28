"""Discrete env, migrator mapping and hybrid env agree with the continuous env."""

import numpy as np
import pandas as pd
import pytest
from helpers.seeds_env import seeds_env_config

from trading_rl.envs import (
    ActionSpaceMigrator,
    ContinuousTradingEnv,
    DiscreteAction,
    DiscreteTradingEnv,
    EnvConfig,
    HybridTradingEnv,
    ObservationLayout,
)


def frames(n=300, seed=4):
    rng = np.random.default_rng(seed)
    close = 50.0 * np.exp(np.cumsum(rng.normal(0.0005, 0.015, n)))
    open_ = close * np.exp(rng.normal(0, 0.004, n))
    index = pd.date_range("2015-01-01", periods=n, freq="B")
    prices = pd.DataFrame(
        {"open": open_, "high": np.maximum(open_, close), "low": np.minimum(open_, close), "close": close},
        index=index,
    )
    features = pd.DataFrame(rng.normal(size=(n, 2)), index=index, columns=["x", "y"])
    return prices, features


def equity_path(env, choose_action):
    obs, info = env.reset()
    equities, obs_path, done = [info["equity"]], [obs], False
    while not done:
        obs, _, terminated, truncated, info = env.step(choose_action(obs, len(equities)))
        equities.append(info["equity"])
        obs_path.append(obs)
        done = terminated or truncated
    return equities, obs_path


@pytest.mark.parametrize("allow_short", [False, True])
def test_discrete_env_equals_continuous_env_driven_by_migrated_actions(allow_short):
    prices, features = frames()
    config = dict(
        evaluation=True,
        smoothing_window=1,
        allow_short=allow_short,
        max_position_pct=0.6,
        action_mode="trade",
        window_size=10,
    )
    discrete_actions = np.random.default_rng(9).integers(0, 7, size=400)
    # Pyramiding needs a profitable long: make ADD_TO_WINNER common after buys.
    discrete_actions[::5] = DiscreteAction.ADD_TO_WINNER

    discrete = DiscreteTradingEnv(prices, features, EnvConfig.from_mapping(config))
    equities_d, obs_d = equity_path(discrete, lambda obs, k: discrete_actions[k])

    continuous = ContinuousTradingEnv(prices, features, EnvConfig.from_mapping(config))
    migrator = ActionSpaceMigrator(continuous.layout, 0.1)
    equities_c, obs_c = equity_path(
        continuous,
        lambda obs, k: np.array([migrator.to_continuous(discrete_actions[k], obs)], dtype=np.float32),
    )
    hybrid = HybridTradingEnv(prices, features, EnvConfig.from_mapping(config))
    equities_h, _ = equity_path(hybrid, lambda obs, k: discrete_actions[k])

    assert len(equities_d) == len(prices) - 9
    assert equities_d == equities_c == equities_h
    np.testing.assert_array_equal(np.stack(obs_d), np.stack(obs_c))
    assert len(set(np.round(equities_d, 6))) > 50  # the policy actually traded


def test_add_to_winner_buys_only_into_a_profitable_long():
    layout = ObservationLayout(["x"], window_size=2)
    migrator = ActionSpaceMigrator(layout, 0.1)
    obs = np.zeros((3, layout.dim), dtype=np.float32)
    obs[0, layout.index("position_fraction")], obs[0, layout.index("unrealized_pnl")] = 0.1, 0.02
    obs[1, layout.index("position_fraction")], obs[1, layout.index("unrealized_pnl")] = 0.1, -0.02
    obs[2, layout.index("position_fraction")], obs[2, layout.index("unrealized_pnl")] = -0.1, 0.02
    add = DiscreteAction.ADD_TO_WINNER
    assert [migrator.to_continuous(add, o) for o in obs] == [0.5, 0.0, 0.0]
    np.testing.assert_array_equal(migrator.to_continuous(np.full(3, int(add)), obs), [0.5, 0.0, 0.0])


def test_mapping_table_and_nearest_discrete():
    migrator = ActionSpaceMigrator(ObservationLayout(["x"], window_size=1), 0.1)
    flat = np.zeros(migrator.layout.dim, dtype=np.float32)
    table = {a: migrator.to_continuous(int(a), flat) for a in DiscreteAction}
    assert table == {
        DiscreteAction.HOLD: 0.0,
        DiscreteAction.BUY_SMALL: pytest.approx(0.33, abs=1e-7),
        DiscreteAction.BUY_MEDIUM: pytest.approx(0.66, abs=1e-7),
        DiscreteAction.BUY_LARGE: 1.0,
        DiscreteAction.SELL_PARTIAL: -0.5,
        DiscreteAction.SELL_ALL: -1.0,
        DiscreteAction.ADD_TO_WINNER: 0.0,  # flat: nothing to add to
    }
    # Values survive a float32 action space unchanged.
    assert all(float(np.float32(v)) == v for v in table.values())
    # Round trip for every unconditional action.
    for action in list(DiscreteAction)[:6]:
        assert migrator.to_discrete(table[action]) == action
    cases = {0.0: 0, 0.1: 0, -0.1: 0, 0.12: 1, 0.49: 1, 0.5: 2, 0.8: 2, 0.84: 3, 0.95: 3, -0.2: 4, -0.74: 4, -0.8: 5}
    for value, expected in cases.items():
        assert migrator.to_discrete(value) == expected, value
        assert migrator.to_discrete(np.array([value])) == expected, value
    np.testing.assert_array_equal(migrator.to_discrete(np.array(list(cases))), list(cases.values()))
    with pytest.raises(ValueError, match="lie in"):
        migrator.to_continuous(7, flat)


def test_discrete_env_ignores_smoothing_and_reports_the_action():
    prices, features = frames(n=40)
    env = DiscreteTradingEnv(prices, features, seeds_env_config(evaluation=True, smoothing_window=5))
    assert env.action_space.n == 7
    env.reset()
    _, _, _, _, info = env.step(DiscreteAction.BUY_LARGE)
    assert info["action_smoothed"] == 1.0 and info["action_discrete"] == "BUY_LARGE"
    _, _, _, _, info = env.step(np.int64(DiscreteAction.SELL_ALL))
    assert info["action_smoothed"] == -1.0 and info["position"] == 0.0


def test_hybrid_env_smooths_continuous_and_discrete_alike():
    prices, features = frames(n=40)
    hybrid = HybridTradingEnv(prices, features, seeds_env_config(evaluation=True))  # smoothing_window=3: alpha 0.5
    hybrid.reset()
    _, _, _, _, info = hybrid.step(DiscreteAction.BUY_LARGE)
    assert info["action_smoothed"] == 1.0
    _, _, _, _, info = hybrid.step(np.array([0.0], dtype=np.float32))
    assert info["action_smoothed"] == 0.5
    _, _, _, _, info = hybrid.step(np.array([DiscreteAction.SELL_ALL]))
    assert info["action_smoothed"] == pytest.approx(0.5 * -1.0 + 0.5 * 0.5)
