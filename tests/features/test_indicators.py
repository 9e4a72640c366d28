"""Indicators against plain-Python loop references, and the shape of the default feature set."""

import math

import numpy as np
import pandas as pd
import pytest

from trading_rl.features import compute_features, max_lookback
from trading_rl.features.indicators import FeatureParams

NO_GARCH = FeatureParams(garch=None)
DEFAULTS = FeatureParams()


def _ema_loop(values, window):
    alpha = 2.0 / (window + 1.0)
    out = [values[0]]
    for value in values[1:]:
        out.append(alpha * value + (1.0 - alpha) * out[-1])
    return out


def _wilder_loop(values, window):
    """Textbook Wilder smoothing of values[1:] (values[0] undefined): SMA seed, then recursion."""
    out = [math.nan] * len(values)
    average = sum(values[1 : window + 1]) / window
    out[window] = average
    for i in range(window + 1, len(values)):
        average = (average * (window - 1) + values[i]) / window
        out[i] = average
    return out


def _rsi_loop(close, window):
    gains = [math.nan] + [max(close[i] - close[i - 1], 0.0) for i in range(1, len(close))]
    losses = [math.nan] + [max(close[i - 1] - close[i], 0.0) for i in range(1, len(close))]
    average_gain, average_loss = _wilder_loop(gains, window), _wilder_loop(losses, window)
    out = []
    for gain, loss in zip(average_gain, average_loss):
        if math.isnan(gain):
            out.append(math.nan)
        elif loss == 0.0:
            out.append(100.0)
        else:
            out.append(100.0 - 100.0 / (1.0 + gain / loss))
    return out


def _atr_ratio_loop(high, low, close, window):
    ranges = [math.nan] + [
        max(high[i] - low[i], abs(high[i] - close[i - 1]), abs(low[i] - close[i - 1])) for i in range(1, len(close))
    ]
    return [atr / price for atr, price in zip(_wilder_loop(ranges, window), close)]


def _bollinger_loop(close, window, num_std):
    percent_b, bandwidth = [math.nan] * len(close), [math.nan] * len(close)
    for i in range(window - 1, len(close)):
        chunk = close[i - window + 1 : i + 1]
        mean = sum(chunk) / window
        std = math.sqrt(sum((x - mean) ** 2 for x in chunk) / window)
        upper, lower = mean + num_std * std, mean - num_std * std
        percent_b[i] = (close[i] - lower) / (upper - lower)
        bandwidth[i] = (upper - lower) / mean
    return percent_b, bandwidth


def _macd_loop(close, fast, slow, signal):
    line = [f - s for f, s in zip(_ema_loop(close, fast), _ema_loop(close, slow))]
    signal_line = _ema_loop(line, signal)
    return (
        [m / c for m, c in zip(line, close)],
        [s / c for s, c in zip(signal_line, close)],
        [(m - s) / c for m, s, c in zip(line, signal_line, close)],
    )


def _assert_matches_after(actual: pd.Series, expected, lookback: int):
    """Equal to 1e-9 from ``lookback`` on, NaN before it."""
    actual = actual.to_numpy()
    assert np.isnan(actual[:lookback]).all()
    np.testing.assert_allclose(actual[lookback:], np.asarray(expected)[lookback:], rtol=1e-9, atol=1e-12)


@pytest.fixture(scope="module")
def small_case(make_prices):
    prices = make_prices(120, seed=7)
    return prices, compute_features(prices, NO_GARCH)


def test_rsi_matches_wilder_loop(small_case):
    prices, features = small_case
    _assert_matches_after(features["rsi_14"], _rsi_loop(prices["close"].tolist(), 14), 14)


def test_atr_ratio_matches_wilder_loop(small_case):
    prices, features = small_case
    expected = _atr_ratio_loop(*(prices[c].tolist() for c in ("high", "low", "close")), 14)
    _assert_matches_after(features["atr_ratio_14"], expected, 14)


def test_bollinger_matches_loop(small_case):
    prices, features = small_case
    percent_b, bandwidth = _bollinger_loop(prices["close"].tolist(), 20, 2.0)
    _assert_matches_after(features["bb_percent_b"], percent_b, 19)
    _assert_matches_after(features["bb_bandwidth"], bandwidth, 19)


def test_macd_matches_ema_loop(small_case):
    prices, features = small_case
    line, signal_line, histogram = _macd_loop(prices["close"].tolist(), 12, 26, 9)
    _assert_matches_after(features["macd"], line, 25)
    _assert_matches_after(features["macd_signal"], signal_line, 33)
    _assert_matches_after(features["macd_hist"], histogram, 33)


