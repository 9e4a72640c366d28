"""benchmarks/migrate_ledger.py: rows recorded before configuration identities get today's identity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from migrate_ledger import migrate_file, migrate_rows

from trading_rl.evaluation.ledger.ledger import LATER_COLUMNS, read_ledger, trial_key, trial_row
from trading_rl.evaluation.metrics.metrics import return_moments
from trading_rl.provenance import identity_hash

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "results" / "trial_ledger"


def _legacy_row(agent: str, source: str = "walk_forward", commit: str = "873eba5aaaa") -> dict:
    row = trial_row(
        source=source,
        symbol="sp500",
        split="walk_forward",
        period_start="2013-01-10",
        period_end="2015-12-31",
        agent=agent,
        configuration={},
        moments=return_moments(np.random.default_rng(0).normal(0, 0.01, 30)),
        n_runs=6,
        periods_per_year=252.0,
        run={"git_commit": commit},
    )
    legacy = {
        "agent": agent,
        "agent_params": {
            "reward": {"scale": 100.0},
            "sac": {"batch_size": 64},
            "training": {"log_interval": 10, "resume": "auto"},
            "auxiliary": {"enabled": False, "weights": {"next_return": 1.0}},
        },
        "walk_forward": {"seeds": 2, "device": "auto", "train_length": 1000},
        "env": {"window_size": 10},
        "seed": 42,
        "symbol": "sp500",
    }
    return {**row, "config": json.dumps(legacy), "config_hash": "legacyhash"}


def test_legacy_rows_get_streams_identity_views_and_a_version_per_commit():
    rows = pd.DataFrame([_legacy_row("sac_icm"), _legacy_row("sac"), _legacy_row("sac_icm", "learning_curve")])
    migrated = migrate_rows(rows)
    first, second, curve = (json.loads(text) for text in migrated["config"])
    # The agent's stream was its position in walk_forward.agents: the run's row order.
    assert first["streams"] == {"seed": 42, "seeds": 2, "agent_stream": 0}
    assert second["streams"]["agent_stream"] == 1 and "agent_stream" not in curve["streams"]
    assert first["algorithm_version"] == "0+873eba5"
    params = first["agent_params"]
    assert params["reward_scale"] == 100.0 and "auxiliary" not in params and "log_interval" not in params["training"]
    assert first["agent_params"]["icm"]["enabled"] is True  # recorded when curiosity was on by default
    assert "icm" not in second["agent_params"]  # sac trains without its ICM (today's default: off)
    assert "device" not in first["walk_forward"] and "seeds" not in first["walk_forward"]
    assert list(migrated["config_hash"]) == [identity_hash(json.loads(text)) for text in migrated["config"]]
    # The learning curve recorded its windows' first bar; migrated, the first bar of its returns.
    assert list(migrated["period_start"]) == ["2013-01-10", "2013-01-10", "2013-01-11"]
    # Migrating twice changes nothing.
    pd.testing.assert_frame_equal(migrate_rows(migrated), migrated)


def test_the_committed_ledger_is_migrated():
    ledger = read_ledger(COMMITTED)
    configurations = [json.loads(text) for text in ledger["config"]]
    assert all("algorithm_version" in c and "streams" in c and "seed" not in c for c in configurations)
    assert list(ledger["config_hash"]) == [identity_hash(c) for c in configurations]
    assert ledger["config"].map(trial_key).nunique() <= ledger["config_hash"].nunique()


def test_a_file_written_before_the_later_columns_is_migrated(tmp_path):
    """Files written before ``config_env`` and ``state`` existed migrate with those columns as None
    (the script read them raw and refused them as lacking columns)."""
    file = tmp_path / "old.parquet"
    pd.DataFrame([_legacy_row("sac_icm")]).drop(columns=list(LATER_COLUMNS)).to_parquet(file, index=False)
    migrated = migrate_file(file)
    assert migrated[list(LATER_COLUMNS)].isna().all().all()
    assert json.loads(migrated["config"].iloc[0])["algorithm_version"] == "0+873eba5"
