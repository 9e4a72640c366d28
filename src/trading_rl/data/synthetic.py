"""Planted-edge markets: deterministic OHLCV with a known, learnable edge, and the edge's oracle.

Why: on real data "no edge over buy-and-hold" cannot tell a market without an edge from a learner
that cannot learn. These markets are positive and negative controls: the edge is planted, its size
is a parameter, and the best *causal* policy given the true process (the oracle) says how much of
it a learner could have taken.

Every family draws close-to-close log returns ``r_t`` per bar (``mu`` = drift per bar, ``sigma`` =
unconditional volatility per bar, both from the annual figures and the bar spacing):

- ``null``: ``r_t = mu + sigma e_t`` -- drift, nothing to time.
- ``fast``: returns are AR(1) around the drift, ``r_t - mu = phi (r_{t-1} - mu) + sqrt(1 - phi^2)
  sigma e_t`` with ``phi = strength``: the latest return (the ``logret_1`` feature) predicts the next.
- ``slow``: a hidden two-state Markov regime ``s_t = +-1`` (stay probability ``regime_persistence``)
  shifts the mean: ``r_t = mu + strength sigma s_t + sigma e_t``. The regime is never observed; it
  is revealed, with a lag, by trailing returns.
- ``vol``: GARCH(1,1) variance, ``h_t = omega + alpha (r_{t-1} - mu)^2 + beta h_{t-1}`` with
  ``alpha = strength``, ``alpha + beta = vol_persistence`` and the unconditional variance
  ``sigma^2``: the mean is constant, the risk is predictable (``garch_vol``, ``realized_vol_n``).
- ``regime_vol``: a hidden two-state Markov regime ``s_t = +-1`` (stay probability
  ``regime_persistence``) switches the variance: ``r_t = mu + sqrt(sigma^2 (1 + strength s_t)) e_t``.
  The drift is constant, the unconditional variance is ``sigma^2``; the high state is revealed, with
  a lag, by large returns. GARCH(1,1) is the wrong model here, and on persistent regimes its fit
  tends to integrated (``alpha + beta = 1``): the family pins the GARCH feature's fallback.
- ``regime_fast``: two timescales. A hidden two-state Markov regime ``s_t = +-1`` (stay probability
  ``regime_persistence``) sets the sign of a fast AR(1) edge, ``r_t - mu = phi s_t (r_{t-1} - mu) +
  sqrt(1 - phi^2) sigma e_t`` with ``phi = strength``: momentum in one regime, reversal in the
  other. The unconditional variance is ``sigma^2`` and the returns are uncorrelated on average, so
  neither the fast rule nor the regime alone pays: the regime must be inferred (from the products
  of successive returns) to know which way to trade the last return. The control of temporal
  abstraction: an option per regime is the structure the options layer is meant to find.

Bars: the open sits on the Brownian bridge between the previous close and this close at the
fraction ``overnight_share`` of the bar's variance (so the gap carries that share of the move, and
conditioning on ``r_t`` nothing about the regime or the next return is left in the open: the
oracle that reads closes only is the best causal one). Opens are never stale (the gap is never
zero); highs and lows extend past the open and close by half-normal excursions; volume is
log-normal and rises with the bar's volatility.

Oracle (``oracle_forecasts``): from the closes up to bar ``t`` and the true parameters, the
expected next log return ``E[r_{t+1} | closes <= t]`` (the forward filter of the hidden regime for
``slow`` and ``regime_fast``, the Hamilton filter of the hidden volatility state for ``regime_vol``)
and its variance forecast. ``OraclePolicy`` turns them into the env's actions.
``oracle_regime_probability`` is the filtered probability of the hidden state itself (what an
agent's options should align with).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from trading_rl.config import ConfigError, Section, setting
from trading_rl.data.quality import infer_periods_per_year

FAMILIES = ("null", "fast", "slow", "vol", "regime_vol", "regime_fast")
# Families with a hidden two-state regime, whose filtered probability the oracle reads.
REGIME_FAMILIES = ("slow", "regime_vol", "regime_fast")
# Families whose mean is the constant drift and whose variance is predictable: their oracle times risk.
RISK_FAMILIES = ("vol", "regime_vol")
# The risk families' oracle holds cap x min(1, VOL_TARGET_SHARE sigma^2 / variance): weights proportional to
# 1 / variance (mean-variance optimal for a constant mean) that reach the cap only when the variance
# forecast falls below this share of the unconditional one, so the cap seldom flattens them.
VOL_TARGET_SHARE = 0.25
_MIN_GAP = 1e-7  # smallest |log gap|: an open equal to the previous close would read as stale


@dataclass(frozen=True, kw_only=True)
class MarketModel(Section):
    """A planted-edge market (``feature_extraction.symbols[i].market``). ``strength``: ``fast`` the
    AR(1) coefficient of returns, ``slow`` the regime's mean shift in units of ``sigma``, ``vol`` the
    GARCH ``alpha``, ``regime_vol`` the regimes' variance shift in units of ``sigma^2`` (variance
    ``sigma^2 (1 +- strength)``), ``regime_fast`` the AR(1) coefficient whose sign the regime sets;
    ignored by ``null``."""

    family: Literal["null", "fast", "slow", "vol", "regime_vol", "regime_fast"]
    strength: float = setting(0.0, interval="[0, 1)")
    n_bars: int = setting(5000, interval="[100, inf)")
    seed: int = setting(0, interval="[0, inf)")
    bar_frequency: str = "B"  # a pandas offset alias: B (business days), D, h, 15min, ...
    start: str = "2000-01-03"
    drift: float = setting(0.05, interval="(-1, 1)")  # annual log drift
    volatility: float = setting(0.16, interval="(0, 2)")  # annual, unconditional
    overnight_share: float = setting(0.2, interval="(0, 1)")  # share of a bar's variance before its open
    regime_persistence: float = setting(0.99, interval="(0.5, 1)")  # regime families: P(regime stays)
    vol_persistence: float = setting(0.97, interval="(0, 1)")  # vol: alpha + beta
    start_price: float = setting(100.0, interval="(0, inf)")

    def validate(self, prefix: str) -> None:
        if self.family == "vol" and self.strength >= self.vol_persistence:
            raise ConfigError(
                f"parameter '{prefix}.strength' (GARCH alpha {self.strength}) must be below "
                f"'{prefix}.vol_persistence' ({self.vol_persistence})"
            )
        try:
            pd.tseries.frequencies.to_offset(self.bar_frequency)
        except ValueError as exc:
            raise ConfigError(f"parameter '{prefix}.bar_frequency' is not a pandas frequency: {exc}") from exc

    def index(self) -> pd.DatetimeIndex:
        return pd.date_range(self.start, periods=self.n_bars, freq=self.bar_frequency, name="timestamp")

    def per_bar(self) -> tuple[float, float]:
        """``(mu, sigma)``: drift and unconditional volatility per bar, from the bar spacing."""
        periods = _periods_per_year(self.start, self.n_bars, self.bar_frequency)
        return self.drift / periods, self.volatility / math.sqrt(periods)


@functools.lru_cache(maxsize=64)
def _periods_per_year(start: str, n_bars: int, bar_frequency: str) -> float:
    """Cached: the oracle asks at every step, and building the index takes a tenth of a second."""
    return infer_periods_per_year(pd.date_range(start, periods=n_bars, freq=bar_frequency))


def _hidden_regime(model: MarketModel, rng: np.random.Generator) -> np.ndarray:
    """A symmetric two-state Markov chain of ``+-1`` (stay probability ``regime_persistence``),
    started from either state with probability 1/2 (its stationary distribution)."""
    switches = rng.random(model.n_bars) >= model.regime_persistence
    return np.where(rng.random() < 0.5, 1.0, -1.0) * np.cumprod(np.where(switches, -1.0, 1.0))


def _log_returns(model: MarketModel, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Close-to-close log returns and each bar's conditional volatility."""
    mu, sigma = model.per_bar()
    n, phi = model.n_bars, model.strength
    shocks = rng.standard_normal(n)
    if model.family in ("fast", "regime_fast"):
        coefficient = phi * (_hidden_regime(model, rng) if model.family == "regime_fast" else np.ones(n))
        deviation = np.empty(n)
        deviation[0] = sigma * shocks[0]
        scale = math.sqrt(1.0 - phi * phi) * sigma
        for t in range(1, n):
            deviation[t] = coefficient[t] * deviation[t - 1] + scale * shocks[t]
        return mu + deviation, np.full(n, scale)
    if model.family == "slow":
        regime = _hidden_regime(model, rng)
        return mu + model.strength * sigma * regime + sigma * shocks, np.full(n, sigma)
    if model.family == "regime_vol":
        bar_vol = sigma * np.sqrt(1.0 + model.strength * _hidden_regime(model, rng))
        return mu + bar_vol * shocks, bar_vol
    if model.family == "vol":
        alpha = model.strength
        beta = model.vol_persistence - alpha
        omega = sigma * sigma * (1.0 - model.vol_persistence)
        variance = np.empty(n)
        returns = np.empty(n)
        h = sigma * sigma
        for t in range(n):
            variance[t] = h
            returns[t] = mu + math.sqrt(h) * shocks[t]
            h = omega + alpha * (returns[t] - mu) ** 2 + beta * h
        return returns, np.sqrt(variance)
    return mu + sigma * shocks, np.full(n, sigma)