def test_window_features_match_loops(small_case):
    prices, features = small_case
    close, volume = prices["close"].tolist(), prices["volume"].tolist()
    log_returns = [math.nan] + [math.log(close[i] / close[i - 1]) for i in range(1, len(close))]
    n = len(close)
    sma_ratio = [math.nan] * n
    ema_ratio = [c / e - 1.0 for c, e in zip(close, _ema_loop(close, 12))]
    realized_vol, volume_z, drawdown = [math.nan] * n, [math.nan] * n, [math.nan] * n
    ret_5 = [math.nan] * 5 + [close[i] / close[i - 5] - 1.0 for i in range(5, n)]
    for i in range(n):
        if i >= 9:
            sma_ratio[i] = close[i] / (sum(close[i - 9 : i + 1]) / 10) - 1.0
        if i >= 20:
            chunk = log_returns[i - 19 : i + 1]
            mean = sum(chunk) / 20
            realized_vol[i] = math.sqrt(sum((x - mean) ** 2 for x in chunk) / 19)
        if i >= 19:
            chunk = volume[i - 19 : i + 1]
            mean = sum(chunk) / 20
            volume_z[i] = (volume[i] - mean) / math.sqrt(sum((x - mean) ** 2 for x in chunk) / 20)
        if i >= 59:
            drawdown[i] = close[i] / max(close[i - 59 : i + 1]) - 1.0
    _assert_matches_after(features["sma_ratio_10"], sma_ratio, 9)
    _assert_matches_after(features["ema_ratio_12"], ema_ratio, 11)
    _assert_matches_after(features["realized_vol_20"], realized_vol, 20)
    _assert_matches_after(features["volume_z_20"], volume_z, 19)
    _assert_matches_after(features["drawdown_60"], drawdown, 59)
    _assert_matches_after(features["ret_5"], ret_5, 5)
    _assert_matches_after(features["logret_5"], [math.nan] * 5 + [math.log(1 + r) for r in ret_5[5:]], 5)


def test_flat_prices_give_neutral_oscillators(make_prices):
    prices = make_prices(80, seed=1)
    prices[["open", "high", "low", "close"]] = 50.0
    prices["volume"] = 1000.0
    features = compute_features(prices, NO_GARCH).iloc[max_lookback(NO_GARCH) :]
    assert (features["rsi_14"] == 50.0).all()
    assert (features["bb_percent_b"] == 0.5).all()
    assert (features["volume_z_20"] == 0.0).all()
    assert np.isfinite(features.to_numpy()).all()


@pytest.mark.parametrize("symbol", ["sp500", "nasdaq"])
def test_default_features_on_real_data(symbol, request):
    prices = request.getfixturevalue(f"{symbol}_prices")
    features = compute_features(prices, DEFAULTS)
    warm_up = max_lookback(DEFAULTS)
    assert features.index.equals(prices.index)
    assert features.shape[1] >= 20
    assert (features.dtypes == np.float64).all()
    after = features.iloc[warm_up:].to_numpy()
    assert np.isfinite(after).all(), features.columns[~np.isfinite(after).all(axis=0)].tolist()
    assert features.iloc[warm_up - 1].isna().any(), "max_lookback is larger than any warm-up"
    assert (features.iloc[warm_up:].std() > 0).all(), "constant feature column"
    assert {"garch_vol", "dow_sin", "dow_cos", "rsi_14", "macd_hist"} <= set(features.columns)


def test_features_are_scale_free(sp500_prices, sp500_garch_params):
    params = FeatureParams.from_mapping({"garch": {"params": sp500_garch_params}})
    rescaled = sp500_prices.copy()
    rescaled[["open", "high", "low", "close"]] *= 37.5
    pd.testing.assert_frame_equal(
        compute_features(rescaled, params),
        compute_features(sp500_prices, params),
        rtol=1e-8,
        atol=1e-12,
    )


def test_max_lookback_follows_params():
    assert max_lookback(DEFAULTS) == 60
    assert max_lookback(FeatureParams(sma_windows=[10, 200])) == 199
    assert max_lookback(FeatureParams(vol_windows=[20], drawdown_window=30, sma_windows=[10])) == 33
    assert max_lookback(FeatureParams.from_mapping({"macd": {"slow": 50, "signal": 20}})) == 49 + 19
    assert FeatureParams().sma_windows == [10, 50], "defaults must not be mutated"


