"""``folds.chain_metrics``: a walk-forward chain's own evaluation, read from the fold table by its
model name (symbols and agent names may hold underscores)."""

import math

import pandas as pd

from trading_rl.evaluation.validation.folds import chain_metrics


def fold_rows(symbol, agent, seed, kind, sharpes, returns):
    return [
        {"symbol": symbol, "agent": agent, "seed": seed, "kind": kind, "fold": fold, "sharpe": sharpe}
        | {"total_return": ret, "max_drawdown": -abs(ret)}
        for fold, (sharpe, ret) in enumerate(zip(sharpes, returns))
    ]


FOLDS = pd.DataFrame(
    fold_rows("sp_500", "sac", 0, "agent", [1.0, float("nan"), 3.0, 5.0], [0.01, 0.0, 0.03, 0.05])
    + fold_rows("sp_500", "sac_icm", 0, "agent", [9.0, 9.0, 9.0, 9.0], [0.9, 0.9, 0.9, 0.9])
    + fold_rows("sp_500", "buy_and_hold", -1, "baseline", [7.0] * 4, [0.7] * 4)
)


def test_a_chain_reads_only_its_own_windows_with_the_one_sharpe_convention():
    # folds 1-3 of sac seed 0: Sharpes [0 (no fill), 3, 5] -> 3; returns [0, 0.03, 0.05] -> 0.03
    metrics = chain_metrics(FOLDS, "sp_500_sac_seed0_folds1-3")
    assert metrics == {"sharpe": 3.0, "total_return": 0.03, "max_drawdown": -0.03, "n_windows": 3.0}
    assert chain_metrics(FOLDS, "sp_500_sac_icm_seed0_folds0-1")["sharpe"] == 9.0  # not the "sac" rows
    assert math.isclose(chain_metrics(FOLDS, "sp_500_sac_seed0_folds0-0")["total_return"], 0.01)


def test_names_of_no_chain_give_nothing():
    for name in ("sp_500_sac_seed1_folds0-1", "sp_500_buy_and_hold_seed-1_folds0-3", "sp_500_sac_seed0_folds7-9"):
        assert chain_metrics(FOLDS, name) == {}
