"""Metrics checked against empyrical-reloaded, hand transcriptions of the PSR/DSR papers and hand
computations on small frames."""

import json
import math

import empyrical
import numpy as np
import pandas as pd
import pytest
from arch.data import sp500
from scipy.stats import norm

from trading_rl.evaluation.metrics import metrics as m


def _sp500_returns() -> np.ndarray:
    return sp500.load()["Adj Close"].pct_change().dropna().to_numpy()


def _series():
    rng = np.random.default_rng(7)
    sp = _sp500_returns()
    return {
        "normal": rng.normal(0.0005, 0.01, 500),
        "fat_tails": 0.01 * rng.standard_t(3, 300),
        "losing": rng.normal(-0.002, 0.02, 120),
        "short": np.array([0.01, -0.02, 0.005, 0.03, -0.01]),
        "sp500_full": sp,
        "sp500_2008": sp[2200:2600],
    }


SERIES = _series()


@pytest.mark.parametrize("name", sorted(SERIES))
@pytest.mark.parametrize("ppy", [252, 52])
def test_matches_empyrical(name, ppy):
    r = SERIES[name]
    assert m.total_return(r) == pytest.approx(empyrical.cum_returns_final(r), rel=1e-10)
    assert m.annualized_return(r, ppy) == pytest.approx(empyrical.annual_return(r, annualization=ppy), rel=1e-10)
    assert m.annualized_volatility(r, ppy) == pytest.approx(
        empyrical.annual_volatility(r, annualization=ppy), rel=1e-10
    )
    assert m.sharpe_ratio(r, ppy) == pytest.approx(empyrical.sharpe_ratio(r, annualization=ppy), rel=1e-10)
    assert m.sharpe_ratio(r, ppy, risk_free=1e-4) == pytest.approx(
        empyrical.sharpe_ratio(r, risk_free=1e-4, annualization=ppy), rel=1e-10
    )
    assert m.sortino_ratio(r, ppy) == pytest.approx(empyrical.sortino_ratio(r, annualization=ppy), rel=1e-10)
    assert m.sortino_ratio(r, ppy, required_return=2e-4) == pytest.approx(
        empyrical.sortino_ratio(r, required_return=2e-4, annualization=ppy), rel=1e-10
    )
    assert m.max_drawdown(r) == pytest.approx(empyrical.max_drawdown(r), rel=1e-10)
    assert m.calmar_ratio(r, ppy) == pytest.approx(empyrical.calmar_ratio(r, annualization=ppy), rel=1e-10)


def test_accepts_series_and_lists_alike():
    r = SERIES["short"]
    as_series = pd.Series(r, index=pd.date_range("2020-01-01", periods=r.size))
    assert m.sharpe_ratio(as_series, 252) == m.sharpe_ratio(list(r), 252) == m.sharpe_ratio(r, 252)


def test_first_period_loss_is_a_drawdown():
    assert m.max_drawdown([-0.1, 0.05]) == pytest.approx(-0.1)
    np.testing.assert_allclose(m.drawdown_series([0.1, -0.5, 0.2]), [0.0, -0.5, -0.4])


def test_undefined_ratios_are_nan():
    zeros = np.zeros(50)
    assert math.isnan(m.sharpe_ratio(zeros, 252))
    assert math.isnan(empyrical.sharpe_ratio(zeros))  # same convention for 0/0
    assert math.isnan(m.sharpe_ratio(np.full(50, 0.001), 252))  # constant: std is 0, not ~1e-18
    assert math.isnan(m.sortino_ratio([0.01, 0.02, 0.0], 252))  # no downside
    assert math.isnan(m.calmar_ratio([0.01, 0.02], 252))  # no drawdown
    assert math.isnan(m.sharpe_ratio([0.01], 252))
    assert m.total_return(zeros) == 0.0
    assert m.max_drawdown(zeros) == 0.0


def test_rejects_nan_and_two_dimensional_input():
    with pytest.raises(ValueError, match="NaN"):
        m.sharpe_ratio([0.01, np.nan, 0.02], 252)
    with pytest.raises(ValueError, match="one-dimensional"):
        m.total_return(np.zeros((3, 2)))


def test_win_rate_and_profit_factor_by_hand():
    values = [0.02, -0.01, 0.0, 0.03, -0.04, 0.0]
    assert m.win_rate(values) == pytest.approx(2 / 4)
    assert m.profit_factor(values) == pytest.approx(0.05 / 0.05)
    assert m.profit_factor([1.0, -4.0, 2.0]) == pytest.approx(0.75)
    assert math.isnan(m.win_rate([0.0, 0.0]))
    assert math.isnan(m.profit_factor([0.01, 0.02]))


