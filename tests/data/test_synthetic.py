"""Planted-edge markets: deterministic, valid bars, the planted edge measurable, the oracle's forecasts
causal and equal to independent references (a regression, brute-force filtering over mean and
volatility regime paths, the GARCH recursion)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from trading_rl.config import ConfigError
from trading_rl.data import stale_open_mask
from trading_rl.data.schemas import validate_prices
from trading_rl.data.selection import SymbolEntry
from trading_rl.data.synthetic import (
    FAMILIES,
    MarketModel,
    forecast_horizon,
    oracle_forecasts,
    oracle_regime_probability,
    oracle_target_exposure,
    synthetic_prices,
)
from trading_rl.features.params import FeatureExtractionParams


def model(family: str, strength: float = 0.0, **settings) -> MarketModel:
    return MarketModel.from_mapping({"family": family, "strength": strength, **settings}, "market")


@pytest.mark.parametrize("family", FAMILIES)
def test_bars_are_deterministic_valid_and_never_stale(family):
    market = model(family, 0.2 if family != "vol" else 0.1, n_bars=1500, seed=3)
    prices = synthetic_prices(market)
    assert prices.equals(synthetic_prices(market))
    assert not prices.equals(synthetic_prices(model(family, market.strength, n_bars=1500, seed=4)))
    validated = validate_prices(prices, family, min_rows=250, source_name="synthetic")
    assert len(validated) == 1500
    assert not stale_open_mask(prices["open"], prices["close"]).any()
    assert (prices["high"] >= prices[["open", "close"]].max(axis=1)).all()
    assert (prices["low"] <= prices[["open", "close"]].min(axis=1)).all()
    gaps = np.log(prices["open"].to_numpy()[1:] / prices["close"].to_numpy()[:-1])
    assert np.abs(gaps).min() > 0 and np.std(gaps) > 0.002  # real overnight gaps, not copies


def test_the_planted_edges_are_there():
    n = 20_000
    fast = np.diff(np.log(synthetic_prices(model("fast", 0.3, n_bars=n)).close.to_numpy()))
    assert np.corrcoef(fast[:-1], fast[1:])[0, 1] == pytest.approx(0.3, abs=0.03)
    null = np.diff(np.log(synthetic_prices(model("null", n_bars=n)).close.to_numpy()))
    assert abs(np.corrcoef(null[:-1], null[1:])[0, 1]) < 0.03
    squared = np.diff(np.log(synthetic_prices(model("vol", 0.1, n_bars=n)).close.to_numpy())) ** 2
    assert np.corrcoef(squared[:-1], squared[1:])[0, 1] > 0.1  # volatility clusters
    slow = np.diff(np.log(synthetic_prices(model("slow", 0.3, n_bars=n)).close.to_numpy()))
    trailing = np.convolve(slow, np.ones(20), "valid")[:-1]  # sum of the 20 returns up to t
    assert np.corrcoef(trailing, slow[20:])[0, 1] > 0.05  # trailing returns reveal the regime


def test_fast_forecast_is_the_ar1_regression():
    market = model("fast", 0.25)
    closes = synthetic_prices(market).close.to_numpy()
    mean, _ = oracle_forecasts(closes, market)
    mu, _ = market.per_bar()
    returns = np.diff(np.log(closes))
    np.testing.assert_allclose(mean[1:], mu + 0.25 * (returns - mu))
    assert mean[0] == mu


def _brute_force_next_mean(returns, mu, sigma, shift, stay):
    """E[r_{n+1} | r_1..r_n] by enumerating every regime path (uniform first regime)."""
    n = len(returns)
    weight_up = weight_total = 0.0
    for path in itertools.product((1.0, -1.0), repeat=n):
        probability = 0.5
        for t in range(n):
            if t:
                probability *= stay if path[t] == path[t - 1] else 1.0 - stay
            probability *= math.exp(-0.5 * ((returns[t] - mu - shift * path[t]) / sigma) ** 2)
        next_up = stay if path[-1] > 0 else 1.0 - stay
        weight_up += probability * next_up
        weight_total += probability
    return mu + shift * (2.0 * weight_up / weight_total - 1.0)


def test_slow_forward_filter_equals_brute_force_over_regime_paths():
    market = model("slow", 0.4, regime_persistence=0.9, n_bars=100)
    closes = synthetic_prices(market).close.to_numpy()[:9]
    mean, variance = oracle_forecasts(closes, market)
    mu, sigma = market.per_bar()
    returns = np.diff(np.log(closes))
    for t in range(1, len(closes)):
        expected = _brute_force_next_mean(returns[:t], mu, sigma, 0.4 * sigma, 0.9)
        assert mean[t] == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert np.all(variance >= sigma * sigma)


def test_vol_forecast_is_the_true_garch_recursion_and_forecasts_are_causal():
    market = model("vol", 0.12, vol_persistence=0.95)
    closes = synthetic_prices(market).close.to_numpy()
    _, variance = oracle_forecasts(closes, market)
    mu, sigma = market.per_bar()
    returns = np.diff(np.log(closes))
    h = sigma**2
    for t in (1, 2, 500):
        h_t = sigma**2
        for r in returns[:t]:
            h_t = sigma**2 * 0.05 + 0.12 * (r - mu) ** 2 + 0.83 * h_t
        assert variance[t] == pytest.approx(h_t, rel=1e-12)
    assert variance[0] == h
    for family, strength in (("fast", 0.2), ("slow", 0.3), ("vol", 0.1), ("regime_vol", 0.6), ("regime_fast", 0.3)):
        m = model(family, strength, n_bars=600)
        closes = synthetic_prices(m).close.to_numpy()
        full, prefix = oracle_forecasts(closes, m), oracle_forecasts(closes[:301], m)
        np.testing.assert_allclose(full[0][:301], prefix[0])
        np.testing.assert_allclose(full[1][:301], prefix[1])
        if family in ("slow", "regime_vol", "regime_fast"):
            regime = oracle_regime_probability(closes, m)
            np.testing.assert_allclose(regime[:301], oracle_regime_probability(closes[:301], m))


def test_oracle_target_respects_cost_band_shorting_and_vol_weights():
    fast = model("fast", 0.5)
    band = 3e-4 / forecast_horizon(fast)  # = 1.5e-4
    assert oracle_target_exposure(2e-4, 1e-4, 0.0, fast, 0.15, False, 3e-4) == 0.15
    assert oracle_target_exposure(1e-4, 1e-4, 0.0, fast, 0.15, False, 3e-4) == 0.0  # inside the band
    assert oracle_target_exposure(-1e-4, 1e-4, 0.15, fast, 0.15, False, 3e-4) == 0.15  # holds through it
    assert oracle_target_exposure(-band * 1.01, 1e-4, 0.15, fast, 0.15, False, 3e-4) == 0.0
    assert oracle_target_exposure(-band * 1.01, 1e-4, 0.0, fast, 0.15, True, 3e-4) == -0.15
    vol = model("vol", 0.1)
    _, sigma = vol.per_bar()
    assert oracle_target_exposure(0.0, sigma**2, 0.0, vol, 0.2, False, 3e-4) == pytest.approx(0.05)
    assert oracle_target_exposure(0.0, 0.2 * sigma**2, 0.0, vol, 0.2, False, 3e-4) == 0.2
    assert forecast_horizon(model("null")) == math.inf


def _brute_force_next_variance(returns, mu, high, low, stay):
    """Var[r_{n+1} | r_1..r_n] by enumerating every volatility path (uniform first state)."""
    weight_high = weight_total = 0.0
    for path in itertools.product((True, False), repeat=len(returns)):
        probability = 0.5
        for t, is_high in enumerate(path):
            if t:
                probability *= stay if is_high == path[t - 1] else 1.0 - stay
            variance = high if is_high else low
            probability *= math.exp(-0.5 * (returns[t] - mu) ** 2 / variance) / math.sqrt(variance)
        weight_high += probability * (stay if path[-1] else 1.0 - stay)
        weight_total += probability
    next_high = weight_high / weight_total
    return next_high * high + (1.0 - next_high) * low


def test_regime_vol_hamilton_filter_equals_brute_force_over_state_paths():
    market = model("regime_vol", 0.7, regime_persistence=0.9, n_bars=100, seed=2)
    closes = synthetic_prices(market).close.to_numpy()[:10]
    mean, variance = oracle_forecasts(closes, market)
    mu, sigma = market.per_bar()
    returns = np.diff(np.log(closes))
    assert (mean == mu).all() and variance[0] == sigma**2
    for t in range(1, len(closes)):
        expected = _brute_force_next_variance(returns[:t], mu, 1.7 * sigma**2, 0.3 * sigma**2, 0.9)
        assert variance[t] == pytest.approx(expected, rel=1e-9)
    # A return 60 sigma out, where both normal densities underflow to 0, reads as the high state.
    _, extreme = oracle_forecasts(np.exp(np.cumsum([0.0, 60 * sigma])), market)
    assert extreme[1] == pytest.approx(0.9 * 1.7 * sigma**2 + 0.1 * 0.3 * sigma**2)


def test_regime_vol_switches_the_variance_and_the_oracle_forecast_is_calibrated():
    market = model("regime_vol", 0.8, n_bars=20_000, seed=1)
    closes = synthetic_prices(market).close.to_numpy()
    returns = np.diff(np.log(closes))
    mu, sigma = market.per_bar()
    assert np.var(returns) == pytest.approx(sigma**2, rel=0.1)  # unconditional variance sigma^2
    assert np.mean(returns) == pytest.approx(mu, abs=3 * sigma / math.sqrt(len(returns)))  # constant drift
    squared = (returns - mu) ** 2
    assert np.corrcoef(squared[:-1], squared[1:])[0, 1] > 0.1  # volatility clusters
    _, variance = oracle_forecasts(closes, market)
    forecast, realised = variance[:-1], squared  # forecast at t for the return at t + 1
    high = forecast > np.median(forecast)
    for half in (high, ~high):  # the forecast is the realised squared return's mean, state by state
        assert realised[half].mean() == pytest.approx(forecast[half].mean(), rel=0.08)
    assert realised[high].mean() > 3 * realised[~high].mean()  # the states differ ninefold, filtered


def test_regime_vol_oracle_delevers_in_the_high_state():
    market = model("regime_vol", 0.6)
    mu, sigma = market.per_bar()
    low, high = 0.4 * sigma**2, 1.6 * sigma**2
    assert oracle_target_exposure(mu, low, 0.0, market, 0.2, False, 3e-4) == pytest.approx(0.2 * 0.25 / 0.4)
    assert oracle_target_exposure(mu, high, 0.2, market, 0.2, False, 3e-4) == pytest.approx(0.2 * 0.25 / 1.6)
    falling = model("regime_vol", 0.6, drift=-0.05)
    assert oracle_target_exposure(mu, low, 0.0, falling, 0.2, False, 3e-4) == 0.0  # long-only: flat
    assert oracle_target_exposure(mu, low, 0.0, falling, 0.2, True, 3e-4) == pytest.approx(-0.125)
    assert forecast_horizon(market) == math.inf


def test_symbols_config_carries_validated_markets():
    def section(*symbols):
        splits = {"train_fraction": 0.6, "validation_fraction": 0.2}
        return FeatureExtractionParams.from_mapping({"symbols": list(symbols), "splits": splits})

    entry = SymbolEntry.from_mapping(
        {"name": "X", "source": "synthetic", "market": {"family": "fast", "strength": 0.2}}
    )
    assert entry.market is not None and entry.market.family == "fast" and entry.market.n_bars == 5000
    params = section({"name": "X", "source": "synthetic", "market": {"family": "slow", "strength": 0.1}}, "sp500")
    assert params.market_model("X") == model("slow", 0.1)
    assert params.market_model("sp500") is None
    with pytest.raises(ConfigError, match=r"symbols\[0\]\.market' is required"):
        section({"name": "X", "source": "synthetic"})
    with pytest.raises(ConfigError, match=r"symbols\[1\]\.market' is required"):
        section("sp500", {"name": "sp500x", "source": "packaged", "market": {"family": "fast"}})
    with pytest.raises(ConfigError, match=r"symbols\[0\]\.market\.family"):
        section({"name": "X", "source": "synthetic", "market": {"family": "trend"}})
    with pytest.raises(ConfigError, match=r"market\.strength"):
        section({"name": "X", "source": "synthetic", "market": {"family": "vol", "strength": 0.99}})


def _brute_force_regime_fast(returns, mu, phi, scale, stay):
    """``(P(s_n = +1 | r_1..r_n), E[r_{n+1} | r_1..r_n])`` by enumerating every regime path (uniform
    first regime; the first return's predecessor is unseen, so it carries no evidence)."""
    weight_up = weight_next_up = weight_total = 0.0
    for path in itertools.product((1.0, -1.0), repeat=len(returns)):
        probability = 0.5
        for t in range(len(returns)):
            if t:
                probability *= stay if path[t] == path[t - 1] else 1.0 - stay
                predicted = phi * path[t] * (returns[t - 1] - mu)
                probability *= math.exp(-0.5 * ((returns[t] - mu - predicted) / scale) ** 2)
        weight_up += probability * (path[-1] > 0)
        weight_next_up += probability * (stay if path[-1] > 0 else 1.0 - stay)
        weight_total += probability
    lean = 2.0 * weight_next_up / weight_total - 1.0
    return weight_up / weight_total, mu + phi * lean * (returns[-1] - mu)


def test_regime_fast_filter_equals_brute_force_over_regime_paths():
    market = model("regime_fast", 0.5, regime_persistence=0.9, n_bars=100, seed=4)
    closes = synthetic_prices(market).close.to_numpy()[:10]
    mean, variance = oracle_forecasts(closes, market)
    regime = oracle_regime_probability(closes, market)
    mu, sigma = market.per_bar()
    returns = np.diff(np.log(closes))
    assert regime[0] == 0.5 and mean[0] == mu
    for t in range(1, len(closes)):
        up, expected = _brute_force_regime_fast(returns[:t], mu, 0.5, math.sqrt(0.75) * sigma, 0.9)
        assert regime[t] == pytest.approx(up, rel=1e-9)
        assert mean[t] == pytest.approx(expected, rel=1e-9, abs=1e-15)
    assert np.all(variance >= 0.75 * sigma**2 * (1 - 1e-12))


def test_regime_fast_hides_its_edge_from_each_timescale_alone_and_the_oracle_is_calibrated():
    market = model("regime_fast", 0.4, regime_persistence=0.98, n_bars=30_000, seed=1)
    closes = synthetic_prices(market).close.to_numpy()
    mu, sigma = market.per_bar()
    deviation = np.diff(np.log(closes)) - mu
    assert np.var(deviation) == pytest.approx(sigma**2, rel=0.05)  # unconditional variance sigma^2
    assert abs(np.corrcoef(deviation[:-1], deviation[1:])[0, 1]) < 0.05  # the fast rule alone: nothing
    trailing = np.convolve(deviation, np.ones(20), "valid")[:-1]
    assert abs(np.corrcoef(trailing, deviation[20:])[0, 1]) < 0.05  # trailing drift alone: nothing
    mean, _ = oracle_forecasts(closes, market)
    forecast = mean[1:-1] - mu  # the forecast at t of the return at t + 1
    slope = np.dot(forecast, deviation[1:]) / np.dot(forecast, forecast)
    assert slope == pytest.approx(1.0, abs=0.1)  # calibrated: the realised move is the forecast on average
    assert np.corrcoef(forecast, deviation[1:])[0, 1] > 0.2  # and the regime-aware forecast has an edge
    regime = oracle_regime_probability(closes, market)
    assert np.mean(np.abs(regime - 0.5) > 0.3) > 0.5  # persistent regimes are mostly told apart


def test_the_regime_probability_is_refused_where_there_is_no_regime():
    market = model("fast", 0.2, n_bars=200)
    with pytest.raises(ValueError, match="family 'fast' has no hidden regime"):
        oracle_regime_probability(synthetic_prices(market).close.to_numpy(), market)