def synthetic_prices(model: MarketModel) -> pd.DataFrame:
    """OHLCV bars of ``model`` (deterministic in ``model.seed``), shaped like ``load_prices``' output."""
    rng = np.random.default_rng(model.seed)
    returns, bar_vol = _log_returns(model, rng)
    n, share = model.n_bars, model.overnight_share
    log_close = math.log(model.start_price) + np.cumsum(returns)
    previous_close = np.concatenate([[math.log(model.start_price)], log_close[:-1]])
    # Brownian bridge from the previous close to this close, read at the open's share of the bar.
    gap = share * returns + math.sqrt(share * (1.0 - share)) * bar_vol * rng.standard_normal(n)
    gap = np.where(np.abs(gap) < _MIN_GAP, np.copysign(_MIN_GAP, gap), gap)
    log_open = previous_close + gap
    intraday = math.sqrt(1.0 - share) * bar_vol
    log_high = np.maximum(log_open, log_close) + 0.5 * intraday * np.abs(rng.standard_normal(n))
    log_low = np.minimum(log_open, log_close) - 0.5 * intraday * np.abs(rng.standard_normal(n))
    _, sigma = model.per_bar()
    volume = np.round(1e6 * (bar_vol / sigma) * np.exp(0.3 * rng.standard_normal(n)))
    frame = pd.DataFrame(
        {
            "open": np.exp(log_open),
            "high": np.exp(log_high),
            "low": np.exp(log_low),
            "close": np.exp(log_close),
            "volume": np.maximum(volume, 1.0),
        },
        index=model.index(),
    )
    frame.attrs["source"] = f"synthetic:{model.family}(strength={model.strength}, seed={model.seed})"
    return frame


