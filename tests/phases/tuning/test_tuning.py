"""Tuning: the objective, one ledger row per trial (failed and pruned ones too), the DSR's trial
count, pruning, the training-split cut-off, the parameter checks and the ``--params`` string."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from helpers.synthetic_prices import random_walk_prices
from helpers.walk_forward_calls import job, section

from trading_rl.config import ConfigError
from trading_rl.evaluation.ledger.ledger import Period, trial_row, trials_for
from trading_rl.evaluation.metrics.metrics import expected_max_sharpe, psr_from_moments, return_moments
from trading_rl.integration.parameter_sections import resolve_parameters
from trading_rl.phases import tuning
from trading_rl.phases import walk_forward as wf
from trading_rl.phases.walk_forward import PolicyAgent
from trading_rl.runtime import SequentialExecutor

TRAIN_END = "2012-06-29"
FEATURES = {
    "features": {"garch": None},
    "scaler": {"method": "robust", "clip": 5.0},
    "splits": {"train_end": TRAIN_END, "validation_end": "2013-01-31"},
}
# The ``sac_icm`` section around a default agent (its phase keys have no code default).
SAC_ICM_SECTION = {
    "device": "cpu",
    "progress_bar": False,
    "evaluation_split": "validation",
    "resume_dir": "r",
    "agent": {},
}
WALK_FORWARD = {
    "train_length": 200,
    "test_length": 60,
    "step": 60,
    "max_folds": 2,
    "retrain_frequency": 2,
    "seeds": 1,
    "timesteps": 5,
    "finetune_timesteps": 0,
    "device": "cpu",
    "agent_overrides": {},
}
SPACE = {
    "sac.learning_rate": {"kind": "float", "low": 1.0e-4, "high": 1.0e-3, "log": True},
    "sac.batch_size": {"kind": "categorical", "choices": [16, 32]},
}


def prices(n_bars: int = 900, seed: int = 5) -> pd.DataFrame:
    return random_walk_prices(n_bars, seed, start="2010-01-04")


class ConstantModel:
    def __init__(self, action: float) -> None:
        self.action = action

    def predict(self, observation, deterministic=True):
        return np.array([self.action], dtype=np.float32), None


@pytest.fixture
def trainer(monkeypatch):
    """A stand-in for SAC+ICM holding a fixed position, ``position(learning_rate)`` (by default long,
    growing with the rate, so trials differ by their parameters), which refuses batch size
    ``batch`` (a failing trial: on every seed, or on training seed ``seed`` only) and records each
    training call's ``(learning_rate, seed)`` in ``trained``."""
    stand_in = {"batch": None, "seed": None, "position": lambda rate: 0.2 + rate * 500.0, "trained": []}

    def train(spec, params, seed, timesteps, model=None, device="auto"):
        if params.sac.batch_size == stand_in["batch"] and stand_in["seed"] in (None, seed):
            raise FloatingPointError("the critic loss diverged")
        stand_in["trained"].append((params.sac.learning_rate, seed))
        return PolicyAgent(ConstantModel(stand_in["position"](params.sac.learning_rate)))  # default: long 0.25 to 0.7

    monkeypatch.setitem(wf.AGENT_TRAINERS, "sac_icm", train)
    return stand_in


def run(
    data,
    n_trials=4,
    sampler="random",
    seed=3,
    per_population=4,
    walk_forward=None,
    executor=None,
    storage=None,
    search_space=SPACE,
    pruning=None,
):
    params = {
        "n_trials": n_trials,
        "trials_per_population": per_population,
        "sampler": sampler,
        "search_space": search_space,
        "storage": storage,  # in memory unless a test names a file
        "pruning": pruning or {},
    }
    return tuning.run_tuning(
        {"X": data},
        tuning.TuningParams.from_mapping(params, "tuning"),
        section(walk_forward or WALK_FORWARD),
        job(FEATURES, {"window_size": 5}, {"X": 252.0}, {"sac_icm": {"sac": {"buffer_size": 1000}}}, seed),
        executor,
        run={"save_version": "v1"},
    )


