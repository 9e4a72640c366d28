"""Options: sigmoid termination, minimum duration, direction constraints, initiation masks."""

import math

import numpy as np
import pandas as pd
import pytest

from trading_rl.algorithms.options_her.options import (
    CLOSE_POSITION,
    OPEN_LONG,
    OPEN_SHORT,
    OPTION_NAMES,
    SCALP,
    TREND_FOLLOW,
    WAIT,
    OptionParams,
    TradingOptions,
    sigmoid_termination_prob,
)
from trading_rl.envs.layout import ObservationLayout

FEATURES = ["ret_1", "ret_20", "rsi_14"]


def make_obs(layout, n=1, **fields):
    obs = np.zeros((n, layout.dim), dtype=np.float32)
    for name, value in fields.items():
        key = name if name in layout else f"feature:{name}"
        obs[:, layout.index(key)] = value
    return obs


@pytest.fixture
def layout():
    return ObservationLayout(FEATURES, window_size=3)


def test_sigmoid_termination_exact_values():
    assert sigmoid_termination_prob(0, 5, 20) == 0.0
    assert sigmoid_termination_prob(4, 5, 20) == 0.0
    # at min_duration the progress is 0: 0.8 * sigmoid(-0.5 * 10 * 0.5)
    assert sigmoid_termination_prob(5, 5, 20, 0.5) == pytest.approx(0.8 / (1 + math.exp(2.5)), abs=1e-15)
    assert sigmoid_termination_prob(10, 0, 20, 0.5) == pytest.approx(0.4, abs=1e-15)  # half way
    assert sigmoid_termination_prob(19, 5, 20) < 0.8
    assert sigmoid_termination_prob(20, 5, 20) == 1.0
    assert sigmoid_termination_prob(500, 5, 20) == 1.0
    steps = np.arange(0, 30)
    vector = sigmoid_termination_prob(steps, 5, 20, 0.6)
    assert np.array_equal(vector, [sigmoid_termination_prob(int(s), 5, 20, 0.6) for s in steps])
    middle = vector[(steps >= 5) & (steps < 20)]
    assert (middle > 0).all() and (middle <= 0.8).all() and (np.diff(middle) > 0).all()


def test_minimum_duration_beats_success_rule(layout):
    options = TradingOptions(layout, OptionParams(), allow_short=True)
    at_target = make_obs(layout, position_fraction=0.15)  # OpenLong's success rule fires
    for step in range(5):
        assert options.termination_probs([OPEN_LONG], [step], at_target)[0] == 0.0
    assert options.termination_probs([OPEN_LONG], [5], at_target)[0] == 1.0
    flat = make_obs(layout)  # ClosePosition succeeded (flat) but min_duration is 3
    assert options.termination_probs([CLOSE_POSITION] * 3, [0, 1, 2], np.repeat(flat, 3, 0)).tolist() == [0, 0, 0]
    assert options.termination_probs([CLOSE_POSITION], [3], flat)[0] == 1.0
    hit = make_obs(layout, position_fraction=0.1, unrealized_pnl=0.02)  # scalp profit target hit
    assert options.termination_probs([SCALP], [4], hit)[0] == 0.0
    assert options.termination_probs([SCALP], [5], hit)[0] == 1.0


def test_time_caps_and_hard_timeout(layout):
    options = TradingOptions(layout, OptionParams(), allow_short=True)
    still_open = make_obs(layout, position_fraction=0.1)
    p = options.params.close_position
    below = options.termination_probs([CLOSE_POSITION], [p.hard_timeout - 1], still_open)[0]
    assert below == pytest.approx(p.time_cap)
    assert options.termination_probs([CLOSE_POSITION], [p.hard_timeout], still_open)[0] == 1.0
    trending = make_obs(layout, ret_20=2.0)
    t = options.params.trend_follow
    assert options.termination_probs([TREND_FOLLOW], [t.max_steps + 1], trending)[0] == pytest.approx(t.time_cap)
    exhausted = make_obs(layout, ret_20=0.0)
    assert options.termination_probs([TREND_FOLLOW], [t.min_duration], exhausted)[0] == t.exhausted_probability


