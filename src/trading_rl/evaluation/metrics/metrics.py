"""Return, risk and significance metrics for backtests.

Inputs are *simple* per-period returns (array-like or Series, no NaN). Conventions follow
empyrical(-reloaded) so numbers can be compared with the wider ecosystem:

- Sharpe uses the sample standard deviation (``ddof=1``) scaled by ``sqrt(periods_per_year)``;
  Sortino divides the annualised mean excess return by the annualised downside deviation
  ``sqrt(mean(min(r - required, 0)^2))``; max drawdown is a negative fraction anchored at the
  starting equity; Calmar is annualised return over ``|max drawdown|``.
- A ratio whose denominator is zero (constant returns, no losing period, no drawdown) is ``nan``:
  undefined rather than infinite, so reports stay JSON-serialisable and a flat "always cash" agent
  never looks infinitely good. empyrical agrees for 0/0 and returns ``±inf`` for x/0.
- Too few observations for a statistic (fewer than 2 for a standard deviation) gives ``nan``.

PSR and DSR (Bailey & López de Prado 2012, 2014) work on the *per-period* (non-annualised) Sharpe
ratio, as in the papers; ``sharpe_ratio(r, periods_per_year=1)`` gives it.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from trading_rl.evaluation.metrics.rollout import trade_returns
from trading_rl.monitoring.actions import ACTION_BUCKETS, action_histogram, histogram_entropy


def _as_returns(returns) -> np.ndarray:
    """1-D float array of returns; NaN/inf are rejected because silently dropping them hides bugs."""
    r = np.asarray(returns, dtype=np.float64)
    if r.ndim != 1:
        raise ValueError(f"returns must be one-dimensional, got shape {r.shape}")
    if not np.isfinite(r).all():
        raise ValueError("returns contain NaN or inf")
    return r


def _ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, ``nan`` when the denominator is zero (undefined, see module doc)."""
    return float(numerator / denominator) if denominator != 0 else math.nan


def total_return(returns) -> float:
    """Compounded return over the whole series, ``prod(1 + r) - 1``."""
    r = _as_returns(returns)
    return float(np.prod(1.0 + r) - 1.0) if r.size else math.nan


def annualized_return(returns, periods_per_year: float) -> float:
    """Geometric (compound) annual growth rate; -1 when the equity is wiped out."""
    r = _as_returns(returns)
    if not r.size:
        return math.nan
    growth = 1.0 + total_return(r)
    return float(growth ** (periods_per_year / r.size) - 1.0) if growth > 0 else -1.0


def annualized_volatility(returns, periods_per_year: float) -> float:
    """Sample standard deviation (``ddof=1``) scaled by ``sqrt(periods_per_year)``."""
    r = _as_returns(returns)
    return float(r.std(ddof=1) * math.sqrt(periods_per_year)) if r.size >= 2 else math.nan


def sharpe_ratio(returns, periods_per_year: float, risk_free: float = 0.0) -> float:
    """Annualised Sharpe ratio; ``risk_free`` is a per-period rate. ``periods_per_year=1`` gives the
    per-period Sharpe used by PSR/DSR. Constant returns give ``nan``."""
    excess = _as_returns(returns) - risk_free
    if excess.size < 2 or excess.max() == excess.min():
        # Checked on the values, not on std == 0: the std of identical values can come out as ~1e-18.
        return math.nan
    return float(excess.mean() / excess.std(ddof=1) * math.sqrt(periods_per_year))


def sortino_ratio(returns, periods_per_year: float, required_return: float = 0.0) -> float:
    """Annualised mean excess return over annualised downside deviation (empyrical's definition)."""
    excess = _as_returns(returns) - required_return
    if excess.size < 2:
        return math.nan
    downside_deviation = math.sqrt(np.mean(np.minimum(excess, 0.0) ** 2))
    return _ratio(excess.mean() * math.sqrt(periods_per_year), downside_deviation)


def drawdown_series(returns) -> np.ndarray:
    """Drawdown after each period as a fraction (<= 0) of the running equity peak, where the peak
    includes the starting equity so a loss in the first period already counts."""
    r = _as_returns(returns)
    wealth = np.cumprod(1.0 + r)
    peak = np.maximum.accumulate(np.concatenate(([1.0], wealth)))[1:]
    return wealth / peak - 1.0


