"""benchmarks/her_control's summary: the two HER arms paired run by run (same market, source, seed).
No training."""

from __future__ import annotations

import pandas as pd
from her_control import ARMS, summarise


def _row(realisation: int, seed: int, arm: str, success: float) -> dict:
    return {
        "family": "fast",
        "market": "fast:0.25",
        "realisation": realisation,
        "seed": seed,
        "arm": arm,
        "success": success,
        "success_vs_control": success - 0.1,
        "rank_correlation": 0.5,
        "success_low_third": success,
        "success_middle_third": success,
        "success_high_third": success,
    }


def test_the_arms_are_paired_run_by_run():
    assert ARMS == {"relabel": None, "no_relabel": 0}  # relabelling as configured against none
    rows = [
        _row(realisation, seed, arm, success + (0.2 if arm == "relabel" else 0.0))
        for realisation, seed, success in ((1, 0, 0.1), (1, 1, 0.3), (2, 0, 0.2), (2, 1, 0.5))
        for arm in ARMS
    ]
    table = summarise(pd.DataFrame(rows))
    # every run is 0.2 better with relabelling, whatever its level: the paired delta is exactly 0.2,
    # and the mean's relative gain is 0.2 / mean(0.1, 0.3, 0.2, 0.5) = +73%
    assert "| fast | 4 | +0.20 [+0.20, +0.20] | +73% |" in table
    assert "| fast | relabel | 4 |" in table and "| fast | no_relabel | 4 |" in table