def oracle_forecasts(closes: np.ndarray, model: MarketModel) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, variance)`` of the next close-to-close log return given the closes up to each bar,
    under the true parameters of ``model``: entry ``t`` uses ``closes[: t + 1]`` only. The first
    bar has no return yet and gets the unconditional forecast."""
    mu, sigma = model.per_bar()
    returns = np.diff(np.log(np.asarray(closes, dtype=np.float64)))
    n = len(returns) + 1
    mean, variance = np.full(n, mu), np.full(n, sigma * sigma)
    if model.family == "fast":
        phi = model.strength
        mean[1:] = mu + phi * (returns - mu)
        variance[:] = (1.0 - phi * phi) * sigma * sigma
    elif model.family == "vol":
        alpha = model.strength
        beta = model.vol_persistence - alpha
        omega = sigma * sigma * (1.0 - model.vol_persistence)
        h = sigma * sigma
        for t, r in enumerate(returns, start=1):
            h = omega + alpha * (r - mu) ** 2 + beta * h
            variance[t] = h
    elif model.family in REGIME_FAMILIES:
        stay = model.regime_persistence
        up = _filtered_regime(returns, model)
        lean = 2.0 * (stay * up + (1.0 - stay) * (1.0 - up)) - 1.0  # E[s_{t+1} | returns so far]
        if model.family == "slow":
            shift = model.strength * sigma
            mean[1:] = mu + shift * lean
            variance[:] = sigma * sigma + shift * shift - (mean - mu) ** 2
        elif model.family == "regime_vol":
            variance[1:] = sigma * sigma * (1.0 + model.strength * lean)
        else:  # regime_fast: the regime signs the AR(1) coefficient
            phi, deviation = model.strength, returns - mu
            mean[1:] = mu + phi * lean * deviation
            variance[:] = (1.0 - phi * phi) * sigma * sigma
            variance[1:] += (phi * deviation) ** 2 * (1.0 - lean * lean)
    return mean, variance


def oracle_regime_probability(closes: np.ndarray, model: MarketModel) -> np.ndarray:
    """``P(s_t = +1 | closes <= t)``, the filtered probability of the hidden regime at each bar
    (``regime_vol``: of the high-variance state); 1/2 at the first bar, which has no return yet.
    What an agent's options or exposure should follow on a regime family."""
    if model.family not in REGIME_FAMILIES:
        raise ValueError(f"market family '{model.family}' has no hidden regime (one of {REGIME_FAMILIES})")
    returns = np.diff(np.log(np.asarray(closes, dtype=np.float64)))
    return np.concatenate([[0.5], _filtered_regime(returns, model)])


