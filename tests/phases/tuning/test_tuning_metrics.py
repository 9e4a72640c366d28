"""The tuning run's MLflow metrics: each trial's objective at its number, the chosen one's, counts."""

from __future__ import annotations

import math

import pandas as pd

from trading_rl.phases.tuning.report import tuning_metrics


def test_every_trial_once_at_its_number_and_the_counts_by_state():
    trials = pd.DataFrame(
        {
            "trial": [0, 0, 1, 1, 2, 2],
            "symbol": ["a", "b"] * 3,
            "state": ["complete", "complete", "fail", "fail", "complete", "complete"],
            "objective": [0.4, 0.4, math.nan, math.nan, 0.9, 0.9],
        }
    )
    metrics = tuning_metrics(trials, {"chosen": {"trial": 2, "objective": 0.9}})
    assert [(p["step"], p["value"]) for p in metrics["trial/objective"]][::2] == [(0, 0.4), (2, 0.9)]
    assert len(metrics["trial/objective"]) == 3  # one point per trial (the NaN one is dropped when logged)
    assert metrics["chosen/objective"] == {"value": 0.9, "step": 2}
    assert (metrics["trials/complete"]["value"], metrics["trials/fail"]["value"]) == (2, 1)
