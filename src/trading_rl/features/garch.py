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
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from arch import arch_model
from scipy.signal import lfilter

from trading_rl.data.bad_bars import find_bad_bar
from trading_rl.data.schemas import format_timestamp

PERCENT = 100.0
MIN_FIT_OBSERVATIONS = 100
GARCH_FIX = (
    "Fix: exclude the symbol (feature_extraction.symbols), repair the bar in its price file, or switch "
    "the GARCH feature off (feature_extraction.features.garch: null)."
)
GARCH_PARAM_NAMES = ("mu", "omega", "alpha", "beta")
_ARCH_PARAM_NAMES = {"mu": "mu", "omega": "omega", "alpha": "alpha[1]", "beta": "beta[1]"}


# Below this ARCH coefficient a fit that is not a stationary GARCH is read as "no clustering".
NO_ARCH_ALPHA = 1e-6


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
    mu, omega, alpha, beta = (float(garch_params[name]) for name in GARCH_PARAM_NAMES)
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
        model = arch_model(PERCENT * returns, mean="Constant", vol="GARCH", p=1, q=1, dist="normal", rescale=False)
        result = model.fit(disp="off", show_warning=False)
        params = {name: float(result.params[_ARCH_PARAM_NAMES[name]]) for name in GARCH_PARAM_NAMES}
        if result.convergence_flag != 0:
            problem = f"the optimiser did not converge (flag {result.convergence_flag})"
        elif _params_problem(params) is not None and params["alpha"] < NO_ARCH_ALPHA:
            # No volatility clustering (homoskedastic bars, e.g. a synthetic null market): with
            # alpha = 0 the likelihood cannot identify beta, and the optimiser may stop at beta = 1.
            # The identified model with the same constant variance is alpha = beta = 0.
            variance = float(np.var(PERCENT * returns - params["mu"]))
            params = {**params, "omega": variance, "alpha": 0.0, "beta": 0.0}
        elif (invalid := _params_problem(params)) is not None:
            problem = f"the fitted parameters are not a stationary GARCH: {invalid}"
    if problem is not None:
        raise GarchFitError(f"{context}: {problem}. {GARCH_FIX}")
    return params


def garch_volatility(log_returns: pd.Series, garch_params: dict) -> pd.Series:
    """One-step-ahead GARCH(1,1) volatility (decimal) at every row, from the row's own return on.

    ``sigma2_{t+1} = omega + alpha * (100 r_t - mu)^2 + beta * sigma2_t``, run as a linear filter.
    Rows before the first return are NaN.
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
    unconditional_variance = omega / (1.0 - alpha - beta)
    next_variance, _ = lfilter([1.0], [1.0, -beta], omega + alpha * shock_squared, zi=[beta * unconditional_variance])
    volatility = np.full(len(log_returns), np.nan)
    volatility[first:] = np.sqrt(next_variance) / PERCENT
    return pd.Series(volatility, index=log_returns.index, name="garch_vol")
