"""GARCH(1,1) conditional volatility as a causal feature.

The model is fitted with ``arch`` on *percent* log returns (``100 * r``), the scale ``arch``
recommends for a well-conditioned optimisation, so ``mu`` and ``omega`` are in percent units
(``omega`` in percent squared). :func:`garch_volatility` takes decimal log returns, applies the
same scaling internally and returns volatility in decimal units again, comparable with realised
volatility.

Alignment: the value at row ``t`` is the one-step-ahead forecast ``sigma_{t+1}`` made at the close
of bar ``t``, i.e. it uses ``r_t`` and nothing later. The recursion starts from the unconditional
variance ``omega / (1 - alpha - beta)`` (a function of the parameters alone, so no returns are
peeked at to start it, and a value never depends on how many bars follow it). ``arch`` starts its
own recursion from a backcast of the first returns instead; the two paths converge at rate
``beta ** t``.

Integrated fits. On some series (persistent volatility regimes such as the ``regime_vol`` control
family or NASDAQ through 2005-09-08; often FX and crypto) the fit lands at the stationarity bound,
``alpha + beta = 1`` to the optimiser's tolerance: just above it the parameters are not a stationary
GARCH, just below it the start value ``omega / (1 - alpha - beta)`` is a ratio of two numbers near
zero (1e6 to 1e297 times the sample variance on ``regime_vol``, forgotten only after hundreds to
thousands of bars). A fit with ``alpha + beta > 1 - STATIONARITY_MARGIN`` therefore falls back,
with a WARNING naming the symbol and the parameters, to the **EWMA (IGARCH with omega = 0)** recursion
``sigma2_{t+1} = (1 - lambda) (100 r_t - mu)^2 + lambda sigma2_t``: ``lambda`` and ``mu`` fitted by
maximum likelihood on the same window (``arch``'s ``EWMAVariance(lam=None)``), the recursion started
from the window's mean squared residual (``start_variance``), a statistic of the training window like
the fitted parameters themselves. Why EWMA rather than a refit held inside the stationary region: a
fit pinned at ``1 - eps`` keeps the meaningless start value and a mean-reversion target set by
``eps``; EWMA is the model the integrated fit points to (a unit root in the variance, no target to
revert to), it is the RiskMetrics reference, and its one-step forecast is a weighted average of past
squared shocks, so it stays on the data's scale over any test horizon. The fallback's parameters are
stored like any fit (``omega = 0``, ``alpha = 1 - lambda``, ``beta = lambda``, plus
``start_variance``, the key that marks the fallback in ``feature_params``).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from trading_rl.data.bad_bars import find_bad_bar
from trading_rl.data.schemas import format_timestamp

PERCENT = 100.0
MIN_FIT_OBSERVATIONS = 100
GARCH_FIX = (
    "Fix: exclude the symbol (feature_extraction.symbols), repair the bar in its price file, or switch "
    "the GARCH feature off (feature_extraction.features.garch: null)."
)
GARCH_PARAM_NAMES = ("mu", "omega", "alpha", "beta")
START_VARIANCE = "start_variance"  # present only in the integrated fallback's parameters
_ARCH_PARAM_NAMES = {"mu": "mu", "omega": "omega", "alpha": "alpha[1]", "beta": "beta[1]"}


# Below this ARCH coefficient a fit is read as "no clustering" (beta is then unidentified).
NO_ARCH_ALPHA = 1e-6
# A fit with alpha + beta above 1 - STATIONARITY_MARGIN sits at arch's stationarity constraint (such
# fits land within 3e-8 of 1, on either side) and falls back to EWMA. Fits just inside, 0.9993 to
# 0.9997 on NASDAQ through 2005-06, keep GARCH: their start value, 10 to 50 times the sample
# variance, is forgotten at the rate beta ** t within about a hundred bars.
STATIONARITY_MARGIN = 1e-6
# Floating-point slack when checking that the fallback's alpha + beta (= 1 - lambda + lambda) is 1.
_UNIT_SUM_TOLERANCE = 1e-12

logger = logging.getLogger(__name__)


class GarchFitError(ValueError):
    """GARCH(1,1) cannot be fitted on these returns; the message names the series, its dates and a fix."""


def degenerate_returns(log_returns: pd.Series) -> str | None:
    """Why ``log_returns`` cannot carry a volatility model (constant prices, a bad tick), else ``None``."""
    values = log_returns.dropna()
    if values.empty:
        return None
    if (values == values.iloc[0]).all():
        return f"the prices are constant (every log return is {values.iloc[0]:.3g})"
    bad = find_bad_bar(values)
    return None if bad is None else bad.describe()


def _params_problem(garch_params: dict) -> str | None:
    """What makes ``garch_params`` unusable, else ``None``: a stationary GARCH(1,1), or, with
    ``start_variance``, the integrated fallback (``omega >= 0``, ``alpha + beta <= 1``)."""
    mu, omega, alpha, beta = (float(garch_params[name]) for name in GARCH_PARAM_NAMES)
    if START_VARIANCE in garch_params:
        start = float(garch_params[START_VARIANCE])
        if not (start > 0 and omega >= 0 and alpha >= 0 and beta >= 0 and alpha + beta <= 1 + _UNIT_SUM_TOLERANCE):
            return (
                f"start_variance > 0, omega >= 0, alpha >= 0, beta >= 0, alpha + beta <= 1 do not hold for "
                f"{garch_params}"
            )
        return None
    if omega <= 0 or alpha < 0 or beta < 0 or alpha + beta >= 1:
        return f"omega > 0, alpha >= 0, beta >= 0, alpha + beta < 1 do not hold for {garch_params}"
    return None


def _contiguous_returns(log_returns: pd.Series) -> tuple[int, np.ndarray]:
    """Position of the first return and the returns from there on; gaps or infinities are errors."""
    values = np.asarray(log_returns, dtype=np.float64)
    valid = np.flatnonzero(~np.isnan(values))
    if valid.size == 0:
        raise ValueError("log_returns holds no values")
    first = int(valid[0])
    tail = values[first:]
    if not np.all(np.isfinite(tail)):
        bad = log_returns.index[first + int(np.flatnonzero(~np.isfinite(tail))[0])]
        raise ValueError(f"log_returns must be finite after the first value; first bad row: {bad}")
    return first, tail


def fit_garch(log_returns: pd.Series, symbol: str | None = None) -> dict:
    """Fit a constant-mean GARCH(1,1) with normal errors; return ``mu, omega, alpha, beta``.

    Leading NaNs (the first bar has no return) are skipped. Constant prices, a bad tick, an optimiser
    that does not converge and non-stationary parameters raise :class:`GarchFitError` naming
    ``symbol``, the bars fitted on and the fix, rather than returning parameters nobody should trust.
    """
    first, returns = _contiguous_returns(log_returns)
    if returns.size < MIN_FIT_OBSERVATIONS:
        raise ValueError(f"fit_garch needs at least {MIN_FIT_OBSERVATIONS} returns, got {returns.size}")
    subject = f"symbol {symbol!r}" if symbol is not None else "the series"
    window = log_returns.index[first:]
    context = (
        f"GARCH(1,1) on {subject}, {returns.size} returns "
        f"{format_timestamp(window[0])} .. {format_timestamp(window[-1])}"
    )
    problem = degenerate_returns(log_returns.iloc[first:])
    if problem is None:
        # imported here: registering the pipelines (every kedro command) must not pay for it
        from arch import arch_model

        scaled = PERCENT * returns
        model = arch_model(scaled, mean="Constant", vol="GARCH", p=1, q=1, dist="normal", rescale=False)
        result = model.fit(disp="off", show_warning=False)
        params = {name: float(result.params[_ARCH_PARAM_NAMES[name]]) for name in GARCH_PARAM_NAMES}
        integrated = params["alpha"] + params["beta"] > 1.0 - STATIONARITY_MARGIN
        if result.convergence_flag != 0:
            problem = f"the optimiser did not converge (flag {result.convergence_flag})"
        elif params["alpha"] < NO_ARCH_ALPHA:
            # No volatility clustering (homoskedastic bars, e.g. a synthetic null market): with
            # alpha = 0 the likelihood cannot identify beta, and where the optimiser stops (beta = 1,
            # or 0.85 on the same bars with SciPy 1.17.1) is an accident of the library versions.
            # The identified model with the same constant variance is alpha = beta = 0.
            variance = float(np.var(scaled - params["mu"]))
            params = {**params, "omega": variance, "alpha": 0.0, "beta": 0.0}
        elif integrated:
            params, problem = _integrated_fallback(scaled, params, context)
        elif (invalid := _params_problem(params)) is not None:
            problem = f"the fitted parameters are not a stationary GARCH: {invalid}"
    if problem is not None:
        raise GarchFitError(f"{context}: {problem}. {GARCH_FIX}")
    return params


def _integrated_fallback(scaled_returns: np.ndarray, garch: dict, context: str) -> tuple[dict, str | None]:
    """The EWMA parameters that replace an integrated GARCH fit (module docstring), logged as a
    WARNING; or the reason that fit failed too."""
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from arch.univariate import ConstantMean, EWMAVariance

    persistence = garch["alpha"] + garch["beta"]
    result = ConstantMean(scaled_returns, volatility=EWMAVariance(lam=None)).fit(disp="off", show_warning=False)
    lam, mu = float(result.params["lam"]), float(result.params["mu"])
    if result.convergence_flag != 0 or not 0.0 < lam < 1.0:
        return garch, (
            f"alpha + beta = {persistence:.6f} is not a stationary GARCH, and its EWMA fallback did not fit "
            f"(flag {result.convergence_flag}, lambda {lam:.6g})"
        )
    start_variance = float(np.mean((scaled_returns - mu) ** 2))
    logger.warning(
        "%s: alpha + beta = %.9f (alpha %.4f, beta %.4f) is at the stationarity bound (> 1 - %g); garch_vol "
        "uses the EWMA fallback (IGARCH with omega = 0): lambda %.4f and mu %.4g fitted on the same returns, "
        "the recursion started from their variance %.4g (percent squared); docs/pipelines.md, 'Integrated GARCH fits'.",
        context,
        persistence,
        garch["alpha"],
        garch["beta"],
        STATIONARITY_MARGIN,
        lam,
        mu,
        start_variance,
    )
    return {"mu": mu, "omega": 0.0, "alpha": 1.0 - lam, "beta": lam, START_VARIANCE: start_variance}, None


def garch_volatility(log_returns: pd.Series, garch_params: dict) -> pd.Series:
    """One-step-ahead GARCH(1,1) volatility (decimal) at every row, from the row's own return on.

    ``sigma2_{t+1} = omega + alpha * (100 r_t - mu)^2 + beta * sigma2_t``, run as a linear filter
    from the unconditional variance, or from ``start_variance`` where the parameters carry one (the
    integrated fallback). Rows before the first return are NaN.
    """
    missing = [name for name in GARCH_PARAM_NAMES if name not in garch_params]
    if missing:
        raise ValueError(f"garch params lack {missing}")
    problem = _params_problem(garch_params)
    if problem is not None:
        raise ValueError(f"garch params: {problem}")
    mu, omega, alpha, beta = (float(garch_params[name]) for name in GARCH_PARAM_NAMES)
    first, returns = _contiguous_returns(log_returns)
    shock_squared = (PERCENT * returns - mu) ** 2
    if START_VARIANCE in garch_params:
        start_variance = float(garch_params[START_VARIANCE])
    else:
        start_variance = omega / (1.0 - alpha - beta)  # the unconditional variance
    # imported here: registering the pipelines (every kedro command) must not pay for it (scipy.stats)
    from scipy.signal import lfilter

    next_variance, _ = lfilter([1.0], [1.0, -beta], omega + alpha * shock_squared, zi=[beta * start_variance])
    volatility = np.full(len(log_returns), np.nan)
    volatility[first:] = np.sqrt(next_variance) / PERCENT
    return pd.Series(volatility, index=log_returns.index, name="garch_vol")