def max_drawdown(returns) -> float:
    """Worst peak-to-trough loss as a negative fraction (empyrical's sign convention)."""
    r = _as_returns(returns)
    return float(drawdown_series(r).min()) if r.size else math.nan


def calmar_ratio(returns, periods_per_year: float) -> float:
    """Annualised return over ``|max drawdown|``; ``nan`` without a drawdown."""
    r = _as_returns(returns)
    if not r.size:
        return math.nan
    return _ratio(annualized_return(r, periods_per_year), abs(max_drawdown(r)))


def win_rate(values) -> float:
    """Share of non-zero values that are positive.

    Works on per-period returns or on per-trade P&L (see ``rollout.trade_returns``); zeros — periods
    in cash, break-even trades — are neither wins nor losses. ``nan`` when every value is zero.
    """
    v = _as_returns(values)
    nonzero = v[v != 0]
    return float((nonzero > 0).mean()) if nonzero.size else math.nan


def profit_factor(values) -> float:
    """Gross gains over gross losses (sum of positive values / |sum of negative values|).

    Works on per-period returns or per-trade P&L; ``nan`` when there is no loss.
    """
    v = _as_returns(values)
    return _ratio(v[v > 0].sum(), -v[v < 0].sum())


def psr_from_statistics(
    sharpe: float, n_obs: int, skewness: float, kurtosis: float, sr_benchmark: float = 0.0
) -> float:
    """Probabilistic Sharpe Ratio from summary statistics (Bailey & López de Prado 2012).

    ``sharpe`` and ``sr_benchmark`` are per-period; ``kurtosis`` is the plain (non-excess) kurtosis.
    Probability that the true Sharpe exceeds the benchmark, given the estimate's sampling error
    under skewed and fat-tailed returns.
    """
    variance_factor = 1.0 - skewness * sharpe + (kurtosis - 1.0) / 4.0 * sharpe**2
    if n_obs < 2 or not np.isfinite(sharpe) or variance_factor <= 0:
        return math.nan
    z = (sharpe - sr_benchmark) * math.sqrt(n_obs - 1) / math.sqrt(variance_factor)
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from scipy import stats

    return float(stats.norm.cdf(z))


def probabilistic_sharpe_ratio(returns, sr_benchmark: float = 0.0) -> float:
    """PSR of a return series against a per-period benchmark Sharpe (skew/kurtosis: population
    moments, as in the paper)."""
    r = _as_returns(returns)
    sharpe = sharpe_ratio(r, periods_per_year=1)
    if not np.isfinite(sharpe):
        return math.nan
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from scipy import stats

    return psr_from_statistics(
        sharpe, r.size, float(stats.skew(r)), float(stats.kurtosis(r, fisher=True) + 3.0), sr_benchmark
    )


MOMENT_KEYS = ("n_obs", "mean", "std", "skew", "kurtosis")


def return_moments(returns) -> dict[str, float]:
    """``n_obs``, ``mean``, ``std`` (``ddof=1``), ``skew`` and plain ``kurtosis`` (population
    moments, as PSR uses them) of a return series. Constant returns: ``std`` 0, skew/kurtosis
    ``nan``; fewer than 2 observations: ``std`` ``nan``."""
    r = _as_returns(returns)
    if r.size == 0:
        return {"n_obs": 0, "mean": math.nan, "std": math.nan, "skew": math.nan, "kurtosis": math.nan}
    constant = r.max() == r.min()
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from scipy import stats

    return {
        "n_obs": int(r.size),
        "mean": float(r.mean()),
        "std": math.nan if r.size < 2 else 0.0 if constant else float(r.std(ddof=1)),
        "skew": math.nan if constant else float(stats.skew(r)),
        "kurtosis": math.nan if constant else float(stats.kurtosis(r, fisher=False)),
    }


def _moment_values(moments) -> dict[str, float]:
    """The moments with ``None`` (``json_ready``'s undefined) read back as ``nan``."""
    return {key: math.nan if moments[key] is None else moments[key] for key in MOMENT_KEYS}