def _filtered_regime(returns: np.ndarray, model: MarketModel) -> np.ndarray:
    """Forward (Hamilton) filter of a regime family's hidden state: entry ``k`` is ``P(s = +1 |
    returns[: k + 1])``. Each return's log-likelihood ratio of the two states enters a log-odds
    recursion, which neither underflows (a return far in the tail) nor reaches 0 or 1 (the prior
    stays in ``[1 - stay, stay]``)."""
    mu, sigma = model.per_bar()
    stay, deviation = model.regime_persistence, returns - mu
    if model.family == "slow":  # N(+shift, sigma^2) against N(-shift, sigma^2)
        log_ratio = 2.0 * model.strength * deviation / sigma
    elif model.family == "regime_vol":  # N(0, high) against N(0, low)
        high, low = sigma * sigma * (1.0 + model.strength), sigma * sigma * (1.0 - model.strength)
        log_ratio = -0.5 * deviation**2 * (1.0 / high - 1.0 / low) - 0.5 * math.log(high / low)
    else:  # regime_fast: N(+phi d_prev, scale^2) against N(-phi d_prev, scale^2)
        scale_squared = (1.0 - model.strength**2) * sigma * sigma
        log_ratio = np.zeros_like(deviation)  # the first return's predecessor is unseen: no evidence
        log_ratio[1:] = 2.0 * model.strength * deviation[1:] * deviation[:-1] / scale_squared
    up, filtered = 0.5, np.empty(len(returns))
    for k, evidence in enumerate(log_ratio):
        prior = stay * up + (1.0 - stay) * (1.0 - up)
        log_odds = math.log(prior / (1.0 - prior)) + evidence
        up = 1.0 / (1.0 + math.exp(-log_odds)) if log_odds >= 0 else 1.0 - 1.0 / (1.0 + math.exp(log_odds))
        filtered[k] = up
    return filtered


def forecast_horizon(model: MarketModel) -> float:
    """Bars over which a forecast's deviation from the drift persists (its sum over the future is
    ``horizon x`` the next bar's): ``1 / (1 - phi)`` for ``fast`` (and ``regime_fast``, whose regime
    persists over many bars), ``1 / (2 (1 - p))`` for ``slow``; infinite where only the constant
    drift is forecast (``null``, ``vol``, ``regime_vol``)."""
    if model.family in ("fast", "regime_fast"):
        return 1.0 / (1.0 - model.strength)
    if model.family == "slow":
        return 1.0 / (2.0 * (1.0 - model.regime_persistence))
    return math.inf


def oracle_target_exposure(
    mean: float, variance: float, exposure: float, model: MarketModel, cap: float, allow_short: bool, cost: float
) -> float:
    """The oracle's target position (fraction of equity, signed) given its forecast and its
    current ``exposure``. Mean-timing families (null, fast, slow) hold the cap on the side of the
    forecast mean; a position is opened or turned only when the mean beats ``cost / horizon`` (the
    one-way cost per unit traded, spread over the bars the forecast persists: ``forecast_horizon``),
    so that costs are not paid for noise. The risk families (``vol``, ``regime_vol``) hold
    ``cap x min(1, VOL_TARGET_SHARE sigma^2 / variance)`` on the drift's side: mean-variance weights
    ``mu / (gamma variance)`` with the risk aversion ``gamma`` that puts the unconditional variance at
    ``VOL_TARGET_SHARE`` of the cap, clipped to the cap."""
    if model.family in RISK_FAMILIES:
        mu, sigma = model.per_bar()
        side = 1.0 if mu > 0 else (-1.0 if allow_short and mu < 0 else 0.0)
        return side * cap * min(1.0, VOL_TARGET_SHARE * sigma * sigma / variance)
    band = cost / forecast_horizon(model)
    short = -cap if allow_short else 0.0
    if exposure > 0.0:
        return cap if mean > -band else short
    if exposure < 0.0:
        return short if mean < band else cap
    if mean > band:
        return cap
    return short if mean < -band else 0.0
