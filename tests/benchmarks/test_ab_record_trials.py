"""benchmarks/ab_common.record_trials: one trial-ledger row per A/B variant, seeds pooled."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from ab_common import check_test_unspent, record_trials

from trading_rl.evaluation.ledger.ledger import read_ledger
from trading_rl.evaluation.metrics.metrics import json_ready, return_moments

SPEC = SimpleNamespace(
    symbol="sp500",
    config_data=lambda: {"window_size": 10},
    periods_per_year=252.0,
    splits={
        "validation": {"start": "2013-01-02", "end": "2015-12-31"},
        "test": {"start": "2016-03-31", "end": "2018-12-31"},
    },
)


def _rows():
    rng = np.random.default_rng(0)
    returns = {
        (variant, seed): rng.normal(0.001 * (variant == "SAC+ICM"), 0.01, 100)
        for variant in ("SAC", "SAC+ICM")
        for seed in (0, 1, 2)
    }
    rows = [
        {"variant": variant, "seed": seed, "split": "validation", "return_moments": json_ready(return_moments(r))}
        for (variant, seed), r in returns.items()
    ]
    return rows, returns


def test_each_variant_is_one_trial_with_its_seeds_pooled(tmp_path):
    rows, returns = _rows()
    args = argparse.Namespace(ledger=str(tmp_path / "ledger"), no_ledger=False)
    record_trials(rows, args, "ab_sac_icm", SPEC, {"SAC": {"icm": False}, "SAC+ICM": {"icm": True}})
    ledger = read_ledger(tmp_path / "ledger")
    assert list(ledger["agent"]) == ["SAC", "SAC+ICM"] and (ledger["source"] == "ab_sac_icm").all()
    assert (ledger["split"] == "validation").all() and (ledger["n_runs"] == 3).all()
    assert ledger.iloc[0]["period_start"] == "2013-01-02" and ledger["config_hash"].nunique() == 2
    pooled = np.concatenate([returns[("SAC+ICM", seed)] for seed in (0, 1, 2)])
    assert ledger.iloc[1]["n_obs"] == 300
    assert ledger.iloc[1]["sharpe"] == pytest.approx(pooled.mean() / pooled.std(ddof=1))


def test_no_ledger_is_a_dry_run(tmp_path):
    rows, _ = _rows()
    record_trials(
        rows, argparse.Namespace(ledger=str(tmp_path / "ledger"), no_ledger=True), "ab_sac_icm", SPEC, {"SAC": {}}
    )
    assert not (tmp_path / "ledger").exists()


def test_final_spends_the_test_split_once_per_configuration(tmp_path):
    rows, _ = _rows()
    for row in rows:
        row["test_return_moments"] = row["return_moments"]
    configurations = {"SAC": {"icm": False}, "SAC+ICM": {"icm": True}}
    args = argparse.Namespace(ledger=str(tmp_path / "ledger"), no_ledger=False, seeds=[0, 1, 2], allow_repeat=False)
    assert check_test_unspent(args, "ab_sac_icm", SPEC, configurations) is False  # no ledger yet
    record_trials(rows, args, "ab_sac_icm", SPEC, configurations)  # validation rows do not spend it
    assert check_test_unspent(args, "ab_sac_icm", SPEC, configurations) is False
    record_trials(rows, args, "ab_sac_icm", SPEC, configurations, split="test")
    ledger = read_ledger(tmp_path / "ledger")
    assert list(ledger["split"]) == ["validation"] * 2 + ["test"] * 2
    assert ledger.iloc[2]["period_start"] == "2016-03-31" and not ledger["repeat"].any()
    with pytest.raises(SystemExit, match="already spent on \\['SAC', 'SAC\\+ICM'\\].*--allow-repeat"):
        check_test_unspent(args, "ab_sac_icm", SPEC, configurations)
    # Other seeds are another configuration; a deliberate repeat is allowed and reported as one.
    assert (
        check_test_unspent(argparse.Namespace(**{**vars(args), "seeds": [3, 4]}), "ab_sac_icm", SPEC, configurations)
        is False
    )
    assert (
        check_test_unspent(
            argparse.Namespace(**{**vars(args), "allow_repeat": True}), "ab_sac_icm", SPEC, configurations
        )
        is True
    )


def test_final_cannot_skip_the_record_or_read_another_ledger(tmp_path, monkeypatch):
    """``--final --no-ledger`` is refused; ``--ledger DIR`` does not hide a spend recorded in the
    project's ledger (or the committed one); other ``--seeds`` are evaluated and counted."""
    import ab_common

    from trading_rl.evaluation.ledger.ledger import Period, trials_for

    rows, _ = _rows()
    for row in rows:
        row.update(test_return_moments=row["return_moments"], model_sha256=f"weights-{row['variant']}-{row['seed']}")
    configurations = {"SAC": {"icm": False}, "SAC+ICM": {"icm": True}}
    project = tmp_path / "project_ledger"
    monkeypatch.setattr(ab_common, "LEDGER", str(project))
    monkeypatch.setattr(ab_common, "COMMITTED_LEDGER", str(tmp_path / "committed"))
    args = argparse.Namespace(ledger=str(project), no_ledger=False, seeds=[0, 1, 2], allow_repeat=False)
    with pytest.raises(SystemExit, match="--final with --no-ledger is refused"):
        check_test_unspent(argparse.Namespace(**{**vars(args), "no_ledger": True}), "ab_sac_icm", SPEC, configurations)
    record_trials(rows, args, "ab_sac_icm", SPEC, configurations, split="test")
    spent = read_ledger(project)
    assert [json.loads(c)["artifact"]["model_sha256"] for c in spent["config"]] == [
        [f"weights-{variant}-{seed}" for seed in (0, 1, 2)] for variant in ("SAC", "SAC+ICM")
    ]
    elsewhere = argparse.Namespace(**{**vars(args), "ledger": str(tmp_path / "elsewhere")})
    with pytest.raises(SystemExit, match="already spent"):
        check_test_unspent(elsewhere, "ab_sac_icm", SPEC, configurations)
    # The committed ledger alone (a fresh clone: no project ledger) refuses as well.
    project.rename(tmp_path / "committed")
    with pytest.raises(SystemExit, match="already spent"):
        check_test_unspent(args, "ab_sac_icm", SPEC, configurations)
    # Other seeds: evaluated, and each look is a trial of the test period's DSR.
    other_seeds = argparse.Namespace(**{**vars(args), "seeds": [3, 4]})
    assert check_test_unspent(other_seeds, "ab_sac_icm", SPEC, configurations) is False
    record_trials([{**row, "seed": row["seed"] + 3} for row in rows], args, "ab_sac_icm", SPEC, configurations, "test")
    looks = pd.concat([read_ledger(tmp_path / "committed"), read_ledger(project)], ignore_index=True)
    period = Period.of(looks.iloc[0]["period_start"], looks.iloc[0]["period_end"])
    assert trials_for(looks, "sp500", period).n == 4
