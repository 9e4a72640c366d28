"""The trial ledger: append-only storage, row schema, trial counting and DSR from the ledger."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from kedro.io import DatasetError
from scipy.stats import kurtosis, norm, skew

from trading_rl.evaluation.ledger import ledger
from trading_rl.evaluation.metrics.metrics import return_moments
from trading_rl.integration.datasets import TrialLedgerDataset


def _row(
    symbol="X",
    source="walk_forward",
    split="walk_forward",
    agent="sac_icm",
    returns=None,
    attribution=None,
    **configuration,
):
    returns = np.random.default_rng(len(configuration)).normal(0.001, 0.01, 50) if returns is None else returns
    return ledger.trial_row(
        source=source,
        symbol=symbol,
        split=split,
        period_start="2020-01-01",
        period_end="2020-03-01",
        agent=agent,
        configuration={"agent": agent, **configuration},
        moments=return_moments(returns),
        n_runs=3,
        periods_per_year=252.0,
        run={"save_version": "v1", "git_commit": "abc"},
        attribution=attribution,
    )


def _files(folder):
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_each_save_adds_a_file_and_never_touches_the_earlier_ones(tmp_path):
    dataset = TrialLedgerDataset(str(tmp_path / "ledger"))
    assert not dataset.exists()
    empty = dataset.load()
    assert empty.empty and list(empty.columns) == list(ledger.ALL_COLUMNS)

    dataset.save(pd.DataFrame([_row(lr=1), _row(lr=2)]))
    first = _files(tmp_path / "ledger")
    first_stat = {name: (tmp_path / "ledger" / name).stat().st_mtime_ns for name in first}
    dataset.save(pd.DataFrame([_row(lr=3)]))

    after = _files(tmp_path / "ledger")
    assert len(after) == 2 and all(after[name] == content for name, content in first.items())
    assert all((tmp_path / "ledger" / name).stat().st_mtime_ns == mtime for name, mtime in first_stat.items())
    loaded = dataset.load()
    assert len(loaded) == 3 and list(loaded.columns) == list(ledger.ALL_COLUMNS)
    assert [json.loads(config)["lr"] for config in loaded["config"]] == [1, 2, 3]  # in save order
    dataset.save(pd.DataFrame(columns=list(ledger.LEDGER_COLUMNS)))  # nothing to append: no file
    assert len(_files(tmp_path / "ledger")) == 2


def test_a_save_with_a_colliding_name_fails_instead_of_overwriting(tmp_path, monkeypatch):
    folder = tmp_path / "ledger"
    existing = ledger.append_rows(folder, [_row(lr=1)])
    before = _files(folder)
    monkeypatch.setattr(ledger, "new_file_name", lambda: existing.name)
    with pytest.raises(FileExistsError, match="never overwritten"):
        ledger.append_rows(folder, [_row(lr=2)])
    assert _files(folder) == before  # same file, same bytes, no staging file left behind


def test_a_row_missing_a_column_fails_naming_it(tmp_path):
    row = _row()
    del row["config_hash"]
    with pytest.raises(DatasetError, match="config_hash"):
        TrialLedgerDataset(str(tmp_path / "ledger")).save(pd.DataFrame([row]))
    with pytest.raises(ValueError, match="'split' has \\['train'\\]"):
        ledger.append_rows(tmp_path / "ledger", [_row(split="train")])
    assert not (tmp_path / "ledger").exists() or not list((tmp_path / "ledger").iterdir())


def test_the_read_only_view_refuses_to_save(tmp_path):
    with pytest.raises(DatasetError, match="read-only"):
        TrialLedgerDataset(str(tmp_path / "ledger"), read_only=True).save(pd.DataFrame([_row()]))


PERIOD = ledger.Period.of("2020-01-01", "2020-03-01")


def test_trials_count_configurations_pool_rerolls_and_count_every_test_look():
    rows = pd.DataFrame(
        [
            _row(lr=1),
            _row(lr=1),  # the same identity evaluated twice: one trial, no second copy of its returns
            _row(lr=2, source="ab_sac_icm", split="validation"),
            _row(lr=3, returns=np.zeros(50)),  # never traded: undefined Sharpe counts as 0
            _row(lr=4, source="final_evaluation", split="test"),
            _row(symbol="Y", lr=5),
        ]
    )
    trials = ledger.trials_for(rows, "X", PERIOD)
    assert trials.n == 4 and trials.by_source == {"final_evaluation": 1, "walk_forward": 2, "ab_sac_icm": 1}
    assert 0.0 in trials.sharpes and trials.period == PERIOD

    # A re-roll (the same configuration on other random streams) is pooled into its trial, not
    # dropped and not counted twice; its Sharpe is that of both rolls' returns.
    rng = np.random.default_rng(3)
    first, second = rng.normal(0.002, 0.01, 50), rng.normal(-0.001, 0.01, 50)
    rolls = pd.DataFrame(
        [_row(lr=1, returns=first, streams={"seed": 0}), _row(lr=1, returns=second, streams={"seed": 1})]
    )
    assert rolls["config_hash"].nunique() == 2
    [pooled] = ledger.trials_for(rolls, "X", PERIOD).sharpes
    both = np.concatenate([first, second])
    assert pooled == pytest.approx(both.mean() / both.std(ddof=1))

    # Every test-split evaluation is a trial of the test period, repeats included.
    looks = pd.DataFrame([_row(lr=4, source="final_evaluation", split="test") for _ in range(3)])
    assert ledger.trials_for(looks, "X", PERIOD).n == 3


def test_a_dsr_never_mixes_periods():
    """Trials evaluated on other bars (tuning windows ending 2012, the validation split) are not in
    the DSR of a walk-forward period: ``trials_for`` keeps the period's rows only."""
    rows = pd.DataFrame([_row(lr=i) for i in range(3)])
    other = rows.assign(period_start="2012-01-01", period_end="2012-12-31", config_hash=[f"h{i}" for i in range(3)])
    trials = ledger.trials_for(pd.concat([rows, other], ignore_index=True), "X", PERIOD)
    assert trials.n == 3 and trials.describe()["period"] == {"start": "2020-01-01", "end": "2020-03-01"}
    assert trials.describe()["variance"] == pytest.approx(np.var(trials.sharpes, ddof=1))
    assert ledger.trials_for(other, "X", PERIOD).n == 0


