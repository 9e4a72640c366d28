"""GARCH(1,1): the numpy recursion against arch's, where compute_features gets parameters, and the
EWMA fallback for integrated fits (against a plain loop and arch's EWMA recursion)."""

import logging

import numpy as np
import pandas as pd
import pytest
from arch import arch_model
from arch.univariate import GARCH, ConstantMean, EWMAVariance

from trading_rl.data import load_prices
from trading_rl.features import FeatureParams, compute_features, fit_garch, garch_volatility
from trading_rl.features.garch import START_VARIANCE, STATIONARITY_MARGIN, GarchFitError, degenerate_returns

FIT_BARS = 1000


@pytest.fixture(scope="module")
def fit_window_returns(sp500_prices):
    return np.log(sp500_prices["close"]).diff().iloc[:FIT_BARS]


@pytest.fixture(scope="module")
def arch_result(fit_window_returns):
    model = arch_model(100.0 * fit_window_returns.dropna(), mean="Constant", vol="GARCH", p=1, q=1)
    return model.fit(disp="off")


def test_fit_garch_returns_plain_floats_matching_arch(fit_window_returns, arch_result):
    params = fit_garch(fit_window_returns)
    assert set(params) == {"mu", "omega", "alpha", "beta"}
    assert all(type(value) is float for value in params.values())
    expected = arch_result.params
    np.testing.assert_allclose(
        [params["mu"], params["omega"], params["alpha"], params["beta"]],
        [expected["mu"], expected["omega"], expected["alpha[1]"], expected["beta[1]"]],
        rtol=1e-6,
    )
    assert 0 < params["alpha"] + params["beta"] < 1


def test_recursion_matches_arch_conditional_volatility(fit_window_returns, arch_result):
    """Row t holds arch's sigma for t+1; the start values differ, and that difference dies out."""
    params = fit_garch(fit_window_returns)
    ours = 100.0 * garch_volatility(fit_window_returns, params).to_numpy()
    arch_sigma = arch_result.conditional_volatility.to_numpy()  # arch_sigma[k] belongs to row k+1
    burn_in = 250  # beta ** 250 < 1e-12
    np.testing.assert_allclose(ours[1 + burn_in : -1], arch_sigma[burn_in + 1 :], rtol=1e-6)
    assert np.isnan(ours[0])


def test_recursion_matches_arch_from_the_first_bar_with_the_same_start(fit_window_returns):
    """Started from our start value (unconditional variance), arch's recursion agrees exactly."""
    params = fit_garch(fit_window_returns)
    residuals = 100.0 * fit_window_returns.dropna().to_numpy() - params["mu"]
    unconditional = params["omega"] / (1.0 - params["alpha"] - params["beta"])
    process = GARCH()
    sigma2 = np.zeros_like(residuals)
    process.compute_variance(
        np.array([params["omega"], params["alpha"], params["beta"]]),
        residuals,
        sigma2,
        unconditional,
        process.variance_bounds(residuals),
    )
    ours = 100.0 * garch_volatility(fit_window_returns, params).to_numpy()
    np.testing.assert_allclose(ours[1:-1], np.sqrt(sigma2[1:]), rtol=1e-12)


def test_value_at_t_uses_the_return_at_t_and_nothing_later(fit_window_returns):
    params = fit_garch(fit_window_returns)
    base = garch_volatility(fit_window_returns, params)
    shocked_returns = fit_window_returns.copy()
    shocked_returns.iloc[500] += 0.05
    shocked = garch_volatility(shocked_returns, params)
    np.testing.assert_array_equal(base.iloc[:500], shocked.iloc[:500])
    assert shocked.iloc[500] > base.iloc[500]