def test_warm_up_follows_max_lookback(make_prices):
    """The longest window here is realised volatility, whose NaNs come from pandas, not a mask."""
    params = FeatureParams.from_mapping(
        {
            "return_horizons": [1, 3],
            "sma_windows": [5],
            "ema_windows": [5],
            "macd": {"fast": 3, "slow": 6, "signal": 3},
            "bollinger": {"window": 10},
            "vol_windows": [40],
            "volume_z_window": 10,
            "drawdown_window": 10,
            "garch": None,
        }
    )
    features = compute_features(make_prices(100, seed=3), params)
    first_complete = int(np.flatnonzero(features.notna().all(axis=1).to_numpy())[0])
    assert first_complete == max_lookback(params) == 40


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"sma_window": [10]}, "sma_window"),
        ({"macd": {"fast": 12, "slower": 30}}, "macd.slower"),
        ({"macd": {"fast": 30}}, "macd.fast"),
        ({"rsi_window": 1}, "rsi_window"),
        ({"ema_windows": [12, 12]}, "ema_windows"),
        ({"bollinger": {"num_std": -1}}, "bollinger.num_std"),
        ({"garch": {"params": {"mu": 0.0}}}, "garch.params"),
        ({"calendar": "yes"}, "calendar"),
    ],
)
def test_bad_params_name_the_key(params, named):
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        FeatureParams.from_mapping(params, "feature_extraction.features")


def test_bad_prices_are_rejected(make_prices):
    prices = make_prices(50, seed=2)
    with pytest.raises(ValueError, match="volume"):
        compute_features(prices.drop(columns="volume"), NO_GARCH)
    with pytest.raises(ValueError, match="sorted"):
        compute_features(prices.iloc[::-1], NO_GARCH)
    for bad_value, problem in ((np.nan, "finite"), (0.0, "> 0")):
        broken = prices.copy()
        broken.iloc[10, broken.columns.get_loc("low")] = bad_value
        with pytest.raises(ValueError, match=f"low .*{problem}"):
            compute_features(broken, NO_GARCH)


def test_calendar_columns_follow_bar_spacing(make_prices):
    def calendar_columns(freq):
        features = compute_features(make_prices(200, seed=4, freq=freq), NO_GARCH)
        return [c for c in features.columns if c.startswith(("dow_", "hour_"))]

    assert calendar_columns("B") == ["dow_sin", "dow_cos"]
    assert calendar_columns("h") == ["dow_sin", "dow_cos", "hour_sin", "hour_cos"]
    assert calendar_columns("W") == []
    prices = make_prices(200, seed=4)
    assert "dow_sin" not in compute_features(prices, FeatureParams(garch=None, calendar=False))
    hourly = compute_features(make_prices(48, seed=4, freq="h"), NO_GARCH)
    np.testing.assert_allclose(hourly["hour_sin"].iloc[6], 1.0)  # 06:00 is a quarter of the day


def _pandas_reference(prices: pd.DataFrame) -> dict[str, pd.Series]:
    """The features whose arithmetic is NumPy's in ``feature_values``, written with pandas' own
    operations as they were before (clip, where/mask, concat-max, pct_change)."""
    close, high, low, volume = prices["close"], prices["high"], prices["low"], prices["volume"]
    change = close.diff()

    def wilder(values, window):
        seeded = pd.Series(np.nan, index=values.index)
        first = int(np.flatnonzero(values.notna().to_numpy())[0])
        seeded.iloc[first + window - 1] = values.iloc[first : first + window].mean()
        seeded.iloc[first + window :] = values.iloc[first + window :]
        return seeded.ewm(alpha=1.0 / window, adjust=False).mean()

    gain, loss = wilder(change.clip(lower=0.0), 14), wilder((-change).clip(lower=0.0), 14)
    total = gain + loss
    ranges = pd.concat([high - low, (high - close.shift(1)).abs(), (low - close.shift(1)).abs()], axis=1)
    rolling, volumes = close.rolling(20), volume.rolling(20)
    width = 2.0 * 2.0 * rolling.std(ddof=0)
    spread = volumes.std(ddof=0)
    return {
        "ret_5": close.pct_change(5),
        "rsi_14": (100.0 * gain / total.where(total > 0)).mask(total == 0, 50.0),
        "atr_ratio_14": wilder(ranges.max(axis=1, skipna=False), 14) / close,
        "bb_percent_b": ((close - (rolling.mean() - width / 2.0)) / width.where(width > 0)).mask(width == 0, 0.5),
        "volume_z_20": ((volume - volumes.mean()) / spread.where(spread > 0)).mask(spread == 0, 0.0),
    }


@pytest.mark.parametrize("flat", [False, True])
def test_numpy_forms_equal_pandas_forms_bit_for_bit(make_prices, flat):
    """The served model recomputes features on every request; its NumPy arithmetic must give the
    floats the pipeline trained on, to the bit (flat stretches: the 50 / 0.5 / 0 branches)."""
    prices = make_prices(400, seed=5)
    if flat:
        prices.iloc[200:260] = prices.iloc[200].to_numpy()
    features = compute_features(prices, NO_GARCH)
    for name, expected in _pandas_reference(prices).items():
        lookback = max_lookback(NO_GARCH) if name != "ret_5" else 5
        actual, wanted = features[name].to_numpy()[lookback:], expected.to_numpy()[lookback:]
        assert np.array_equal(actual.view(np.int64), wanted.view(np.int64)), name
