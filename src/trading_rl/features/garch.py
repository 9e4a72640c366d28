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

PERCENT = 100.0
MIN_FIT_OBSERVATIONS = 100
GARCH_PARAM_NAMES = ("mu", "omega", "alpha", "beta")
_ARCH_PARAM_NAMES = {"mu": "mu", "omega": "omega", "alpha": "alpha[1]", "beta": "beta[1]"}


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


def fit_garch(log_returns: pd.Series) -> dict:
    """Fit a constant-mean GARCH(1,1) with normal errors; return ``mu, omega, alpha, beta``.

    Leading NaNs (the first bar has no return) are skipped. Raises ``RuntimeError`` when the
    optimiser does not converge, rather than returning parameters nobody should trust.
    """
    _, returns = _contiguous_returns(log_returns)
    if returns.size < MIN_FIT_OBSERVATIONS:
        raise ValueError(
            f"fit_garch needs at least {MIN_FIT_OBSERVATIONS} returns, got {returns.size}"
        )
    model = arch_model(
        PERCENT * returns, mean="Constant", vol="GARCH", p=1, q=1, dist="normal", rescale=False
    )
    result = model.fit(disp="off", show_warning=False)
    if result.convergence_flag != 0:
        raise RuntimeError(f"GARCH(1,1) fit did not converge (flag {result.convergence_flag})")
    return {name: float(result.params[_ARCH_PARAM_NAMES[name]]) for name in GARCH_PARAM_NAMES}


def garch_volatility(log_returns: pd.Series, garch_params: dict) -> pd.Series:
    """One-step-ahead GARCH(1,1) volatility (decimal) at every row, from the row's own return on.

    ``sigma2_{t+1} = omega + alpha * (100 r_t - mu)^2 + beta * sigma2_t``, run as a linear filter.
    Rows before the first return are NaN.
    """
    missing = [name for name in GARCH_PARAM_NAMES if name not in garch_params]
    if missing:
        raise ValueError(f"garch params lack {missing}")
    mu, omega, alpha, beta = (float(garch_params[name]) for name in GARCH_PARAM_NAMES)
    if omega <= 0 or alpha < 0 or beta < 0 or alpha + beta >= 1:
        raise ValueError(
            "garch params must satisfy omega > 0, alpha >= 0, beta >= 0, alpha + beta < 1; "
            f"got {garch_params}"
        )
    first, returns = _contiguous_returns(log_returns)
    shock_squared = (PERCENT * returns - mu) ** 2
    unconditional_variance = omega / (1.0 - alpha - beta)
    next_variance, _ = lfilter(
        [1.0], [1.0, -beta], omega + alpha * shock_squared, zi=[beta * unconditional_variance]
    )
    volatility = np.full(len(log_returns), np.nan)
    volatility[first:] = np.sqrt(next_variance) / PERCENT
    return pd.Series(volatility, index=log_returns.index, name="garch_vol")