def _dsr_by_paper(returns: np.ndarray, trial_sharpes: np.ndarray) -> float:
    """Bailey & López de Prado (2014), eqs. for E[max SR] and DSR, transcribed term by term."""
    n = len(trial_sharpes)
    variance = sum((s - sum(trial_sharpes) / n) ** 2 for s in trial_sharpes) / (n - 1)
    gamma = 0.5772156649015329
    sr0 = math.sqrt(variance) * ((1 - gamma) * norm.ppf(1 - 1 / n) + gamma * norm.ppf(1 - 1 / (n * math.e)))
    t = len(returns)
    mean = sum(returns) / t
    sr = mean / math.sqrt(sum((r - mean) ** 2 for r in returns) / (t - 1))
    g3, g4 = skew(returns), kurtosis(returns, fisher=False)
    return norm.cdf((sr - sr0) * math.sqrt(t - 1) / math.sqrt(1 - g3 * sr + (g4 - 1) / 4 * sr**2))


def test_dsr_from_the_ledger_matches_the_paper_and_falls_with_more_spread_trials():
    rng = np.random.default_rng(9)
    returns = rng.normal(0.0015, 0.01, 750)
    small = pd.DataFrame([_row(lr=i, returns=rng.normal(0.0005, 0.01, 200)) for i in range(3)])
    trials = ledger.trials_for(small, "X", PERIOD)
    dsr_small = ledger.deflated_sharpe(return_moments(returns), trials)
    assert dsr_small == pytest.approx(_dsr_by_paper(returns, np.array(trials.sharpes)), rel=1e-9)

    more = pd.concat(
        [small, pd.DataFrame([_row(lr=10 + i, returns=rng.normal(0.003 * (i % 3 - 1), 0.01, 200)) for i in range(30)])],
        ignore_index=True,
    )
    dsr_more = ledger.deflated_sharpe(return_moments(returns), ledger.trials_for(more, "X", PERIOD))
    assert dsr_more < dsr_small
    assert math.isnan(ledger.deflated_sharpe(return_moments(returns), ledger.trials_for(small.iloc[:1], "X", PERIOD)))


def _agent_params(**renamed):
    """sac_icm agent parameters under today's names, or (``old_names=True``) as rows recorded before
    ``reward.scale`` became ``reward_scale`` and ``collapse.hold_threshold`` left the agent."""
    if renamed.get("old_names"):
        return {
            "reward": {"scale": 100.0},
            "collapse": {"dominance_max": 0.6, "hold_threshold": 0.1},
            "sac": {"tau": 0.005},
        }
    return {"reward_scale": 100.0, "collapse": {"dominance_max": 0.6}, "sac": {"tau": 0.005}}