def test_compute_features_fits_garch_on_the_configured_rows(sp500_prices):
    log_returns = np.log(sp500_prices["close"]).diff()
    through_2002 = compute_features(sp500_prices, FeatureParams.from_mapping({"garch": {"fit_end": "2002-12-31"}}))[
        "garch_vol"
    ]
    expected = garch_volatility(log_returns, fit_garch(log_returns[log_returns.index <= "2002-12-31"]))
    np.testing.assert_allclose(through_2002.to_numpy()[1:], expected.to_numpy()[1:], rtol=1e-12)

    default = compute_features(sp500_prices, FeatureParams())["garch_vol"]
    expected = garch_volatility(log_returns, fit_garch(log_returns.iloc[:FIT_BARS]))
    np.testing.assert_allclose(default.to_numpy()[1:], expected.to_numpy()[1:], rtol=1e-12)


def test_short_history_without_garch_params_is_refused(sp500_prices):
    with pytest.raises(ValueError, match="garch.fit_bars"):
        compute_features(sp500_prices.iloc[:500], FeatureParams())
    assert "garch_vol" not in compute_features(sp500_prices.iloc[:500], FeatureParams(garch=None))
    with pytest.raises(ValueError, match="garch.fit_end"):
        compute_features(sp500_prices, FeatureParams.from_mapping({"garch": {"fit_end": "1999-02-01"}}))


def test_bad_garch_inputs_are_refused(fit_window_returns):
    with pytest.raises(ValueError, match="omega"):
        garch_volatility(fit_window_returns, {"mu": 0.0, "alpha": 0.1, "beta": 0.8})
    with pytest.raises(ValueError, match="alpha \\+ beta < 1"):
        garch_volatility(fit_window_returns, {"mu": 0.0, "omega": 0.1, "alpha": 0.3, "beta": 0.7})
    with pytest.raises(ValueError, match="at least"):
        fit_garch(fit_window_returns.iloc[:50])
    gappy = fit_window_returns.copy()
    gappy.iloc[300] = np.nan
    with pytest.raises(ValueError, match="finite"):
        fit_garch(gappy)


def _log_returns(close: pd.Series) -> pd.Series:
    return np.log(close).diff()


@pytest.fixture(scope="module")
def real_close():
    return load_prices("sp500")["close"].iloc[:600]


def test_real_returns_are_not_degenerate():
    assert degenerate_returns(_log_returns(load_prices("sp500")["close"])) is None  # 1987 included
    assert degenerate_returns(_log_returns(load_prices("nasdaq")["close"])) is None


def test_a_bad_tick_is_named_by_its_bar(real_close):
    close = real_close.copy()
    close.iloc[200] *= 1000.0
    problem = degenerate_returns(_log_returns(close))
    assert f"the bar at {close.index[200].date()} is about 1000x off its neighbours" in problem


def test_a_level_jump_is_named_by_its_return(real_close):
    close = real_close.copy()
    close.iloc[300:] /= 100.0  # an unadjusted 100:1 split
    problem = degenerate_returns(_log_returns(close))
    assert f"the log return at {close.index[300].date()} is -4.61" in problem
    assert "unadjusted split" in problem


def test_degenerate_fits_name_the_symbol_window_and_fix(real_close):
    flat = pd.Series(100.0, index=real_close.index)
    with pytest.raises(GarchFitError) as raised:
        fit_garch(_log_returns(flat), "FLAT")
    message = str(raised.value)
    assert f"symbol 'FLAT', 599 returns {real_close.index[1].date()} .. {real_close.index[-1].date()}" in message
    assert "the prices are constant" in message
    assert "garch: null" in message and "exclude the symbol" in message


def test_homoskedastic_returns_get_the_constant_variance_model_not_a_refusal():
    from trading_rl.data.synthetic import MarketModel, synthetic_prices

    # A null market (constant volatility): arch's optimiser puts alpha at 0 and beta where it happens to
    # stop (1.0 until 2026-12-06, 0.85 with SciPy 1.17.1): the constant-variance model either way.
    close = synthetic_prices(MarketModel.from_mapping({"family": "null", "n_bars": 1540, "seed": 15}, "m")).close
    returns = np.log(close).diff()
    params = fit_garch(returns)
    assert params["alpha"] == 0.0 and params["beta"] == 0.0
    assert params["omega"] == pytest.approx(np.var(100 * returns.dropna().to_numpy() - params["mu"]))
    volatility = garch_volatility(returns, params)
    assert volatility.dropna().nunique() == 1  # a constant forecast: nothing to time