BATCH_COLUMNS = ["population", "population_size", "duration_s"]


def assert_same_trials(first, second):
    """The same trials and ledger rows, whatever executions they ran in."""
    pd.testing.assert_frame_equal(first.trials.drop(columns=BATCH_COLUMNS), second.trials.drop(columns=BATCH_COLUMNS))
    pd.testing.assert_frame_equal(
        first.ledger_rows.drop(columns="timestamp"), second.ledger_rows.drop(columns="timestamp")
    )
    assert first.parameters == second.parameters


def test_each_trial_is_one_ledger_row_and_the_best_objective_is_chosen(trainer):
    result = run(prices())
    rows, trials = result.ledger_rows, result.trials
    assert len(rows) == 4 and set(rows["source"]) == {"tuning"} and set(rows["split"]) == {"walk_forward"}
    assert rows["config_hash"].nunique() == 4 and list(rows["config_hash"]) == list(trials["config_hash"])
    assert (rows["n_runs"] == 2).all() and set(rows["save_version"]) == {"v1"}  # 2 folds x 1 seed
    assert list(trials["state"]) == ["complete"] * 4
    chosen = trials[trials["chosen"]].iloc[0]
    assert chosen["objective"] == trials["objective"].max()
    assert result.parameters == {
        "sac_icm": {
            "agent": {
                "sac": {
                    "learning_rate": chosen["param.sac.learning_rate"],
                    "batch_size": chosen["param.sac.batch_size"],
                }
            }
        },
        "walk_forward": {
            "agent_overrides": {
                "sac": {
                    "learning_rate": chosen["param.sac.learning_rate"],
                    "batch_size": chosen["param.sac.batch_size"],
                }
            }
        },
    }
    # A trial's ledger row is its configuration: the sampled values in the agent's effective parameters.
    assert (
        f'"learning_rate": {float(chosen["param.sac.learning_rate"])!r}' in rows.loc[trials["chosen"], "config"].item()
    )


def test_the_study_is_stored_on_disk_for_optuna_dashboard(trainer, tmp_path):
    import optuna

    result = run(prices(), n_trials=3, storage=str(tmp_path / "optuna" / "tuning.db"))
    study = optuna.load_study(study_name="tuning v1", storage=f"sqlite:///{tmp_path / 'optuna' / 'tuning.db'}")
    assert len(study.trials) == 3 and study.best_value == pytest.approx(result.trials["objective"].max())


def test_the_objective_is_the_median_window_sharpe_with_idle_windows_at_zero():
    folds = pd.DataFrame({"kind": ["agent"] * 4 + ["baseline"], "sharpe": [1.0, np.nan, -0.5, 2.0, 9.0]})
    assert tuning.objective_value(folds) == 0.5  # median of 1, 0, -0.5, 2; the baseline is not counted


def test_a_failed_trial_is_a_row_with_the_hash_its_success_would_have(trainer):
    clean = run(prices(), n_trials=3)
    trainer["batch"] = 16
    failing = run(prices(), n_trials=3)
    failed = failing.trials["state"] == "fail"
    assert failed.any() and not failed.all()
    rows = failing.ledger_rows[failed.to_numpy()]
    assert (rows["n_runs"] == 0).all() and rows["sharpe"].isna().all() and (rows["state"] == "fail").all()
    assert (rows["period_start"] == clean.ledger_rows["period_start"].iloc[0]).all()
    assert list(failing.ledger_rows["config_hash"]) == list(clean.ledger_rows["config_hash"])
    assert failing.trials.loc[failed, "error"].str.contains("FloatingPointError: the critic loss diverged").all()
    # the failed trials are never chosen
    assert not failing.trials.loc[failed, "chosen"].any()