def _psr_by_paper(r, sr_star):
    """PSR transcribed from Bailey & López de Prado (2012), moments written out by hand."""
    r = np.asarray(r, dtype=float)
    n = r.size
    mean = r.sum() / n
    sr = mean / math.sqrt(((r - mean) ** 2).sum() / (n - 1))
    m2 = ((r - mean) ** 2).mean()
    skew = ((r - mean) ** 3).mean() / m2**1.5
    kurt = ((r - mean) ** 4).mean() / m2**2
    return norm.cdf((sr - sr_star) * math.sqrt(n - 1) / math.sqrt(1 - skew * sr + (kurt - 1) / 4 * sr**2))


def _sr_star_by_paper(trials):
    """Expected maximum Sharpe of N unskilled trials, Bailey & López de Prado (2014), eq. for SR0."""
    n = len(trials)
    gamma = 0.5772156649015329
    v = np.var(trials, ddof=1)
    return math.sqrt(v) * ((1 - gamma) * norm.ppf(1 - 1 / n) + gamma * norm.ppf(1 - 1 / (n * math.e)))


@pytest.mark.parametrize("name", ["normal", "fat_tails", "losing", "sp500_2008", "sp500_full"])
@pytest.mark.parametrize("sr_star", [0.0, 0.02, -0.01])
def test_psr_matches_paper_formula(name, sr_star):
    r = SERIES[name]
    assert m.probabilistic_sharpe_ratio(r, sr_star) == pytest.approx(_psr_by_paper(r, sr_star), rel=1e-9)


def test_psr_is_one_half_at_the_sample_sharpe():
    for r in SERIES.values():
        assert m.probabilistic_sharpe_ratio(r, m.sharpe_ratio(r, periods_per_year=1)) == pytest.approx(0.5)


def test_psr_grows_with_track_record_length():
    rng = np.random.default_rng(3)
    r = rng.normal(0.001, 0.01, 2000)
    assert m.probabilistic_sharpe_ratio(r[:100]) < m.probabilistic_sharpe_ratio(r)


def test_dsr_matches_paper_formula():
    rng = np.random.default_rng(11)
    trials = rng.normal(0.0, 0.03, 40)
    r = SERIES["normal"]
    assert m.expected_max_sharpe(trials) == pytest.approx(_sr_star_by_paper(trials), rel=1e-12)
    assert m.deflated_sharpe_ratio(r, trials) == pytest.approx(_psr_by_paper(r, _sr_star_by_paper(trials)), rel=1e-9)


def test_dsr_numerical_example_of_the_paper():
    """Bailey & López de Prado (2014), section 'A numerical example': N=100 trials with annualised
    Sharpe variance 1/2, T=1250 daily observations, annualised SR 2.5, skew -3, kurtosis 10, 250
    days a year: SR0 ≈ 0.1132 per day and DSR ≈ 0.9004."""
    z = np.random.default_rng(0).standard_normal(100)
    trials = (z - z.mean()) / z.std(ddof=1) * math.sqrt(0.5 / 250)
    sr0 = m.expected_max_sharpe(trials)
    assert sr0 == pytest.approx(0.1132, abs=5e-5)
    dsr = m.psr_from_statistics(2.5 / math.sqrt(250), 1250, skewness=-3.0, kurtosis=10.0, sr_benchmark=sr0)
    assert dsr == pytest.approx(0.9004, abs=5e-5)


def test_dsr_falls_with_more_and_more_dispersed_trials():
    rng = np.random.default_rng(5)
    r = rng.normal(0.001, 0.01, 1000)
    few = rng.normal(0.0, 0.02, 10)
    more = np.concatenate([few, rng.normal(0.0, 0.02, 90)])
    wider = np.concatenate([few, rng.normal(0.0, 0.06, 90)])
    dsr_few, dsr_more, dsr_wider = (m.deflated_sharpe_ratio(r, t) for t in (few, more, wider))
    assert dsr_few > dsr_more > dsr_wider
    assert dsr_few < m.probabilistic_sharpe_ratio(r)


def test_expected_max_sharpe_needs_two_trials():
    with pytest.raises(ValueError, match="at least 2"):
        m.expected_max_sharpe([0.1])