def pool_moments(parts) -> dict[str, float]:
    """``return_moments`` of the concatenation of several series, from their moments alone.

    Each part's sums of centred powers are re-centred on the pooled mean and added up.
    """
    parts = [_moment_values(part) for part in parts if part["n_obs"] > 0]
    n = sum(int(part["n_obs"]) for part in parts)
    if n == 0:
        return return_moments([])
    mean = sum(part["n_obs"] * part["mean"] for part in parts) / n
    m2 = m3 = m4 = 0.0
    for part in parts:
        k = int(part["n_obs"])
        s2 = part["std"] ** 2 * (k - 1) if k > 1 else 0.0  # sums of centred powers of the part
        central2 = s2 / k
        s3 = part["skew"] * central2**1.5 * k if s2 > 0 else 0.0
        s4 = part["kurtosis"] * central2**2 * k if s2 > 0 else 0.0
        d = part["mean"] - mean
        m2 += s2 + k * d**2
        m3 += s3 + 3 * d * s2 + k * d**3
        m4 += s4 + 4 * d * s3 + 6 * d**2 * s2 + k * d**4
    central2 = m2 / n
    return {
        "n_obs": n,
        "mean": float(mean),
        "std": math.sqrt(m2 / (n - 1)) if n > 1 else math.nan,
        "skew": (m3 / n) / central2**1.5 if m2 > 0 else math.nan,
        "kurtosis": (m4 / n) / central2**2 if m2 > 0 else math.nan,
    }


def window_sharpes(values) -> np.ndarray:
    """Per-window Sharpe ratios as every median, interval, paired difference, gate and trial count
    across windows reads them (docs/protocol.md, "One Sharpe convention"): a window whose Sharpe is
    undefined (no fill, so its returns are all zero) counts as 0. Dropping it would report an agent
    on the windows it chose to trade in only."""
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype(float).fillna(0.0).to_numpy()


def sharpe_from_moments(moments) -> float:
    """Per-period Sharpe ``mean / std``; ``nan`` when undefined (constant or too short)."""
    moments = _moment_values(moments)
    std = moments["std"]
    return float(moments["mean"] / std) if np.isfinite(std) and std > 0 else math.nan


def psr_from_moments(moments, sr_benchmark: float = 0.0) -> float:
    """``probabilistic_sharpe_ratio`` of a series known by its ``return_moments`` only."""
    moments = _moment_values(moments)
    sharpe = sharpe_from_moments(moments)
    if not np.isfinite(sharpe):
        return math.nan
    return psr_from_statistics(sharpe, int(moments["n_obs"]), moments["skew"], moments["kurtosis"], sr_benchmark)


def expected_max_sharpe(sr_trials) -> float:
    """Expected maximum per-period Sharpe among ``N`` independent unskilled trials (Bailey & López
    de Prado 2014): ``sqrt(V) * ((1 - γ) Φ⁻¹(1 - 1/N) + γ Φ⁻¹(1 - 1/(N e)))``, with ``V`` the sample
    variance (``ddof=1``) of the trials' per-period Sharpe ratios and ``γ`` Euler–Mascheroni."""
    trials = _as_returns(sr_trials)
    n = trials.size
    if n < 2:
        raise ValueError(f"expected_max_sharpe needs at least 2 trials, got {n}")
    gamma = np.euler_gamma
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from scipy import stats

    quantiles = (1.0 - gamma) * stats.norm.ppf(1.0 - 1.0 / n) + gamma * stats.norm.ppf(1.0 - 1.0 / (n * math.e))
    return float(math.sqrt(trials.var(ddof=1)) * quantiles)


def deflated_sharpe_ratio(returns, sr_trials) -> float:
    """PSR against the Sharpe the best of ``sr_trials`` would reach by luck: the probability that the
    selected strategy's Sharpe is real after trying ``len(sr_trials)`` configurations."""
    return probabilistic_sharpe_ratio(returns, sr_benchmark=expected_max_sharpe(sr_trials))


