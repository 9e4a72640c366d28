"""Return attribution: pinned to statsmodels' OLS with HAC errors, hand cases, and a real env run."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

from trading_rl.envs import ContinuousTradingEnv, EnvConfig
from trading_rl.evaluation.metrics import attribution as a
from trading_rl.evaluation.metrics.baselines import market_returns, run_baselines
from trading_rl.evaluation.metrics.metrics import sharpe_ratio, total_return

PPY = 252


def _market(n=500, seed=0):
    return np.random.default_rng(seed).normal(0.0004, 0.01, n)


def _statsmodels_hac(y, x, lags):
    return sm.OLS(y, sm.add_constant(x)).fit(cov_type="HAC", cov_kwds={"maxlags": lags})


@pytest.mark.parametrize("n, seed", [(60, 1), (250, 2), (1000, 3)])
def test_alpha_beta_and_hac_errors_equal_statsmodels(n, seed):
    rng = np.random.default_rng(seed)
    market = _market(n, seed)
    exposure = np.clip(0.3 + 0.1 * rng.standard_normal(n), -1, 1)
    # autocorrelated, heteroskedastic residuals: the case HAC errors exist for
    noise = np.convolve(rng.standard_normal(n + 4), np.ones(5) / 5, "valid")[:n] * 0.002 * (1 + np.abs(market) * 50)
    returns = 0.0002 + 0.4 * market + noise
    result = a.return_attribution(returns, exposure, market, periods_per_year=PPY, cost_rate=0.0003)
    lags = a.newey_west_lags(n)
    fit = _statsmodels_hac(returns, market, lags)
    assert result.hac_lags == lags == int(np.floor(4 * (n / 100) ** (2 / 9)))
    assert result.beta == pytest.approx(fit.params[1], rel=1e-10)
    assert result.alpha_annual == pytest.approx(fit.params[0] * PPY, rel=1e-10)
    assert result.alpha_se == pytest.approx(fit.bse[0] * PPY, rel=1e-10)
    assert result.alpha_t == pytest.approx(fit.tvalues[0], rel=1e-10)
    low, high = fit.conf_int(alpha=0.10)[0] * PPY
    assert result.alpha_ci90 == pytest.approx((low, high), rel=1e-10)
    residual_vol = fit.resid.std(ddof=2) * math.sqrt(PPY)
    assert result.information_ratio == pytest.approx(fit.params[0] * PPY / residual_vol, rel=1e-10)


def test_hac_errors_equal_statsmodels_for_any_lag():
    market = _market(300, 7)
    returns = 0.5 * market + np.random.default_rng(8).normal(0, 0.003, 300)
    for lags in (0, 1, 5, 12):
        (_, _), errors, _ = a.ols_hac(returns, market, lags)
        assert errors == pytest.approx(_statsmodels_hac(returns, market, lags).bse, rel=1e-10)


def test_half_the_market_has_beta_half_and_no_alpha():
    market = _market()
    result = a.return_attribution(0.5 * market, np.full(market.size, 0.5), market, periods_per_year=PPY, cost_rate=0.0)
    assert result.beta == pytest.approx(0.5)
    assert result.alpha_annual == pytest.approx(0.0, abs=1e-12)
    assert result.mean_exposure == 0.5
    assert math.isnan(result.alpha_t) and "no t-statistic" in result.reason
    # with no costs the exposure-matched passive is the agent itself
    assert result.exposure_matched_sharpe == pytest.approx(sharpe_ratio(market, PPY))
    assert result.exposure_matched_return == pytest.approx(total_return(0.5 * market))


def test_a_constant_daily_edge_shows_as_alpha_with_a_ci_above_zero():
    market = _market(1000, 4)
    returns = 0.0004 + 0.2 * market + np.random.default_rng(5).normal(0, 0.001, 1000)
    result = a.return_attribution(returns, np.full(1000, 0.2), market, periods_per_year=PPY, cost_rate=0.0)
    assert result.alpha_annual == pytest.approx(0.0004 * PPY, rel=0.1)
    assert result.alpha_ci90_low > 0 and result.alpha_t > 3
    assert result.beta == pytest.approx(0.2, abs=0.01)


def test_a_timing_strategy_has_a_positive_timing_correlation_and_a_pure_beta_none():
    market = _market(1000, 6)
    # long before rises, flat before falls (exposure at close t earns the market's bar t + 1)
    exposure = np.r_[(market[1:] > 0).astype(float), 0.0]
    returns = np.r_[0.0, exposure[:-1] * market[1:]]
    timed = a.return_attribution(returns, exposure, market, periods_per_year=PPY, cost_rate=0.0)
    assert timed.timing_corr > 0.5
    assert timed.alpha_ci90_low > 0
    passive = a.return_attribution(0.5 * market, np.full(1000, 0.5), market, periods_per_year=PPY, cost_rate=0.0)
    assert math.isnan(passive.timing_corr) and "no timing correlation" in passive.reason
    shuffled = np.random.default_rng(0).permutation(exposure)
    assert abs(a.return_attribution(returns, shuffled, market, periods_per_year=PPY, cost_rate=0.0).timing_corr) < 0.1


def test_exposure_matched_passive_pays_entry_and_rebalancing_costs_by_hand():
    market = np.array([0.01, -0.02, 0.03])
    e, c = 0.4, 0.001
    expected = np.array(
        [
            e * 0.01 - c * e - c * abs(e * 0.01 * (1 - e)),
            e * -0.02 - c * abs(e * -0.02 * (1 - e)),
            e * 0.03,  # no rebalance after the last bar
        ]
    )
    assert a.exposure_matched_returns(market, e, c) == pytest.approx(expected, rel=1e-12)
    # a short exposure pays on its absolute traded value too
    short = a.exposure_matched_returns(market, -0.2, c)
    assert short[0] == pytest.approx(-0.2 * 0.01 - c * 0.2 - c * abs(-0.2 * 0.01 * 1.2))


def test_exposure_matched_passive_costs_lower_its_sharpe():
    market = _market()
    free = a.return_attribution(0.3 * market, np.full(500, 0.3), market, periods_per_year=PPY, cost_rate=0.0)
    costly = a.return_attribution(0.3 * market, np.full(500, 0.3), market, periods_per_year=PPY, cost_rate=0.01)
    assert costly.exposure_matched_sharpe < free.exposure_matched_sharpe
    assert costly.exposure_matched_return < free.exposure_matched_return


def test_sharpe_standard_error_is_the_psr_variance():
    returns = np.random.default_rng(9).standard_t(5, 800) * 0.01 + 0.0005
    sr = returns.mean() / returns.std(ddof=1)
    skew, kurt = stats.skew(returns), stats.kurtosis(returns, fisher=False)
    expected = math.sqrt((1 - skew * sr + (kurt - 1) / 4 * sr**2) / (returns.size - 1) * PPY)
    assert a.sharpe_standard_error(returns, PPY) == pytest.approx(expected, rel=1e-12)
    # roughly 1/sqrt(years) for small Sharpe ratios
    assert a.sharpe_standard_error(returns, PPY) == pytest.approx(math.sqrt(PPY / 800), rel=0.1)


def test_cash_is_exactly_zero_beta_and_alpha_with_reasons_for_the_rest():
    market = _market()
    result = a.return_attribution(np.zeros(500), np.zeros(500), market, periods_per_year=PPY, cost_rate=0.001)
    assert (result.beta, result.alpha_annual, result.mean_exposure) == (0.0, 0.0, 0.0)
    assert math.isnan(result.alpha_t) and math.isnan(result.timing_corr) and math.isnan(result.sharpe)
    assert result.exposure_matched_return == 0.0
    assert "no t-statistic" in result.reason and "no timing correlation" in result.reason
    json.dumps(result.to_dict(), allow_nan=False)


def test_too_few_bars_and_a_constant_market_give_nan_with_a_reason():
    short = a.return_attribution([0.01] * 5, [0.1] * 5, [0.02] * 5, periods_per_year=PPY, cost_rate=0.0)
    assert short.n == 5 and math.isnan(short.beta) and math.isnan(short.alpha_ci90_low)
    assert "fewer than" in short.reason
    flat = a.return_attribution(np.zeros(50), np.zeros(50), np.full(50, 0.001), periods_per_year=PPY, cost_rate=0.0)
    assert math.isnan(flat.beta) and "market returns are constant" in flat.reason
    empty = a.return_attribution([], [], [], periods_per_year=PPY, cost_rate=0.0)
    assert empty.n == 0 and empty.to_dict()["mean_exposure"] is None


def test_bad_input_is_an_error_naming_the_argument():
    market = _market(30)
    with pytest.raises(ValueError, match="'exposure'.*NaN"):
        a.return_attribution(market, np.r_[np.nan, np.zeros(29)], market, periods_per_year=PPY, cost_rate=0.0)
    with pytest.raises(ValueError, match="one entry per bar.*30, 29 and 30"):
        a.return_attribution(market, np.zeros(29), market, periods_per_year=PPY, cost_rate=0.0)
    with pytest.raises(ValueError, match="periods_per_year"):
        a.return_attribution(market, np.zeros(30), market, periods_per_year=0, cost_rate=0.0)
    with pytest.raises(ValueError, match="cost_rate"):
        a.return_attribution(market, np.zeros(30), market, periods_per_year=PPY, cost_rate=-1.0)
    with pytest.raises(ValueError, match="no 'cash' column"):
        a.rollout_exposure(pd.DataFrame({"equity": [1.0]}))


def test_to_dict_is_json_ready_with_every_field():
    market = _market()
    result = a.return_attribution(0.3 * market + 0.0001, np.full(500, 0.3), market, periods_per_year=PPY, cost_rate=0.0)
    as_dict = result.to_dict()
    assert tuple(as_dict) == a.ATTRIBUTION_KEYS
    json.dumps(as_dict, allow_nan=False)


def test_capped_buy_and_hold_on_the_env_is_its_exposure_times_the_market():
    rng = np.random.default_rng(11)
    close = 100 * np.exp(np.cumsum(rng.normal(0.0005, 0.01, 400)))
    index = pd.date_range("2021-01-04", periods=400, freq="B", name="timestamp")
    prices = pd.DataFrame({"open": np.r_[100.0, close[:-1]], "high": close * 1.01, "low": close * 0.99, "close": close})
    prices.index = index
    features = pd.DataFrame({"log_return": np.log(prices["close"]).diff().fillna(0.0)}, index=index)

    def make_env():
        return ContinuousTradingEnv(prices, features, EnvConfig(evaluation=True, window_size=3))

    rollout = run_baselines(make_env)["buy_and_hold"]
    env = make_env()
    market = market_returns(env)
    result = a.rollout_attribution(
        rollout, market, periods_per_year=PPY, cost_rate=a.env_cost_rate(EnvConfig.from_mapping({}))
    )
    exposure = a.rollout_exposure(rollout)
    assert exposure == pytest.approx((rollout["position_value"] / rollout["equity"]).to_numpy(), rel=1e-12)
    # bought up to the 15% cap; a rise lifts it above (the cap limits buys, it never sells)
    assert exposure.min() > 0.14 and result.mean_exposure == pytest.approx(exposure.mean())
    assert result.beta == pytest.approx(result.mean_exposure, abs=0.02)
    assert result.alpha_ci90_low < 0 < result.alpha_ci90_high
    assert result.exposure_matched_sharpe == pytest.approx(result.sharpe, abs=0.3)
