"""Return attribution: how much of an agent's return is the market it held, and how much is skill.

A positive Sharpe on a rising market says little: a policy that sits 15% long earns 15% of the
market whatever it learned. ``return_attribution`` regresses the agent's per-bar net returns on the
market line's (``baselines.market_returns``, close to close, fully invested, no costs)::

    r_t = a + b m_t + u_t

and reports, for one evaluated series:

- ``beta`` (``b``) and ``mean_exposure`` (mean signed position value / equity at each step's close);
- ``alpha_annual`` = ``a × periods_per_year`` with its Newey–West (HAC, Bartlett kernel) standard
  error, t-statistic and 90% confidence interval (normal quantiles). The lag is
  ``floor(4 (n/100)^(2/9))`` (Newey & West 1994; what statsmodels' ``cov_hac`` uses when no lag is
  given), without a small-sample correction: the numbers equal ``statsmodels.api.OLS(r, [1, m])
  .fit(cov_type="HAC", cov_kwds={"maxlags": lag})`` (tests pin them);
- ``information_ratio``: ``alpha_annual`` over the annualised residual volatility (``ddof=2``);
- ``timing_corr``: ``corr(exposure_t, m_{t+1})``, the exposure held at a step's close against the
  market's next bar, which it earns (a policy that is long before rises and flat before falls has
  a positive one);
- ``sharpe`` and ``sharpe_se`` (Mertens 2002: ``sqrt((1 - skew·SR + (kurt - 1)/4·SR²) / (n - 1))``
  per period, the variance PSR uses, annualised by ``sqrt(periods_per_year)``);
- the **exposure-matched passive** baseline (``exposure_matched_returns``): the market held at the
  agent's own mean exposure ``e``, rebalanced to ``e`` at every close, paying ``cost_rate`` (the
  env's commission + slippage per unit of traded value) on the entry (``|e|`` of equity) and on
  each rebalance (``|e m_t (1 - e)|`` of the equity before the bar). Its Sharpe
  (``exposure_matched_sharpe``) and total return (``exposure_matched_return``) are what the agent's
  Sharpe must beat to show more than its average exposure.

Undefined values are ``nan`` (``None`` in ``to_dict``) and ``reason`` says why: too few bars, a
constant market line, a constant exposure (no timing correlation), zero residuals (no t-statistic).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from trading_rl.envs import EnvConfig
from trading_rl.evaluation.metrics.metrics import json_ready, sharpe_ratio, total_return

MIN_BARS = 20  # fewer bars than this: no regression (a HAC error needs a few dozen observations)
CI_LEVEL = 0.90
# Residuals this small relative to the returns are round-off of an exact fit (cash, a fixed
# fraction of the market): no standard error, rather than a t-statistic of noise over noise.
EXACT_FIT_TOLERANCE = 1e-12


@functools.cache
def _ci_z() -> float:
    """The standard normal quantile of the two-sided ``CI_LEVEL`` interval."""
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from scipy import stats

    return float(stats.norm.ppf(0.5 + CI_LEVEL / 2.0))


@dataclass(frozen=True)
class Attribution:
    """One series' attribution; every rate is annualised except ``beta`` and the exposures."""

    n: int
    mean_exposure: float
    beta: float
    alpha_annual: float
    alpha_se: float
    alpha_t: float
    alpha_ci90_low: float
    alpha_ci90_high: float
    hac_lags: int
    information_ratio: float
    timing_corr: float
    sharpe: float
    sharpe_se: float
    exposure_matched_sharpe: float
    exposure_matched_return: float
    reason: str | None = None

    @property
    def alpha_ci90(self) -> tuple[float, float]:
        return self.alpha_ci90_low, self.alpha_ci90_high

    def to_dict(self) -> dict:
        """JSON-ready: ``nan`` → ``None``, ``reason`` kept as text."""
        values = asdict(self)
        reason = values.pop("reason")
        return {**json_ready(values), "reason": reason}