class CountingExecutor(SequentialExecutor):
    """The sequential executor, recording how many retrain-group tasks each ``map`` call got."""

    def __init__(self) -> None:
        self.group_calls: list[int] = []

    def map(self, fn, kwargs_list, on_result=None, *, others_may_compute=False):
        if fn is wf.run_retrain_group:
            self.group_calls.append(len(kwargs_list))
        return super().map(fn, kwargs_list, on_result, others_may_compute=others_may_compute)


def test_trials_asked_together_run_as_one_execution_and_score_as_alone(trainer):
    executor = CountingExecutor()
    batched = run(prices(), n_trials=4, per_population=3, executor=executor)
    alone = run(prices(), n_trials=4, per_population=1)
    assert executor.group_calls == [3, 1]  # one retrain group (2 folds, 1 seed) per trial: a batch of 3, then 1
    assert list(batched.trials["population"]) == [0, 0, 0, 1] and list(batched.trials["population_size"]) == [
        3,
        3,
        3,
        1,
    ]
    assert list(alone.trials["population"]) == [0, 1, 2, 3] and set(alone.trials["population_size"]) == {1}
    assert_same_trials(batched, alone)


def test_a_failing_trial_of_a_batch_fails_alone_and_the_others_keep_their_scores(trainer, caplog):
    clean = run(prices(), n_trials=3, per_population=3, seed=4)
    trainer["batch"] = 16
    with caplog.at_level("WARNING", logger="trading_rl.phases.tuning"):
        failing = run(prices(), n_trials=3, per_population=3, seed=4)
    trials = failing.trials
    assert list(trials["state"]) == ["complete", "fail", "complete"]  # the sampler's seed 4 gives 16 once
    assert list(trials["param.sac.batch_size"]) == [32, 16, 32]
    assert "population 0 (trials [0, 1, 2]) raised FloatingPointError" in caplog.text
    assert "rerunning each of its trials alone" in caplog.text
    assert set(trials["population"]) == {0} and set(trials["population_size"]) == {1}  # each ran alone
    completed = (trials["state"] == "complete").to_numpy()
    pd.testing.assert_series_equal(trials.loc[completed, "objective"], clean.trials.loc[completed, "objective"])
    assert list(failing.ledger_rows["config_hash"]) == list(clean.ledger_rows["config_hash"])
    assert (
        failing.ledger_rows.loc[~completed, "sharpe"].isna().all()
        and (failing.ledger_rows["n_runs"] == [2, 0, 2]).all()
    )


@pytest.mark.slow
def test_sac_trials_of_a_batch_equal_the_same_trials_run_alone():
    """On the sequential engine, with the real agent (ci-style budgets): batching changes no number."""
    walk_forward = {
        **WALK_FORWARD,
        "max_folds": 1,
        "timesteps": 100,
        "agent_overrides": {"sac": {"learning_starts": 20}, "policy": {"net_arch": [8]}, "icm": {"warmup_steps": 20}},
    }
    batched = run(prices(), n_trials=2, per_population=2, walk_forward=walk_forward)
    alone = run(prices(), n_trials=2, per_population=1, walk_forward=walk_forward)
    assert list(batched.trials["population_size"]) == [2, 2]
    assert batched.trials["param.sac.batch_size"].nunique() == 2  # different batch sizes share one execution
    assert_same_trials(batched, alone)


# Pruning: two seeds per trial, pruned after the first once 2 trials have completed. Batches of 2
# from sampler seed 0: trials 2 and 5 sample the idle learning rate (the position of 1e-4 is short,
# which the env does not take: objective 0), the others the long one (objective > 0).
TWO_SEEDS = {**WALK_FORWARD, "seeds": 2, "max_folds": 1}
PRUNING = {"enabled": True, "rung_seeds": 1, "n_startup_trials": 2}
IDLE_OR_LONG = {
    "sac.learning_rate": {"kind": "categorical", "choices": [1.0e-4, 9.0e-4]},
    "sac.batch_size": {"kind": "categorical", "choices": [16, 32]},
}