def return_metrics(returns, periods_per_year: float) -> dict[str, float]:
    """Every metric that depends on the return series alone (per-period win rate/profit factor)."""
    r = _as_returns(returns)
    return {
        "total_return": total_return(r),
        "annualized_return": annualized_return(r, periods_per_year),
        "annualized_volatility": annualized_volatility(r, periods_per_year),
        "sharpe": sharpe_ratio(r, periods_per_year),
        "sortino": sortino_ratio(r, periods_per_year),
        "calmar": calmar_ratio(r, periods_per_year),
        "max_drawdown": max_drawdown(r),
        "period_win_rate": win_rate(r),
        "period_profit_factor": profit_factor(r),
        "psr": probabilistic_sharpe_ratio(r),
        "n_steps": int(r.size),
    }


def json_ready(metrics: dict) -> dict:
    """Plain Python floats/ints, with ``nan``/``inf`` turned into ``None`` (valid JSON)."""
    out: dict[str, bool | int | float | None] = {}
    for key, value in metrics.items():
        if isinstance(value, (bool, np.bool_)):
            out[key] = bool(value)
        elif isinstance(value, (int, np.integer)):
            out[key] = int(value)
        else:
            value = float(value)
            out[key] = value if math.isfinite(value) else None
    return out


def compute_metrics(rollout: pd.DataFrame, periods_per_year: float, hold_threshold: float) -> dict:
    """All evaluation metrics of one rollout (the frame from ``rollout.run_episode``).

    - return/risk metrics from the ``return`` column (see ``return_metrics``);
    - ``win_rate``/``profit_factor`` over the P&L of each trade and ``n_round_trips`` trades
      (``rollout.trade_returns``: a trade runs from opening a position to flat; one still open at
      the end is marked to market and counted); ``period_win_rate``/``period_profit_factor`` over
      the periods with a non-zero return;
    - ``n_trades``: executed fills (steps with a non-zero ``trade_value``);
    - ``turnover``: traded value over mean equity for the whole episode, ``turnover_per_year``
      scaled by ``periods_per_year / n_steps``;
    - ``hold_share`` (raw actions with ``|a| <= hold_threshold``), ``action_entropy`` (nats) and
      ``action_share_<bucket>`` from the policy's raw actions (``action_raw``) with
      ``actions.action_histogram`` — what the policy chose, as collapse monitoring counts it; steps
      that ended without a fill (holds, skipped trades) are ``n_steps - n_trades``.

    Undefined values are ``None`` so the dict is JSON-serialisable.
    """
    metrics: dict = return_metrics(rollout["return"].to_numpy(), periods_per_year)
    trades = trade_returns(rollout)
    traded_value = np.abs(rollout["trade_value"].to_numpy(dtype=np.float64))
    mean_equity = float(rollout["equity"].mean())
    turnover = _ratio(traded_value.sum(), mean_equity)
    shares = action_histogram(rollout["action_raw"].to_numpy(), hold_threshold=hold_threshold)
    n_steps = len(rollout)
    metrics.update(
        {
            "win_rate": win_rate(trades["pnl"].to_numpy()),
            "profit_factor": profit_factor(trades["pnl"].to_numpy()),
            "n_round_trips": int(len(trades)),
            "n_trades": int(np.count_nonzero(traded_value)),
            "turnover": turnover,
            "turnover_per_year": turnover * periods_per_year / n_steps if n_steps else math.nan,
            "hold_share": shares["hold"],
            "action_entropy": histogram_entropy(shares),
        }
    )
    metrics.update({f"action_share_{bucket}": shares[bucket] for bucket in ACTION_BUCKETS})
    return json_ready(metrics)


@functools.cache
def metric_keys() -> tuple[str, ...]:
    """The keys :func:`compute_metrics` returns, in its order: the same for every rollout, so they
    are read off a two-step rollout here rather than listed a second time. What
    ``sac_icm.agent.training.best_metric`` may name (checked when the section is parsed)."""
    probe = pd.DataFrame(
        {
            "return": [0.01, -0.01],
            "equity": [1.01, 0.9999],
            "position": [1.0, 0.0],
            "trade_value": [1.0, -1.0],
            "action_raw": [0.5, -0.5],
        }
    )
    return tuple(compute_metrics(probe, periods_per_year=252.0, hold_threshold=0.1))
