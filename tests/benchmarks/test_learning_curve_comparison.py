"""benchmarks/learning_curve.py compares variants on matched runs and measures when each run trades."""

from __future__ import annotations

import numpy as np
import pandas as pd
from learning_curve import compare_variants, first_stable_budget

BUDGETS = (2500, 5000, 10000)


def _runs(variant: str, seed: int, trades: tuple[bool, ...], sharpes: tuple[float | None, ...]) -> list[dict]:
    return [
        {
            "variant": variant,
            "symbol": "sp500",
            "fold": 0,
            "seed": seed,
            "budget": budget,
            "trades": traded,
            "sharpe": sharpe,
            "max_drawdown": -0.01,
            "fill_rate": 0.1 if traded else 0.0,
        }
        for budget, traded, sharpe in zip(BUDGETS, trades, sharpes)
    ]


def test_the_trading_budget_is_the_first_from_which_every_later_budget_trades():
    runs = pd.DataFrame(
        [
            *_runs("a", 0, (True, True, True), (1.0, 1.0, 1.0)),
            *_runs("a", 1, (True, False, True), (1.0, None, 1.0)),  # stops, then trades again: counts from 10000
            *_runs("a", 2, (False, True, False), (None, 1.0, None)),  # not trading at the largest budget: never
        ]
    )
    stable = first_stable_budget(runs)
    assert stable.loc[("a", "sp500", 0, 0)] == 2500
    assert stable.loc[("a", "sp500", 0, 1)] == 10000
    assert np.isinf(stable.loc[("a", "sp500", 0, 2)])


def test_variants_are_compared_on_the_same_fold_and_seed_only_with_no_trade_as_zero_sharpe():
    runs = pd.DataFrame(
        [
            *_runs("ref", 0, (False, True, True), (None, 0.5, 1.0)),
            *_runs("ref", 1, (False, True, True), (None, 0.2, 0.4)),
            *_runs("new", 0, (True, True, True), (0.3, 0.7, 1.5)),
            *_runs("new", 1, (True, True, True), (0.1, 0.4, 0.6)),
            *_runs("new", 2, (True, True, True), (9.0, 9.0, 9.0)),  # no reference run: not a pair
        ]
    )
    comparison = compare_variants(runs, "ref").set_index("budget")
    assert (comparison["pairs"] == 2).all()
    assert comparison.loc[2500, "sharpe"] == np.median([0.3 - 0.0, 0.1 - 0.0])
    assert np.isclose(comparison.loc[10000, "sharpe"], np.median([0.5, 0.2]))
    assert comparison.loc[5000, "max_drawdown"] == 0.0