def run_two_seeds(trainer, pruning=None, executor=None):
    trainer["position"] = lambda rate: rate * 2000.0 - 1.0  # 1e-4: -0.8 (idle), 9e-4: 0.8
    return run(
        prices(),
        n_trials=6,
        seed=0,
        per_population=2,
        walk_forward=TWO_SEEDS,
        executor=executor,
        search_space=IDLE_OR_LONG,
        pruning=pruning,
    )


def test_a_trial_below_the_median_after_its_first_seed_is_pruned_and_trains_no_other_seed(trainer):
    executor = CountingExecutor()
    trials = run_two_seeds(trainer, PRUNING, executor).trials
    assert list(trials["state"]) == ["complete", "complete", "pruned", "complete", "complete", "pruned"]
    # trial 2 is below the median of trials 0 and 1, trial 5 below that of trials 0, 1, 3 and 4
    assert trials.loc[2, "objective"] < trials.loc[[0, 1], "objective"].median()
    assert trials.loc[5, "objective"] < trials.loc[[0, 1, 3, 4], "objective"].median()
    # per batch, one chain (1 fold) per trial on seed 0, then one per trial kept on seed 1
    assert executor.group_calls == [2, 2, 2, 1, 2, 1]
    trained = {rate: {seed for r, seed in trainer["trained"] if r == rate} for rate in (1.0e-4, 9.0e-4)}
    assert trained == {1.0e-4: {wf.agent_seed(0, 0)}, 9.0e-4: {wf.agent_seed(0, 0), wf.agent_seed(0, 1)}}


def test_trials_that_survive_pruning_score_as_without_it(trainer):
    pruned = run_two_seeds(trainer, PRUNING)
    unpruned = run_two_seeds(trainer)
    assert set(unpruned.trials["state"]) == {"complete"}
    kept = (pruned.trials["state"] == "complete").to_numpy()
    pd.testing.assert_frame_equal(
        pruned.trials[kept].drop(columns=BATCH_COLUMNS), unpruned.trials[kept].drop(columns=BATCH_COLUMNS)
    )
    pd.testing.assert_frame_equal(
        pruned.ledger_rows[kept].drop(columns="timestamp"), unpruned.ledger_rows[kept].drop(columns="timestamp")
    )
    assert pruned.parameters == unpruned.parameters


def test_pruned_trials_are_ledger_rows_that_the_dsr_counts(trainer):
    result = run_two_seeds(trainer, PRUNING)
    unpruned = run_two_seeds(trainer)
    rows, full = result.ledger_rows, unpruned.ledger_rows
    pruned = (result.trials["state"] == "pruned").to_numpy()
    assert list(rows["state"]) == list(result.trials["state"])
    # the configuration a full run of the trial is (two seeds), with the windows of its one seed
    assert list(rows["config_hash"]) == list(full["config_hash"])
    assert (rows.loc[pruned, "n_runs"] == 1).all() and (full["n_runs"] == 2).all()  # 1 fold x 1 seed, x 2 seeds
    assert (rows.loc[pruned, "n_obs"] * 2 == full.loc[pruned, "n_obs"]).all()
    start, end = rows.iloc[0][["period_start", "period_end"]]
    assert (rows["period_start"] == start).all() and (rows["period_end"] == end).all()
    # 4 configurations (trials 1, 3 and 4 sampled the same values); without the pruned 2, 2
    period = Period.of(start, end)
    assert trials_for(rows, "X", period).n == 4 and trials_for(rows[~pruned], "X", period).n == 2
    report = tuning.tuning_report(result.trials, rows, result.parameters)
    assert report["n_study_trials"] == 6 and report["n_pruned"] == 2 and report["n_failed"] == 0
    assert report["selection"]["X"]["n_trials"] == 4 and report["selection"]["X"]["trials_by_source"] == {"tuning": 4}
    # The chosen configuration's numbers are those of its full run, not of a later pruned sample of it.
    chosen = rows[result.trials["chosen"].to_numpy()].iloc[0]
    resampled = rows[pruned].iloc[[0]].assign(config_hash=chosen["config_hash"], sharpe_annualised=-9.0)
    report = tuning.tuning_report(result.trials, pd.concat([rows, resampled]), result.parameters)
    assert report["selection"]["X"]["sharpe_annualised"] == chosen["sharpe_annualised"]


