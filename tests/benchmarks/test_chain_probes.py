"""benchmarks/chain_probes' per-run columns on hand-built rollouts: whether an agent times the risk of a
risk family (its exposure against the oracle's target exposure, and going flat), its drawdown and
the collapse flag. No training."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
from chain_probes import risk_timing_columns, rollout_columns

from trading_rl.data.synthetic import MarketModel

CALM, WILD = 0.002, 0.03  # |log return| per bar in the calm and in the volatile stretches


def _market(family: str = "regime_vol") -> SimpleNamespace:
    """An env-like object over closes that are calm, then volatile, then calm again (40 bars each)."""
    signs = np.where(np.arange(120) % 2 == 0, 1.0, -1.0)
    size = np.r_[np.full(40, CALM), np.full(40, WILD), np.full(40, CALM)]
    closes = 100.0 * np.exp(np.concatenate([[0.0], np.cumsum(signs * size)]))
    return SimpleNamespace(
        market_model=MarketModel(family=family, strength=0.8, n_bars=500),
        config=SimpleNamespace(max_position_pct=0.15, allow_short=False, commission_rate=0.001, slippage_rate=0.0),
        close_history=closes,
        history_positions=np.arange(closes.size),
    )


def _rollout(exposure: np.ndarray) -> pd.DataFrame:
    """Decisions at bars 1..120 (``bar_index`` is the bar after the step), equity 1, the given exposure."""
    return pd.DataFrame({"bar_index": np.arange(2, 2 + exposure.size), "equity": 1.0, "cash": 1.0 - exposure})


def _stretches(calm: float, wild: float) -> np.ndarray:
    """An exposure held at ``calm`` outside the volatile stretch and at ``wild`` inside it (decided
    from bar 1, so bar 40's decision is the first that has seen a volatile return)."""
    exposure = np.full(120, calm)
    exposure[40:80] = wild
    return exposure


def test_an_agent_that_cuts_its_exposure_when_the_risk_rises_follows_the_oracle():
    columns = risk_timing_columns(_rollout(_stretches(0.15, 0.02)), _market())
    assert columns["oracle_exposure_corr"] > 0.5
    assert not columns["went_flat"]


def test_an_agent_that_adds_risk_when_the_variance_rises_is_anti_correlated():
    columns = risk_timing_columns(_rollout(_stretches(0.02, 0.15)), _market())
    assert columns["oracle_exposure_corr"] < -0.5


def test_a_constant_exposure_times_nothing_and_a_tiny_one_went_flat():
    held = risk_timing_columns(_rollout(np.full(120, 0.15)), _market())
    assert np.isnan(held["oracle_exposure_corr"]) and not held["went_flat"]
    tiny = risk_timing_columns(_rollout(np.full(120, 0.005)), _market())
    assert tiny["went_flat"]
    assert tiny["exposure_share_of_oracle"] < 0.25 < held["exposure_share_of_oracle"]


def test_the_oracle_target_falls_in_the_volatile_stretch():
    columns = risk_timing_columns(_rollout(_stretches(0.15, 0.02)), _market())
    assert 0.0 < columns["oracle_mean_abs_exposure"] <= 0.15


def test_mean_timing_families_get_no_risk_timing_columns():
    assert risk_timing_columns(_rollout(np.full(120, 0.1)), _market("fast")) == {}


def test_rollout_columns_carry_the_drawdown_and_the_collapse_flag():
    held = pd.DataFrame(
        {
            "equity": [1.1, 0.55, 0.66],
            "cash": [0.0, 0.0, 0.0],
            "return": [0.1, -0.5, 0.2],
            "trade_units": [1.0, 0.0, 0.0],
            "action_raw": [0.0, 0.0, 0.0],
            "action_type": ["hold", "hold", "hold"],
        }
    )
    columns = rollout_columns(held, hold_threshold=0.05)
    assert columns["max_drawdown"] == -0.5
    assert columns["mean_abs_exposure"] == 1.0
    assert columns["collapsed"]  # one action bucket, no trades
    varied = held.assign(action_raw=[-0.9, 0.1, 0.9], action_type=["sell", "buy", "buy"])
    assert not rollout_columns(varied, hold_threshold=0.05)["collapsed"]
