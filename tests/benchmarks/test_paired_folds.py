"""benchmarks/paired_folds: the agents' runs of two fold tables paired on (symbol, fold, agent, seed),
baselines left out; per-fold, per-symbol and per-chain rows with the paired change; tables that hold
other runs are refused."""

from __future__ import annotations

import pandas as pd
import pytest
from paired_folds import paired, report


def _folds(sharpe_by_seed: dict[int, list[float]]) -> pd.DataFrame:
    rows = [
        {"symbol": "sp500", "fold": fold, "kind": "agent", "agent": "sac", "seed": seed, "sharpe": value}
        for seed, values in sharpe_by_seed.items()
        for fold, value in enumerate(values)
    ]
    rows.append({"symbol": "sp500", "fold": 0, "kind": "baseline", "agent": "cash", "seed": -1, "sharpe": 9.0})
    return pd.DataFrame(rows)


def test_runs_pair_by_seed_and_fold_and_chains_average_their_folds():
    before = _folds({0: [0.1, 0.2], 1: [0.3, 0.4], 2: [0.5, 0.6]})
    after = _folds({0: [0.2, 0.2], 1: [0.3, 0.6], 2: [0.5, 0.6]})
    pairs = paired(before, after.sample(frac=1.0, random_state=0), ["sharpe"])
    assert len(pairs) == 6, "the baseline row is not an agent run"
    assert pairs.set_index(["fold", "seed"]).loc[(1, 1), "sharpe_after"] == pytest.approx(0.6)
    lines = report(pairs, "sharpe")
    fold_0 = next(line for line in lines if line.startswith("| sp500 0 |"))
    assert "| 3 | 0.300 | 0.300 |" in fold_0  # medians over the three seeds
    chains = next(line for line in lines if "chain means" in line)
    # Chain means before 0.15, 0.35, 0.55 and after 0.2, 0.45, 0.55: changes 0.05, 0.1, 0.
    assert chains.split("|")[5].strip().startswith("+0.050")
    assert lines[-1].endswith("sp500 0.200"), "the seeds' spread: sd of the chain means before"


def test_tables_with_other_runs_are_refused():
    before = _folds({0: [0.1, 0.2], 1: [0.3, 0.4]})
    with pytest.raises(ValueError, match="different"):
        paired(before, _folds({0: [0.1, 0.2], 2: [0.3, 0.4]}), ["sharpe"])