@pytest.mark.slow
def test_sac_trials_kept_by_pruning_equal_the_same_trials_unpruned():
    """On the sequential engine, with the real agent (ci-style budgets): a kept trial's two rungs are
    its one run of both seeds, number for number."""
    walk_forward = {
        **WALK_FORWARD,
        "max_folds": 1,
        "seeds": 2,
        "timesteps": 100,
        "agent_overrides": {"sac": {"learning_starts": 20}, "policy": {"net_arch": [8]}, "icm": {"warmup_steps": 20}},
    }
    pruned = run(prices(), per_population=2, walk_forward=walk_forward, pruning={**PRUNING, "n_startup_trials": 1})
    unpruned = run(prices(), per_population=2, walk_forward=walk_forward)
    states = list(pruned.trials["state"])
    assert states[0] == "complete" and "pruned" in states  # the startup trial is never pruned
    kept = (pruned.trials["state"] == "complete").to_numpy()
    pd.testing.assert_frame_equal(
        pruned.trials[kept].drop(columns=BATCH_COLUMNS), unpruned.trials[kept].drop(columns=BATCH_COLUMNS)
    )
    pd.testing.assert_frame_equal(
        pruned.ledger_rows[kept].drop(columns="timestamp"), unpruned.ledger_rows[kept].drop(columns="timestamp")
    )


@pytest.mark.parametrize("rung", [1, 2])
def test_a_trial_failing_in_either_rung_fails_alone(trainer, rung, caplog):
    clean = run_two_seeds(trainer, PRUNING)
    trainer["batch"] = 16  # trials 0 and 2; on seed 1 only, they fail after being kept
    trainer["seed"] = None if rung == 1 else wf.agent_seed(0, 1)
    with caplog.at_level("WARNING", logger="trading_rl.phases.tuning"):
        failing = run_two_seeds(trainer, PRUNING)
    # Trial 2 is not pruned: pruning waits for 2 completed trials, and failed ones do not count.
    assert list(failing.trials["state"]) == ["fail", "complete", "fail", "complete", "complete", "pruned"]
    assert "population 0 (trials [0, 1]) raised FloatingPointError" in caplog.text
    rows, completed = failing.ledger_rows, (failing.trials["state"] == "complete").to_numpy()
    assert list(rows["n_runs"]) == [0, 2, 0, 2, 2, 1] and rows.loc[~completed, "sharpe"].isna().all()
    pd.testing.assert_frame_equal(
        rows[completed].drop(columns="timestamp"), clean.ledger_rows[completed].drop(columns="timestamp")
    )


def test_pruning_needs_trials_with_more_seeds_than_its_rung(trainer):
    message = r"'tuning\.pruning\.rung_seeds' \(1\) must be below the trials' seeds \(1, walk_forward\.seeds"
    with pytest.raises(ConfigError, match=message):
        run(prices(), pruning=PRUNING)  # WALK_FORWARD: one seed
    parameters = {
        "tuning": {"pruning": PRUNING, "walk_forward": {"seeds": 1}, "search_space": SPACE},
        "walk_forward": {"seeds": 2},
        "feature_extraction": {**FEATURES, "symbols": [{"name": "sp500", "source": "packaged"}]},
        "sac_icm": SAC_ICM_SECTION,
    }
    with pytest.raises(ConfigError, match=message):
        resolve_parameters(parameters, ["tuning"])
    parameters["tuning"]["walk_forward"] = {}
    resolve_parameters(parameters, ["tuning"])


def test_when_every_trial_fails_nothing_is_chosen(trainer):
    trainer["batch"] = 16
    with pytest.raises(RuntimeError, match="all 2 tuning trials failed; the first: FloatingPointError"):
        tuning.run_tuning(
            {"X": prices()},
            tuning.TuningParams.from_mapping(
                {
                    "n_trials": 2,
                    "storage": None,
                    "search_space": {"sac.batch_size": {"kind": "categorical", "choices": [16]}},
                },
                "tuning",
            ),
            section(WALK_FORWARD),
            job(FEATURES, {"window_size": 5}, {"X": 252.0}, {}, 0),
        )