def test_rows_recorded_under_renamed_keys_keep_their_identity(tmp_path):
    from trading_rl.evaluation.ledger.final import SpentTestSplitError, check_test_split

    def row(configuration, source="walk_forward", split="walk_forward"):
        return ledger.trial_row(
            source=source,
            symbol="X",
            split=split,
            period_start="2020-01-01",
            period_end="2020-03-01",
            agent="sac_icm",
            configuration=configuration,
            moments=return_moments(np.full(50, 0.001) + np.arange(50) * 1e-5),
            n_runs=1,
            periods_per_year=252.0,
            run={"save_version": "v1", "git_commit": "abc"},
        )

    recorded = {"agent": "sac_icm", "symbol": "X", "agent_params": _agent_params(old_names=True)}
    today = {"agent": "sac_icm", "symbol": "X", "agent_params": _agent_params()}
    dataset = TrialLedgerDataset(filepath=str(tmp_path / "ledger"))
    old, unrelated = row(recorded), _row(lr=7)
    dataset.save(pd.DataFrame([old, row(recorded, "final_evaluation", "test"), unrelated]))
    read = dataset.load()

    assert read["config_hash"].iloc[0] == ledger.identity_hash(ledger.identified(today)) != old["config_hash"]
    assert read["config_hash"].iloc[2] == unrelated["config_hash"]  # rows without old names keep their hash
    # The same configuration recorded again under today's names is the same trial, not a new one
    # (two configurations, plus the test-split look, a trial of its own) ...
    both = pd.concat([read, pd.DataFrame([row(today)])], ignore_index=True)
    assert ledger.trials_for(both, "X", PERIOD).n == 3
    # ... and its test split, spent under the old names, stays spent.
    with pytest.raises(SpentTestSplitError, match="already spent"):
        check_test_split(read, ledger.identified(today), allow_repeat=False)
    assert _files(tmp_path / "ledger")  # nothing rewritten on read


def test_attribution_columns_are_additive_and_old_files_read_as_nan(tmp_path):
    folder = tmp_path / "ledger"
    folder.mkdir()
    # a file written before the attribution columns existed
    pd.DataFrame([_row(lr=1)])[list(ledger.LEDGER_COLUMNS)].to_parquet(folder / "20200101T000000Z-0.parquet")
    attributed = _row(
        lr=2,
        attribution={"alpha_annual": 0.03, "alpha_ci90_low": -0.01, "beta": 0.2, "alpha_t": None, "sharpe": 9.0},
    )
    ledger.append_rows(folder, [attributed])
    rows = ledger.read_ledger(folder)
    assert list(rows.columns) == list(ledger.ALL_COLUMNS)
    assert rows[list(ledger.ATTRIBUTION_COLUMNS)].iloc[0].isna().all()
    assert rows.iloc[1]["alpha_annual"] == 0.03 and rows.iloc[1]["beta"] == 0.2
    assert np.isnan(rows.iloc[1]["alpha_t"]) and np.isnan(rows.iloc[1]["mean_exposure"])
    assert rows.iloc[1]["sharpe"] != 9.0  # only the attribution columns are taken from the mapping
    with pytest.raises(ValueError, match=r"unknown column\(s\) \['alpha'\]"):
        ledger.validate_rows(pd.DataFrame([{**attributed, "alpha": 1.0}]))


def test_an_empty_ledger_has_no_trials_and_no_spends():
    from trading_rl.evaluation.ledger.final import earlier_spends

    assert ledger.trials_for(ledger.empty_ledger(), "X", PERIOD).n == 0
    assert earlier_spends(ledger.empty_ledger(), {"agent": "sac_icm"}).empty
    other_symbol = pd.DataFrame([_row(symbol="Y")])
    assert ledger.trials_for(other_symbol, "X", PERIOD).n == 0


def test_a_file_written_before_config_env_existed_reads_it_as_missing(tmp_path):
    row = _row()
    row.pop("config_env")
    pd.DataFrame([row]).to_parquet(tmp_path / "20250101T000000000000Z-old.parquet", index=False)
    ledger.append_rows(tmp_path, [ledger.trial_row(**_row_arguments(), run={"config_env": "ci"})])
    assert ledger.read_ledger(tmp_path)["config_env"].tolist() == [None, "ci"]


def test_a_row_states_how_its_evaluation_ended_and_older_files_read_it_as_missing(tmp_path):
    old = _row()
    old.pop("state")
    pd.DataFrame([old]).to_parquet(tmp_path / "20250101T000000000000Z-old.parquet", index=False)
    ledger.append_rows(tmp_path, [_row(lr=1), ledger.trial_row(**_row_arguments(), state="pruned")])
    assert ledger.read_ledger(tmp_path)["state"].tolist() == [None, "complete", "pruned"]
    with pytest.raises(
        ValueError, match=r"column 'state' has \['stopped'\]; allowed: \['complete', 'pruned', 'fail'\]"
    ):
        ledger.append_rows(tmp_path, [ledger.trial_row(**_row_arguments(), state="stopped")])


def _row_arguments():
    return {
        "source": "walk_forward",
        "symbol": "X",
        "split": "walk_forward",
        "period_start": "2020-01-01",
        "period_end": "2020-03-01",
        "agent": "sac_icm",
        "configuration": {"agent": "sac_icm"},
        "moments": return_moments(np.random.default_rng(0).normal(0.001, 0.01, 50)),
        "n_runs": 1,
        "periods_per_year": 252.0,
    }