ATTRIBUTION_KEYS = tuple(field for field in Attribution.__dataclass_fields__)
# The fields a metrics dict gains (``attribution_metrics``): ``n`` and ``sharpe`` it has already
# (``n_steps``, ``sharpe``), and the reason is text.
ATTRIBUTION_METRICS = tuple(key for key in ATTRIBUTION_KEYS if key not in ("n", "sharpe", "reason"))


def attribution_metrics(attribution: Attribution) -> dict:
    """The attribution as flat, JSON-ready metrics to merge into a ``compute_metrics`` dict."""
    values = attribution.to_dict()
    return {key: values[key] for key in ATTRIBUTION_METRICS}


def newey_west_lags(n: int) -> int:
    """Newey & West (1994) bandwidth ``floor(4 (n/100)^(2/9))``."""
    return int(math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0)))


def ols_hac(y: np.ndarray, x: np.ndarray, lags: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """OLS of ``y`` on ``[1, x]``: ``(coefficients, standard errors, residuals)``, the errors from the
    Newey–West covariance with Bartlett weights ``1 - l/(lags + 1)`` and no small-sample factor."""
    design = np.column_stack([np.ones_like(x), x])
    xtx_inv = np.linalg.inv(design.T @ design)
    coefficients = xtx_inv @ design.T @ y
    residuals = y - design @ coefficients
    scores = design * residuals[:, None]
    meat = scores.T @ scores
    for lag in range(1, lags + 1):
        cross = scores[lag:].T @ scores[:-lag]
        meat += (1.0 - lag / (lags + 1.0)) * (cross + cross.T)
    covariance = xtx_inv @ meat @ xtx_inv
    return coefficients, np.sqrt(np.maximum(np.diag(covariance), 0.0)), residuals


def sharpe_standard_error(returns: np.ndarray, periods_per_year: float) -> float:
    """Annualised standard error of the Sharpe ratio under skewed, fat-tailed returns (Mertens 2002,
    the variance of ``metrics.psr_from_statistics``); ``nan`` when the Sharpe is undefined."""
    r = np.asarray(returns, dtype=np.float64)
    sharpe = sharpe_ratio(r, periods_per_year=1)
    if not math.isfinite(sharpe):
        return math.nan
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from scipy import stats

    skew, kurtosis = float(stats.skew(r)), float(stats.kurtosis(r, fisher=False))
    variance = (1.0 - skew * sharpe + (kurtosis - 1.0) / 4.0 * sharpe**2) / (r.size - 1)
    return math.sqrt(variance * periods_per_year) if variance > 0 else math.nan


def exposure_matched_returns(market: np.ndarray, exposure: float, cost_rate: float) -> np.ndarray:
    """Per-bar net returns of the market held at a constant ``exposure`` of equity, rebalanced at
    every close but the last, ``cost_rate`` paid on the entry and on each rebalance's traded value."""
    market = np.asarray(market, dtype=np.float64)
    gross = exposure * market
    costs = cost_rate * np.abs(exposure * market * (1.0 - exposure))
    if costs.size:
        costs[-1] = 0.0  # nothing to rebalance after the last bar
        costs[0] += cost_rate * abs(exposure)
    return gross - costs


def _finite(name: str, values) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"return_attribution: '{name}' must be one-dimensional, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(
            f"return_attribution: '{name}' contains NaN or inf at position {int(np.argmin(np.isfinite(array)))}"
        )
    return array


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 2 or a.max() == a.min() or b.max() == b.min():
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def return_attribution(returns, exposure, market, *, periods_per_year: float, cost_rate: float) -> Attribution:
    """Attribution of one series (module doc). ``returns``: the agent's per-bar net returns;
    ``exposure``: its signed position value / equity at each bar's close; ``market``: the market
    line's returns on the same bars; ``cost_rate``: commission + slippage per unit of traded value,
    charged to the exposure-matched baseline. Arrays of unequal length or with NaN are an error."""
    r, e, m = _finite("returns", returns), _finite("exposure", exposure), _finite("market", market)
    if not (r.size == e.size == m.size):
        raise ValueError(
            f"return_attribution: 'returns', 'exposure' and 'market' must have one entry per bar, got "
            f"{r.size}, {e.size} and {m.size}"
        )
    if not (math.isfinite(periods_per_year) and periods_per_year > 0):
        raise ValueError(f"return_attribution: 'periods_per_year' must be > 0, got {periods_per_year}")
    if not (math.isfinite(cost_rate) and cost_rate >= 0):
        raise ValueError(f"return_attribution: 'cost_rate' must be >= 0, got {cost_rate}")
    n = int(r.size)
    mean_exposure = float(e.mean()) if n else math.nan
    lags = newey_west_lags(n) if n else 0
    reasons: list[str] = []
    nan = math.nan
    beta = alpha = alpha_se = alpha_t = information_ratio = nan
    if n < MIN_BARS:
        reasons.append(f"{n} bars, fewer than {MIN_BARS}: no regression")
    elif m.max() == m.min():
        reasons.append("market returns are constant: beta and alpha undefined")
    else:
        (intercept, slope), (intercept_se, _), residuals = ols_hac(r, m, lags)
        beta = float(slope)
        alpha, alpha_se = float(intercept) * periods_per_year, float(intercept_se) * periods_per_year
        if np.abs(residuals).max() <= EXACT_FIT_TOLERANCE * np.abs(r).max():
            alpha_se = 0.0  # what is left is float round-off
            reasons.append("returns are exactly alpha + beta x market: no error, no t-statistic")
        else:
            alpha_t = alpha / alpha_se
            information_ratio = alpha / (float(residuals.std(ddof=2)) * math.sqrt(periods_per_year))
    timing = _correlation(e[:-1], m[1:]) if n >= MIN_BARS else nan
    if n >= MIN_BARS and not math.isfinite(timing):
        reasons.append("exposure or market constant: no timing correlation")
    matched = exposure_matched_returns(m, mean_exposure, cost_rate) if n else m
    return Attribution(
        n=n,
        mean_exposure=mean_exposure,
        beta=beta,
        alpha_annual=alpha,
        alpha_se=alpha_se,
        alpha_t=alpha_t,
        alpha_ci90_low=alpha - _ci_z() * alpha_se,
        alpha_ci90_high=alpha + _ci_z() * alpha_se,
        hac_lags=lags,
        information_ratio=information_ratio,
        timing_corr=timing,
        sharpe=sharpe_ratio(r, periods_per_year) if n else nan,
        sharpe_se=sharpe_standard_error(r, periods_per_year) if n >= 2 else nan,
        exposure_matched_sharpe=sharpe_ratio(matched, periods_per_year) if n else nan,
        exposure_matched_return=total_return(matched) if n else nan,
        reason="; ".join(reasons) or None,
    )


def rollout_exposure(rollout: pd.DataFrame) -> np.ndarray:
    """Signed position value / equity at each step's close of a rollout (``run_episode``, the
    forward record): ``(equity - cash) / equity``, 0 where the equity is gone."""
    for column in ("equity", "cash"):
        if column not in rollout:
            raise ValueError(f"rollout_exposure: the rollout has no '{column}' column (columns: {list(rollout)})")
    equity = rollout["equity"].to_numpy(dtype=np.float64)
    value = equity - rollout["cash"].to_numpy(dtype=np.float64)
    return np.divide(value, equity, out=np.zeros_like(value), where=equity > 0)


def rollout_attribution(rollout: pd.DataFrame, market, *, periods_per_year: float, cost_rate: float) -> Attribution:
    """``return_attribution`` of a rollout's ``return`` column and its exposure against ``market``."""
    return return_attribution(
        rollout["return"].to_numpy(dtype=np.float64),
        rollout_exposure(rollout),
        market,
        periods_per_year=periods_per_year,
        cost_rate=cost_rate,
    )


def env_cost_rate(config: EnvConfig) -> float:
    """Cost per unit of traded value in ``config``'s env: commission plus slippage."""
    return float(config.commission_rate + config.slippage_rate)