def test_bars_after_the_training_split_are_never_read(trainer):
    clean = prices()
    hidden = clean.copy()
    after = hidden.index > pd.Timestamp(TRAIN_END)
    assert after.sum() > 200
    hidden.loc[after, ["open", "high", "low", "close"]] = np.nan
    first, second = run(clean, n_trials=2), run(hidden, n_trials=2)
    pd.testing.assert_frame_equal(first.trials.drop(columns="duration_s"), second.trials.drop(columns="duration_s"))
    pd.testing.assert_frame_equal(
        first.ledger_rows.drop(columns="timestamp"), second.ledger_rows.drop(columns="timestamp")
    )
    assert pd.to_datetime(first.ledger_rows["period_end"]).max() == clean.index[~after][-1]


def test_the_report_deflates_by_every_configuration_of_its_period_in_the_ledger(trainer):
    result = run(prices())
    start, end = result.ledger_rows.iloc[0][["period_start", "period_end"]]

    def earlier_row(k, period_start=start, period_end=end):
        return trial_row(
            source="walk_forward",
            symbol="X",
            split="walk_forward",
            period_start=period_start,
            period_end=period_end,
            agent="sac_icm",
            configuration={"k": k},
            moments=return_moments(np.random.default_rng(k).normal(0, 0.01, 50)),
            n_runs=1,
            periods_per_year=252.0,
        )

    # Three configurations on the study's windows; one on other bars, which its DSR leaves out.
    earlier = pd.DataFrame([earlier_row(k) for k in range(3)] + [earlier_row(9, "2000-01-03", "2000-12-29")])
    ledger = pd.concat([earlier, result.ledger_rows], ignore_index=True)
    report = tuning.tuning_report(result.trials, ledger, result.parameters)
    selection = report["selection"]["X"]
    assert selection["n_trials"] == 7 and selection["trials_by_source"] == {"walk_forward": 3, "tuning": 4}
    assert selection["trials_period"] == {"start": str(start)[:10], "end": str(end)[:10]}
    chosen = result.ledger_rows[result.trials["chosen"].to_numpy()].iloc[0]
    trials = trials_for(ledger, "X", Period.of(start, end))
    assert selection["trials_variance"] == pytest.approx(trials.variance)
    benchmark = expected_max_sharpe(trials.sharpes)
    assert selection["dsr"] == pytest.approx(psr_from_moments(chosen, sr_benchmark=benchmark))
    assert report["n_study_trials"] == 4 and report["n_failed"] == 0 and len(report["trials"]) == 4
    assert report["chosen"]["params_argument"] == tuning.params_argument(result.parameters)
    with pytest.raises(ValueError, match="dataset 'trial_ledger' has no row for the chosen configuration"):
        tuning.tuning_report(result.trials, earlier, result.parameters)


def test_the_params_argument_is_what_kedro_parses_back():
    from kedro.framework.cli.utils import _split_params

    parameters = tuning.tuned_parameters(
        {
            "sac.learning_rate": 1.0e-5,
            "sac.batch_size": 64,
            "sac.ent_coef": "auto",
            "icm.enabled": False,
            "reward_scale": 123.456,
        }
    )
    parsed = _split_params(None, None, tuning.params_argument(parameters))
    assert parsed == parameters and isinstance(parsed["sac_icm"]["agent"]["sac"]["learning_rate"], float)