# Integrated fits. A regime_vol control market (two hidden volatility states, variance ratio 9,
# regimes of ~200 bars): on its first 900 returns arch's GARCH(1,1) fit lands on alpha + beta = 1 to
# the optimiser's tolerance, just above 1 for seed 5 (refused before the fallback existed) and 1e-9
# below it for seed 0 (accepted before, with a start variance 3.6 million times the sample variance).
INTEGRATED_SEEDS = (0, 5)


def _regime_vol_returns(seed: int) -> pd.Series:
    from trading_rl.data.synthetic import MarketModel, synthetic_prices

    market = {"family": "regime_vol", "strength": 0.8, "regime_persistence": 0.995, "n_bars": 1500, "seed": seed}
    close = synthetic_prices(MarketModel.from_mapping(market, "market")).close
    return np.log(close).diff().iloc[:901]


@pytest.fixture(scope="module", params=INTEGRATED_SEEDS, ids=lambda seed: f"seed{seed}")
def integrated_returns(request) -> pd.Series:
    return _regime_vol_returns(request.param)


def test_the_regime_vol_fit_is_integrated(integrated_returns):
    """The premise: arch's unconstrained-start fit sits at the stationarity bound."""
    result = arch_model(100.0 * integrated_returns.dropna(), mean="Constant", vol="GARCH", p=1, q=1).fit(disp="off")
    assert result.params["alpha[1]"] + result.params["beta[1]"] > 1.0 - STATIONARITY_MARGIN