def _hand_rollout() -> pd.DataFrame:
    equity = np.array([1000.0, 1010.0, 1005.0, 1005.0, 990.0, 995.0, 1000.0, 1020.0])
    previous = np.concatenate(([1000.0], equity[:-1]))
    return pd.DataFrame(
        {
            "equity": equity,
            "return": equity / previous - 1.0,
            "position": [0.0, 2.0, 2.0, 0.0, -1.0, -1.0, 0.0, 3.0],
            "trade_value": [0.0, 150.0, 0.0, -140.0, -100.0, 0.0, 98.0, 120.0],
            "action_raw": [0.05, 0.9, -0.05, -1.0, -0.3, 0.1, 0.4, 0.7],
        }
    )


def test_compute_metrics_on_a_hand_built_rollout():
    rollout = _hand_rollout()
    result = m.compute_metrics(rollout, periods_per_year=252, hold_threshold=0.1)

    assert result["n_steps"] == 8
    assert result["n_trades"] == 5
    turnover = (150 + 140 + 100 + 98 + 120) / rollout["equity"].mean()
    assert result["turnover"] == pytest.approx(turnover)
    assert result["turnover_per_year"] == pytest.approx(turnover * 252 / 8)
    # buckets: hold {0.05, -0.05, 0.1}, weak_sell {-0.3}, strong_sell {-1.0}, weak_buy {0.4},
    # strong_buy {0.9, 0.7}
    assert result["hold_share"] == pytest.approx(3 / 8)
    assert result["action_share_strong_buy"] == pytest.approx(2 / 8)
    shares = np.array([1, 1, 3, 1, 2]) / 8
    assert result["action_entropy"] == pytest.approx(-(shares * np.log(shares)).sum())
    # trades: long rows 1-2 closed at row 3 (1005 - 1000), short rows 4-5 closed at row 6
    # (1000 - 1005), long from row 7 still open (1020 - 1000)
    assert result["n_round_trips"] == 3
    assert result["win_rate"] == pytest.approx(2 / 3)
    assert result["profit_factor"] == pytest.approx(25 / 5)
    assert result["total_return"] == pytest.approx(0.02)
    assert result["period_win_rate"] == pytest.approx(4 / 6)  # two zero-return rows
    json.dumps(result)


def test_metric_keys_are_the_keys_compute_metrics_returns():
    """``metric_keys`` (what ``training.best_metric`` may name) is what every rollout's metrics hold."""
    flat = pd.DataFrame(
        {"equity": 1000.0, "return": 0.0, "position": 0.0, "trade_value": 0.0, "action_raw": 0.0}, index=range(20)
    )
    for rollout in (_hand_rollout(), flat):
        assert m.metric_keys() == tuple(m.compute_metrics(rollout, periods_per_year=252, hold_threshold=0.1))
    assert "sharpe" in m.metric_keys()


def test_compute_metrics_turns_undefined_values_into_none():
    flat = pd.DataFrame(
        {"equity": 1000.0, "return": 0.0, "position": 0.0, "trade_value": 0.0, "action_raw": 0.0}, index=range(20)
    )
    result = m.compute_metrics(flat, periods_per_year=252, hold_threshold=0.1)
    assert result["sharpe"] is None and result["win_rate"] is None and result["psr"] is None
    assert result["total_return"] == 0.0 and result["n_trades"] == 0 and result["hold_share"] == 1.0
    assert result["action_entropy"] == 0.0
    json.loads(json.dumps(result))


@pytest.mark.parametrize("sizes", [(50, 120, 7, 1), (300,), (2, 2)])
def test_pooled_moments_equal_the_moments_of_the_concatenation(sizes):
    rng = np.random.default_rng(sum(sizes))
    parts = [0.01 * rng.standard_t(4, n) + 0.001 * i for i, n in enumerate(sizes)]
    pooled = m.pool_moments([json.loads(json.dumps(m.json_ready(m.return_moments(p)))) for p in parts])
    direct = m.return_moments(np.concatenate(parts))
    assert pooled["n_obs"] == direct["n_obs"]
    for key in ("mean", "std", "skew", "kurtosis"):
        assert pooled[key] == pytest.approx(direct[key], rel=1e-9), key


def test_psr_from_moments_equals_psr_of_the_series():
    for r in SERIES.values():
        assert m.psr_from_moments(m.return_moments(r), 0.01) == pytest.approx(m.probabilistic_sharpe_ratio(r, 0.01))
    flat = m.return_moments(np.zeros(10))
    assert flat["std"] == 0.0 and math.isnan(m.sharpe_from_moments(flat)) and math.isnan(m.psr_from_moments(flat))