@pytest.mark.parametrize(
    "params, message",
    [
        (
            {"search_space": {"sac.learning_rat": {"kind": "float", "low": 0.1, "high": 0.2}}},
            r"unknown parameter 'tuning\.search_space\.sac\.learning_rat' "
            r"\(did you mean 'tuning\.search_space\.sac\.learning_rate'\?\)",
        ),
        (
            {"search_space": {"sac.learning_rate": {"kind": "float", "low": 0.2, "high": 0.1}}},
            r"'tuning\.search_space\.sac\.learning_rate\.low' \(0\.2\) must be < "
            r"'tuning\.search_space\.sac\.learning_rate\.high'",
        ),
        (
            {"search_space": {"sac.learning_rate": {"kind": "float", "low": 0.0, "high": 0.1, "log": True}}},
            r"'tuning\.search_space\.sac\.learning_rate\.low' must be > 0 when 'log' is true",
        ),
        (
            {"search_space": {"sac.learning_rate": {"kind": "float", "low": -1.0, "high": 0.1}}},
            r"'tuning\.search_space\.sac\.learning_rate' must be in \(0, inf\), got -1\.0",
        ),
        (
            {"search_space": {"sac.batch_size": {"kind": "categorical", "low": 1, "choices": [32]}}},
            r"'tuning\.search_space\.sac\.batch_size' is categorical: it takes 'choices', not \['low'\]",
        ),
        (
            {"search_space": {"sac.batch_size": {"kind": "int", "low": 16.5, "high": 64}}},
            r"'tuning\.search_space\.sac\.batch_size\.low' must be an integer for kind 'int'",
        ),
        ({"search_space": {"sac.batch_size": None, "sac.learning_rate": None}}, r"at least one not null"),
        (
            {"walk_forward": {"data_end": "all"}},
            r"'tuning\.walk_forward\.data_end' is not accepted: .*training split's last bar",
        ),
        ({"walk_forward": {"seedz": 1}}, r"unknown parameter 'tuning\.walk_forward\.seedz'"),
        ({"trials_per_population": 0}, r"'tuning\.trials_per_population' must be in \[1, inf\), got 0"),
        ({"pruning": {"rung_seeds": 0}}, r"'tuning\.pruning\.rung_seeds' must be in \[1, inf\), got 0"),
        ({"pruning": {"pruner": "median"}}, r"unknown parameter 'tuning\.pruning\.pruner'"),
    ],
)
def test_bad_tuning_parameters_are_refused_by_key(params, message):
    with pytest.raises(ConfigError, match=message):
        tuning.TuningParams.from_mapping({"search_space": SPACE, **params}, "tuning")


def test_the_search_space_has_no_code_default():
    """conf/base/parameters_tuning.yml is its one place: config envs merge it key by key."""
    with pytest.raises(ConfigError, match=r"parameter 'tuning\.search_space' is missing"):
        tuning.TuningParams.from_mapping({}, "tuning")


def test_a_bound_the_agent_refuses_with_the_run_parameters_is_refused_before_the_run():
    parameters = {
        "tuning": {"search_space": {"sac.batch_size": {"kind": "categorical", "choices": [64, 4096]}}},
        "walk_forward": {"agent_overrides": {"sac": {"buffer_size": 2000}}},
        "feature_extraction": {**FEATURES, "symbols": [{"name": "sp500", "source": "packaged"}]},
        "sac_icm": SAC_ICM_SECTION,
    }
    with pytest.raises(
        ConfigError,
        match=r"'tuning\.search_space\.sac\.batch_size': the trials' agent refuses 4096 "
        r"\(parameter 'walk_forward\.agent_overrides\.sac\.batch_size' \(4096\) must be <=",
    ):
        resolve_parameters(parameters, ["tuning"])
    parameters["tuning"]["search_space"]["sac.batch_size"]["choices"] = [64, 2000]
    resolve_parameters(parameters, ["tuning"])


def test_null_drops_a_dimension_and_int_ranges_sample_integers():
    section = tuning.TuningParams.from_mapping(
        {"search_space": {"sac.batch_size": {"kind": "int", "low": 16, "high": 64}, "reward_scale": None}}, "tuning"
    )
    assert set(section.dimensions()) == {"sac.batch_size"}
    assert section.dimensions()["sac.batch_size"].extremes() == [16, 64]