def test_an_integrated_fit_falls_back_to_ewma_and_warns(integrated_returns, caplog):
    with caplog.at_level(logging.WARNING, logger="trading_rl.features.garch"):
        params = fit_garch(integrated_returns, "RV")
    assert set(params) == {"mu", "omega", "alpha", "beta", START_VARIANCE}
    assert params["omega"] == 0.0 and params["alpha"] + params["beta"] == pytest.approx(1.0, abs=1e-15)
    # lambda and mu are arch's own maximum-likelihood EWMA fit on the same returns.
    scaled = 100.0 * integrated_returns.dropna().to_numpy()
    reference = ConstantMean(scaled, volatility=EWMAVariance(lam=None)).fit(disp="off")
    assert params["beta"] == reference.params["lam"] and params["mu"] == reference.params["mu"]
    assert params[START_VARIANCE] == pytest.approx(np.mean((scaled - params["mu"]) ** 2), rel=1e-12)
    (record,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = record.getMessage()
    garch = arch_model(scaled, mean="Constant", vol="GARCH", p=1, q=1).fit(disp="off").params
    alpha, beta = garch["alpha[1]"], garch["beta[1]"]
    for expected in (
        "symbol 'RV'",
        "900 returns",
        f"alpha + beta = {alpha + beta:.9f} (alpha {alpha:.4f}, beta {beta:.4f})",
        f"EWMA fallback (IGARCH with omega = 0): lambda {params['beta']:.4f}",
    ):
        assert expected in message, (expected, message)


def test_the_fallback_variance_is_the_ewma_recursion_from_the_start_variance(integrated_returns):
    """Against a plain loop and against arch's EWMA recursion started from the same value."""
    params = fit_garch(integrated_returns)
    ours = garch_volatility(integrated_returns, params).to_numpy()
    assert np.isnan(ours[0])
    lam, mu, start = params["beta"], params["mu"], params[START_VARIANCE]
    variance, expected = start, []
    for r in integrated_returns.dropna():
        variance = (1.0 - lam) * (100.0 * r - mu) ** 2 + lam * variance
        expected.append(np.sqrt(variance) / 100.0)
    np.testing.assert_allclose(ours[1:], expected, rtol=1e-12)
    residuals = 100.0 * integrated_returns.dropna().to_numpy() - mu
    sigma2 = np.zeros_like(residuals)
    process = EWMAVariance(lam=None)
    process.compute_variance(np.array([lam]), residuals, sigma2, start, process.variance_bounds(residuals))
    np.testing.assert_allclose(100.0 * ours[1:-1], np.sqrt(sigma2[1:]), rtol=1e-12)  # arch's row k+1 is our k


def test_the_fallback_stays_causal(integrated_returns):
    params = fit_garch(integrated_returns)
    base = garch_volatility(integrated_returns, params)
    shocked_returns = integrated_returns.copy()
    shocked_returns.iloc[500] += 0.05
    shocked = garch_volatility(shocked_returns, params)
    np.testing.assert_array_equal(base.iloc[:500], shocked.iloc[:500])
    assert shocked.iloc[500] > base.iloc[500]
    np.testing.assert_array_equal(garch_volatility(integrated_returns.iloc[:300], params), base.iloc[:300])


def test_stored_fallback_params_rebuild_the_same_feature_through_compute_features(integrated_returns):
    from trading_rl.data.synthetic import MarketModel, synthetic_prices

    market = {"family": "regime_vol", "strength": 0.8, "regime_persistence": 0.995, "n_bars": 1500, "seed": 0}
    prices = synthetic_prices(MarketModel.from_mapping(market, "market"))
    fitted = compute_features(prices, FeatureParams.from_mapping({"garch": {"fit_bars": 901}}), "RV")["garch_vol"]
    params = fit_garch(np.log(prices["close"]).diff().iloc[:901])
    stored = FeatureParams.from_mapping({"garch": {"params": params}})  # as feature_params.json holds it
    rebuilt = compute_features(prices, stored)["garch_vol"]
    np.testing.assert_array_equal(fitted.to_numpy(), rebuilt.to_numpy())
    assert np.isfinite(rebuilt.to_numpy()[1:]).all()


def test_real_index_fits_stay_stationary_and_take_no_fallback(sp500_prices, nasdaq_prices, caplog):
    """The default configuration's fits (training split through 2012-12-31) are arch's own
    parameters, bit for bit, far from the margin: the fallback cannot change the default run."""
    for prices in (sp500_prices, nasdaq_prices):
        returns = np.log(prices["close"]).diff()
        train = returns[returns.index <= "2012-12-31"]
        with caplog.at_level(logging.WARNING, logger="trading_rl.features.garch"):
            params = fit_garch(train)
        expected = arch_model(100.0 * train.dropna().to_numpy(), mean="Constant", vol="GARCH", p=1, q=1).fit(
            disp="off", show_warning=False
        )
        assert params == {
            "mu": expected.params["mu"],
            "omega": expected.params["omega"],
            "alpha": expected.params["alpha[1]"],
            "beta": expected.params["beta[1]"],
        }
        assert params["alpha"] + params["beta"] < 0.995
    assert not caplog.records


def test_bad_fallback_params_are_refused(integrated_returns):
    params = fit_garch(integrated_returns)
    with pytest.raises(ValueError, match="start_variance > 0"):
        garch_volatility(integrated_returns, {**params, START_VARIANCE: 0.0})
    with pytest.raises(ValueError, match="alpha \\+ beta <= 1"):
        garch_volatility(integrated_returns, {**params, "alpha": params["alpha"] + 0.01})


def test_nasdaq_through_the_2005_calm_is_at_the_bound_and_falls_back(nasdaq_prices, caplog):
    """Real data: after the 2000-2002 turbulence NASDAQ's fit through 2005-09-08 lands exactly on the
    bound (refused before the fallback); two weeks later it is 1 - 6e-5 and keeps GARCH."""
    returns = np.log(nasdaq_prices["close"]).diff()
    with caplog.at_level(logging.WARNING, logger="trading_rl.features.garch"):
        at_bound = fit_garch(returns[returns.index <= "2005-09-08"], "nasdaq")
        inside = fit_garch(returns[returns.index <= "2005-09-22"], "nasdaq")
    assert START_VARIANCE in at_bound and START_VARIANCE not in inside
    assert inside["alpha"] + inside["beta"] > 0.9999  # near the bound, and kept (no START_VARIANCE above)
    (record,) = caplog.records
    assert "symbol 'nasdaq'" in record.getMessage() and "EWMA" in record.getMessage()