def test_direction_constraints(layout):
    options = TradingOptions(layout, OptionParams(), allow_short=True)
    rng = np.random.default_rng(0)
    n = 400
    obs = make_obs(layout, n)
    obs[:, layout.index("position_fraction")] = rng.choice([-0.1, 0.0, 0.05, 0.2], n)
    obs[:, layout.index("feature:ret_20")] = rng.normal(0, 1, n)
    actions = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    position = obs[:, layout.index("position_fraction")]
    trend = obs[:, layout.index("feature:ret_20")]

    def run(option):
        return options.transform_actions(np.full(n, option), actions, obs)[:, 0]

    a = actions[:, 0]
    long_ = run(OPEN_LONG)
    assert (long_ >= 0).all() and np.allclose(long_[position < 0.15], np.maximum(0.8 * a, 0)[position < 0.15])
    assert (long_[position >= 0.15] == 0).all()
    short = run(OPEN_SHORT)
    assert (short <= 0).all()
    close = run(CLOSE_POSITION)
    assert (close[position > 0] <= 0).all() and (close[position < 0] >= 0).all() and (close[position == 0] == 0).all()
    assert np.allclose(np.abs(close[close != 0]), np.abs(a[close != 0]))
    trend_actions = run(TREND_FOLLOW)
    moving = trend_actions != 0
    assert (np.sign(trend_actions[moving]) == np.sign(trend[moving])).all()
    assert np.allclose(trend_actions[moving], 0.6 * a[moving])
    assert np.allclose(run(SCALP), a)
    assert (run(WAIT) == 0).all()


def test_initiation_mask_per_row_and_by_name(layout):
    options = TradingOptions(layout, OptionParams(), allow_short=False)
    flat_up = make_obs(layout, ret_20=1.0)
    long_down = make_obs(layout, position_fraction=0.1, ret_20=-0.1)
    batch = np.concatenate([flat_up, long_down])
    mask = options.initiation_mask(batch)
    assert mask.shape == (2, len(OPTION_NAMES))
    assert np.array_equal(mask[0], options.initiation_mask(flat_up)[0])
    assert mask[0].tolist() == [True, False, False, True, True, True]
    assert mask[1].tolist() == [False, False, True, False, True, True]
    shorting = TradingOptions(layout, OptionParams(), allow_short=True)
    assert shorting.initiation_mask(make_obs(layout, ret_20=-1.0))[0, OPEN_SHORT]
    assert not shorting.initiation_mask(make_obs(layout, ret_20=1.0))[0, OPEN_SHORT]


def test_fields_are_read_by_name_not_position():
    rng = np.random.default_rng(1)
    a = ObservationLayout(FEATURES, window_size=3)
    b = ObservationLayout(list(reversed(FEATURES)), window_size=5)
    values = {
        "position_fraction": rng.uniform(-0.2, 0.2, 50),
        "unrealized_pnl": rng.normal(0, 0.01, 50),
        "ret_20": rng.normal(0, 1, 50),
    }
    obs_a, obs_b = make_obs(a, 50), make_obs(b, 50)
    for name, column in values.items():
        key = name if name in a else f"feature:{name}"
        obs_a[:, a.index(key)] = column
        obs_b[:, b.index(key)] = column
    oa, ob = TradingOptions(a, OptionParams(), allow_short=True), TradingOptions(b, OptionParams(), allow_short=True)
    assert np.array_equal(oa.initiation_mask(obs_a), ob.initiation_mask(obs_b))
    chosen = rng.integers(0, 6, 50)
    steps = rng.integers(0, 40, 50)
    assert np.array_equal(oa.termination_probs(chosen, steps, obs_a), ob.termination_probs(chosen, steps, obs_b))


