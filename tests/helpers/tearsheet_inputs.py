"""Catalog entries every phase's tearsheet node reads, for pipeline tests on an in-memory catalog."""

from __future__ import annotations

from kedro.io import MemoryDataset

from trading_rl.evaluation.ledger.ledger import empty_ledger


def tearsheet_inputs() -> dict[str, MemoryDataset]:
    return {
        "params:tearsheet": MemoryDataset({"rolling_window": 20, "dpi": 40}),
        "params:regime_validation": MemoryDataset({"regimes": {"vol_lookback": 60}}),
        "prior_trial_ledger": MemoryDataset(empty_ledger()),
        "run_metadata": MemoryDataset({"seed": 0, "save_version": "test"}),
    }
