"""Causal regime labels and per-regime metrics that add up to the whole."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from trading_rl.evaluation.validation.regimes import (
    REGIMES,
    UNLABELLED,
    RegimeParams,
    RegimeValidationParams,
    label_regimes,
    regime_metrics,
    step_regimes,
    walk_forward_regime_metrics,
)

SMALL_SETTINGS = {"trend_window": 10, "vol_window": 5, "vol_lookback": 30, "vol_quantile": 0.8, "trend_threshold": 0.5}
SMALL = RegimeParams(**SMALL_SETTINGS)


def regime_walk(seed: int = 0) -> pd.Series:
    """A price path with a rally, a slide, a flat stretch and a volatile burst."""
    rng = np.random.default_rng(seed)
    drift = np.r_[np.full(120, 0.004), np.full(120, -0.004), np.zeros(120), np.zeros(60)]
    noise = np.r_[np.full(360, 0.005), np.full(60, 0.03)]
    close = 100 * np.exp(np.cumsum(drift + noise * rng.standard_normal(drift.size)))
    return pd.Series(close, index=pd.bdate_range("2015-01-01", periods=close.size, name="timestamp"))


def test_labels_follow_the_rules_on_a_path_with_known_phases():
    labels = label_regimes(regime_walk(), SMALL)
    assert labels.iloc[:30].isna().all()  # warm-up: vol_window + vol_lookback bars
    assert set(labels.dropna()) <= set(REGIMES)
    assert labels.iloc[60:120].value_counts().idxmax() == "bull"
    assert labels.iloc[180:240].value_counts().idxmax() == "bear"
    assert labels.iloc[300:360].value_counts().idxmax() == "sideways"
    # The burst is "high" against the last vol_lookback bars until it fills their top quantile.
    assert (labels.iloc[361:366] == "high_volatility").all()


def test_labels_match_a_hand_computation_of_the_rules():
    close = regime_walk(3)
    labels = label_regimes(close, SMALL)
    log_close = np.log(close.to_numpy())
    returns = np.diff(log_close)
    for t in range(40, close.size, 17):
        vol = np.std(returns[t - 5 : t], ddof=1)  # returns ending at bar t
        past_vols = [np.std(returns[s - 5 : s], ddof=1) for s in range(t - 29, t + 1)]
        trend = (log_close[t] - log_close[t - 10]) / (vol * math.sqrt(10))
        if vol > np.quantile(past_vols, 0.8):
            expected = "high_volatility"
        elif trend > 0.5:
            expected = "bull"
        elif trend < -0.5:
            expected = "bear"
        else:
            expected = "sideways"
        assert labels.iloc[t] == expected, t


@pytest.mark.parametrize("cut", [45, 130, 250, 371, 419])
def test_labels_are_causal_prefix_invariant(cut):
    close = regime_walk(1)
    full = label_regimes(close, SMALL)
    prefix = label_regimes(close.iloc[:cut], SMALL)
    pd.testing.assert_series_equal(prefix, full.iloc[:cut])


def test_labels_do_not_change_when_the_future_changes():
    close = regime_walk(2)
    changed = close.copy()
    changed.iloc[200:] *= np.exp(np.linspace(0, -1, close.size - 200))
    pd.testing.assert_series_equal(label_regimes(close, SMALL).iloc[:200], label_regimes(changed, SMALL).iloc[:200])


def test_unknown_parameter_is_named():
    with pytest.raises(ValueError, match=r"regime_validation\.regimes\.vol_windw"):
        RegimeParams.from_mapping({"vol_windw": 5}, "regime_validation.regimes")


def _rollout(close: pd.Series, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    steps = close.index[1:]
    return pd.DataFrame(
        {
            "timestamp": steps,
            "return": rng.normal(0.0, 0.01, steps.size),
            "action_raw": rng.uniform(-1, 1, steps.size),
            "trade_value": np.where(rng.uniform(size=steps.size) < 0.3, 100.0, 0.0),
        }
    )


def test_per_regime_log_returns_add_up_to_the_whole():
    close = regime_walk(4)
    labels = label_regimes(close, SMALL)
    rollout = _rollout(close, 0)
    table = regime_metrics(rollout, labels, periods_per_year=252, hold_threshold=0.1).set_index("regime")
    parts = table.drop(index="all")
    assert parts["n_steps"].sum() == len(rollout) == table.loc["all", "n_steps"]
    assert parts["log_return"].sum() == pytest.approx(np.log1p(rollout["return"]).sum(), abs=1e-12)
    assert table.loc["all", "total_return"] == pytest.approx(np.prod(1 + rollout["return"]) - 1)
    assert np.prod(1 + parts["total_return"]) == pytest.approx(1 + table.loc["all", "total_return"])
    assert parts["n_trades"].sum() == table.loc["all", "n_trades"]
    assert UNLABELLED in parts.index  # warm-up steps are kept, not dropped


def test_a_step_is_attributed_to_the_regime_known_when_it_was_decided():
    index = pd.bdate_range("2020-01-01", periods=4)
    labels = pd.Series(["bull", "bear", "sideways", "high_volatility"], index=index)
    # A step marked at bar t was decided at bar t-1's close.
    np.testing.assert_array_equal(step_regimes(index[1:], labels), ["bull", "bear", "sideways"])
    rollout = pd.DataFrame({"timestamp": index[1:], "return": [0.01, -0.02, 0.03], "action_raw": [0.5, -0.5, 0.0]})
    table = regime_metrics(rollout, labels, 252, 0.1).set_index("regime")
    assert table.loc["bull", "total_return"] == pytest.approx(0.01)
    assert table.loc["bear", "total_return"] == pytest.approx(-0.02)


def _walk_forward_returns(close: pd.Series) -> pd.DataFrame:
    """Two folds of 100 test steps (overlapping by 20) × two agent seeds, a cash baseline and the
    market line, shaped like ``walk_forward_returns``."""
    frames = []
    for fold, start in enumerate((140, 220)):
        window = _rollout(close.iloc[start : start + 101], seed=fold)
        for kind, agent, seed in (
            ("agent", "sac_icm", 0),
            ("agent", "sac_icm", 1),
            ("baseline", "cash", -1),
            ("baseline", "buy_and_hold_full", -1),
        ):
            rows = window.assign(symbol="X", fold=fold, kind=kind, agent=agent, seed=seed)
            if agent == "sac_icm":
                rows["return"] = rows["return"] * (1 + seed)
            if agent == "cash":
                rows = rows.assign(**{"return": 0.0, "action_raw": 0.0, "trade_value": 0.0})
            if agent == "buy_and_hold_full":
                rows = rows.assign(action_raw=np.nan, trade_value=np.nan)
            frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def test_walk_forward_regimes_pool_each_seeds_folds_once_and_keep_seeds_apart():
    close = regime_walk(5)
    labels = label_regimes(close, SMALL)
    returns = _walk_forward_returns(close)
    table = walk_forward_regime_metrics(returns, {"X": labels}, {"X": 252.0}, 0.1)
    assert list(table.columns[:5]) == ["symbol", "model", "kind", "seed", "regime"]
    assert set(map(tuple, table[["model", "seed"]].drop_duplicates().to_numpy())) == {
        ("sac_icm", 0),
        ("sac_icm", 1),
        ("cash", -1),
        ("buy_and_hold_full", -1),
    }
    for seed in (0, 1):
        steps = returns[(returns["agent"] == "sac_icm") & (returns["seed"] == seed)]
        # fold 0's last 20 steps overlap fold 1's first ones: kept once, from the later fold
        kept = pd.concat(
            [steps[(steps["fold"] == 0) & (steps["timestamp"] < close.index[221])], steps[steps["fold"] == 1]]
        )
        assert len(kept) == 180
        expected = regime_metrics(kept, labels, 252.0, 0.1).set_index("regime")
        got = table[(table["model"] == "sac_icm") & (table["seed"] == seed)].set_index("regime")
        pd.testing.assert_frame_equal(got[expected.columns], expected, check_dtype=False)  # NaN n_trades of the market
    cash = table[table["model"] == "cash"].set_index("regime")
    assert (cash["n_trades"] == 0).all() and (cash["total_return"] == 0).all()
    market = table[table["model"] == "buy_and_hold_full"]
    assert market["n_trades"].isna().all()  # not an agent: no fills to count


def test_walk_forward_regimes_need_the_traded_value():
    close = regime_walk(5)
    with pytest.raises(ValueError, match="trade_value"):
        walk_forward_regime_metrics(
            _walk_forward_returns(close).drop(columns="trade_value"),
            {"X": label_regimes(close, SMALL)},
            {"X": 252.0},
            0.1,
        )


def check_regime_validation_params(params):
    RegimeValidationParams.from_mapping(params, "regime_validation")


def test_the_test_split_parameter_is_refused_by_name():
    with pytest.raises(ValueError, match=r"regime_validation\.split.*final_evaluation"):
        check_regime_validation_params({"split": "test", "regimes": {}})
    with pytest.raises(ValueError, match=r"regime_validation\.regmes"):
        check_regime_validation_params({"regmes": {}})
    with pytest.raises(ValueError, match=r"regime_validation\.regimes\.vol_windw"):
        check_regime_validation_params({"regimes": {"vol_windw": 5}})
    check_regime_validation_params({"regimes": SMALL_SETTINGS})


def test_walk_forward_regimes_attribute_each_regime_against_the_market_line():
    close = regime_walk(5)
    labels = label_regimes(close, SMALL)
    returns = _walk_forward_returns(close)
    market = close.pct_change().reindex(pd.to_datetime(returns["timestamp"])).to_numpy()
    half = returns["agent"] == "sac_icm"
    returns = returns.assign(
        market=market,
        exposure=np.where(half, 0.5, np.where(returns["agent"] == "cash", 0.0, 1.0)),
        **{"return": np.where(half, 0.5 * market, returns["return"])},
    )
    table = walk_forward_regime_metrics(returns, {"X": labels}, {"X": 252.0}, 0.1, cost_rate=0.0003)
    agent = table[(table["model"] == "sac_icm") & (table["n_steps"] >= 20)]
    assert len(agent) >= 2
    np.testing.assert_allclose(agent["beta"], 0.5)
    np.testing.assert_allclose(agent["alpha_annual"], 0.0, atol=1e-12)
    assert (agent["mean_exposure"] == 0.5).all()
    cash = table[(table["model"] == "cash") & (table["n_steps"] >= 20)]
    assert (cash["beta"] == 0.0).all()
    # the market line is what the others are measured against: no attribution of its own
    assert table.loc[table["model"] == "buy_and_hold_full", "beta"].isna().all()
    # without costs the table is as before; with costs, returns from before the columns are refused
    assert "beta" not in walk_forward_regime_metrics(returns, {"X": labels}, {"X": 252.0}, 0.1)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['exposure'\]; rerun the walk_forward"):
        walk_forward_regime_metrics(returns.drop(columns="exposure"), {"X": labels}, {"X": 252.0}, 0.1, 0.0003)