def test_real_confidence_column_replaces_the_proxy():
    layout = ObservationLayout(["ret_20", "sentiment"], window_size=2)
    options = TradingOptions(layout, OptionParams())
    obs = make_obs(layout, 2)
    obs[:, layout.index("feature:ret_20")] = 3.0  # proxy would say bullish
    obs[:, layout.index("feature:sentiment")] = [0.2, 0.9]
    assert options.confidence(obs).tolist() == pytest.approx([0.2, 0.9])
    assert options.initiation_mask(obs)[:, OPEN_LONG].tolist() == [False, True]


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="open_long.bogus"):
        OptionParams.from_mapping({"open_long": {"bogus": 1}}, "options_her.options")
    with pytest.raises(ValueError, match="wait"):
        OptionParams.from_mapping({"wait": {"min_duration": 50}}, "options_her.options")
    with pytest.raises(ValueError, match="trend_feature"):
        TradingOptions(ObservationLayout(["ret_1"], 2), OptionParams())


def test_a_symmetric_price_series_fires_long_and_short_signals_equally_often():
    """The trend is measured from a zero return, not from the training median the scaler centres
    on: on a series whose 20-bar returns are symmetric, bullish and bearish signals fire equally
    often, even with a scaler fitted on an up-trending training period."""
    from trading_rl.features import FeatureParams, compute_features, fit_scaler
    from trading_rl.features.scaling import apply_scaler, scaled_value

    rng = np.random.default_rng(0)
    half = rng.normal(0.0, 0.01, 400)
    training = rng.normal(0.002, 0.01, 400)  # an uptrend: the scaler's median 20-bar return is > 0
    log_returns = np.concatenate([training, half, -half])  # then a path and its mirror image
    index = pd.bdate_range("2001-01-01", periods=log_returns.size + 1)
    close = 100 * np.exp(np.concatenate([[0.0], np.cumsum(log_returns)]))
    prices = pd.DataFrame(
        {"open": close, "high": close * 1.001, "low": close * 0.999, "close": close, "volume": 1e6}, index=index
    )
    features = compute_features(prices, FeatureParams(garch=None))
    scaler = fit_scaler(features.iloc[:401].dropna(), clip=None)
    assert scaler["center"]["ret_20"] > 0.02
    # Symmetric part: 20-bar windows lying wholly inside the path or wholly inside its mirror.
    symmetric = apply_scaler(features, scaler).iloc[np.r_[421:801, 821:1201]]
    layout = ObservationLayout(list(symmetric.columns), window_size=1)
    obs = make_obs(layout, n=len(symmetric))
    for column in symmetric.columns:
        obs[:, layout.index(f"feature:{column}")] = symmetric[column].to_numpy()

    def signal_counts(options):
        mask = options.initiation_mask(obs)
        trend = options.trend(obs)
        threshold = options.params.trend_follow.momentum_threshold
        return (
            mask[:, OPEN_LONG].sum(),
            mask[:, OPEN_SHORT].sum(),
            (trend >= threshold).sum(),
            (trend <= -threshold).sum(),
        )

    from_zero = TradingOptions(layout, OptionParams(), allow_short=True, trend_zero=scaled_value(scaler, "ret_20", 0.0))
    long_open, short_open, up_trend, down_trend = signal_counts(from_zero)
    assert abs(long_open - short_open) <= 0.02 * len(obs)
    assert abs(up_trend - down_trend) <= 0.02 * len(obs) and up_trend > 0
    # Measured from the scaler's centre (the old behaviour) the same bars lean heavily bearish.
    long_median, short_median, _, _ = signal_counts(TradingOptions(layout, OptionParams(), allow_short=True))
    assert short_median > 1.5 * long_median


def test_scaled_value_is_where_a_raw_value_lands():
    from trading_rl.features.scaling import scaled_value

    scaler = {"columns": ["r"], "center": {"r": 0.01}, "scale": {"r": 0.04}, "clip": 5.0, "method": "robust"}
    assert scaled_value(scaler, "r", 0.0) == pytest.approx(-0.25)
    assert scaled_value(scaler, "r", 1.0) == 5.0  # clipped like the data
    with pytest.raises(ValueError, match="'x'"):
        scaled_value(scaler, "x", 0.0)
