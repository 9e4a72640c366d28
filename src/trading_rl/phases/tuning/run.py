"""A tuning run: ``tuning.n_trials`` trials asked a population at a time, each told to Optuna, every
one of them a trials-table row per symbol and trial-ledger rows; and ``tune``, the run as its
pipeline wires it."""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
import pandas as pd

from trading_rl.config import Overlay
from trading_rl.data import by_symbol
from trading_rl.envs import EnvConstructionParams
from trading_rl.evaluation.ledger.ledger import trial_row
from trading_rl.evaluation.metrics.metrics import return_moments
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.phases.tuning.params import (
    AGENT,
    PARAMS_PREFIX,
    TUNING_LEDGER_SOURCE,
    TuningParams,
    check_pruning,
    merge_sections,
    nested,
    trial_protocol,
    tuned_parameters,
)
from trading_rl.phases.tuning.trials import (
    PendingTrial,
    TrialEvaluator,
    TrialOutcome,
    make_sampler,
    objective_value,
    study_storage,
    suggest,
)
from trading_rl.phases.walk_forward import WalkForwardJob, WalkForwardParams, trial_configuration, trial_rows
from trading_rl.phases.walk_forward.population import make_executor
from trading_rl.runtime import RuntimeParams
from trading_rl.runtime.engine import Executor
from trading_rl.training.params import AgentParams, SacIcmParams

logger = logging.getLogger(__name__)

# The trials table's first columns, in this order; the sampled values (``param.<key>``) follow.
LEADING_COLUMNS = [
    "trial",
    "state",
    "objective",
    "chosen",
    "symbol",
    "symbol_sharpe_median",
    "config_hash",
    "population",
    "population_size",
    "duration_s",
]


@dataclass
class TuningResult:
    """``trials``: one row per trial × symbol (state, objective, the symbol's config hash, the
    sampled values as ``param.<key>`` columns, ``chosen``). ``ledger_rows``: the same trials as
    trial-ledger rows. ``parameters``: the chosen configuration (:func:`tuned_parameters`)."""

    trials: pd.DataFrame
    ledger_rows: pd.DataFrame
    parameters: dict[str, Any]


def run_tuning(
    prices: Mapping[str, pd.DataFrame],
    section: TuningParams,
    walk_forward: WalkForwardParams,
    job: WalkForwardJob,
    executor: Executor | None = None,
    run: Mapping[str, Any] | None = None,
) -> TuningResult:
    """``tuning.n_trials`` Optuna trials, each a walk-forward of the job's ``sac_icm`` agent
    parameters with the trial's values over the walk-forward's ``agent_overrides``, on ``executor``.

    Trials are asked ``tuning.trials_per_population`` at a time and evaluated as variants of one
    walk-forward execution (``run_walk_forward_variants``); each is then told to Optuna. If that
    execution raises, each trial of the batch is rerun alone, so only a failing trial fails. With
    ``tuning.pruning`` on, a batch is two executions: every trial's first ``rung_seeds`` seeds, then
    the other seeds of the trials not pruned, whose two runs make the result one run of every seed
    gives (``merge_seed_runs``). A pruned trial's ledger rows hold the returns of the seeds it ran.

    Every trial uses the run's ``seed`` for its agents and baselines (the same random numbers for
    every configuration, so trials differ by their parameters only). A trial whose walk-forward
    raises (a diverged agent, a combination of values the agent refuses) is told to Optuna as
    failed and recorded on the ledger with no returns (Sharpe undefined, counted as 0) over the
    windows the other trials were scored on; when every trial fails, there is nothing to choose and
    the first error is raised.
    """
    search_space = {name: dimension.to_dict() for name, dimension in section.dimensions().items()}
    protocol = trial_protocol(walk_forward, section)
    check_pruning(section, protocol)
    pruning = section.pruning
    config = protocol.with_gap(job.feature_extraction.features)
    study = _create_study(section, job, run)
    evaluator = TrialEvaluator(prices, job, executor, pruning.rung_seeds, protocol.seeds)
    outcomes: list[TrialOutcome] = []
    for population, asked in enumerate(range(0, section.n_trials, section.trials_per_population)):
        count = min(section.trials_per_population, section.n_trials - asked)
        pending = _ask(study, count, search_space, config, protocol)
        if pruning.enabled:
            evaluated = evaluator.evaluate_pruning(pending, population)
        else:
            evaluated = evaluator.evaluate(pending, population)
        outcomes += _tell(study, pending, evaluated, pruning.rung_seeds)
    scored = _scored_trials(outcomes, job, run)
    trial_tables, ledger_parts = _trial_tables(outcomes, scored, job, run)
    best = study.best_trial
    trials = _with_chosen(pd.concat(trial_tables, ignore_index=True), best.number)
    logger.info(
        "tuning: trial %d of %d chosen (objective %.4f); %d failed, %d pruned",
        best.number,
        len(outcomes),
        best.value,
        len(outcomes) - len(scored),
        sum(outcome.pruned for outcome in outcomes),
    )
    return TuningResult(trials, pd.concat(ledger_parts, ignore_index=True), tuned_parameters(best.params))


def _create_study(section: TuningParams, job: WalkForwardJob, run: Mapping[str, Any] | None) -> optuna.Study:
    """The maximising study, named after the run's save version, with ``tuning``'s sampler (seeded
    with ``tuning.sampler_seed``, default the run's seed), storage and pruner."""
    sampler_seed = job.seed if section.sampler_seed is None else section.sampler_seed
    batched = section.trials_per_population > 1
    return optuna.create_study(
        direction="maximize",
        sampler=make_sampler(section.sampler, sampler_seed, batched),
        storage=study_storage(section.storage),
        pruner=section.pruning.pruner(),
        study_name=f"tuning {(run or {}).get('save_version') or 'outside kedro'}",
    )


def _ask(
    study: optuna.Study,
    count: int,
    search_space: Mapping[str, Mapping[str, Any]],
    config: WalkForwardParams,
    protocol: WalkForwardParams,
) -> list[PendingTrial]:
    """``count`` trials asked of the study, each with its sampled values over the protocol's
    ``agent_overrides``."""
    pending = []
    for _ in range(count):
        trial = study.ask()
        values = suggest(trial, search_space)
        merged = merge_sections(config.agent_overrides, nested(values))
        overrides = Overlay(AgentParams, merged, f"{PARAMS_PREFIX}.search_space")
        pending.append(PendingTrial(trial, values, dataclasses.replace(protocol, agent_overrides=overrides)))
    return pending


def _tell(
    study: optuna.Study, pending: list[PendingTrial], evaluated: list[TrialOutcome], rung_seeds: int
) -> list[TrialOutcome]:
    """Each evaluated trial told to Optuna (failed, pruned or its objective) and logged."""
    outcomes = []
    for entry, outcome in zip(pending, evaluated):
        if outcome.result is None:
            study.tell(entry.trial, state=optuna.trial.TrialState.FAIL)
        elif outcome.pruned:
            study.tell(entry.trial, state=optuna.trial.TrialState.PRUNED)
            logger.info(
                "tuning trial %d pruned: objective %.4f on its first %d seed(s) with %s",
                outcome.number,
                objective_value(outcome.result.folds),
                rung_seeds,
                outcome.values,
            )
        else:
            study.tell(entry.trial, objective_value(outcome.result.folds))
            logger.info(
                "tuning trial %d: objective %.4f with %s",
                outcome.number,
                objective_value(outcome.result.folds),
                outcome.values,
            )
        outcomes.append(outcome)
    return outcomes


def _scored_trials(
    outcomes: list[TrialOutcome], job: WalkForwardJob, run: Mapping[str, Any] | None
) -> dict[int, pd.DataFrame]:
    """The ledger rows of every trial that has returns, by trial number; ``RuntimeError`` with the
    first error when every trial failed."""
    scored = {
        outcome.number: trial_rows(
            outcome.result.returns,
            outcome.walk_forward_params,
            job,
            run,
            source=TUNING_LEDGER_SOURCE,
            state=outcome.state,
        )
        for outcome in outcomes
        if outcome.result is not None
    }
    if not scored:
        first = outcomes[0].error
        raise RuntimeError(f"all {len(outcomes)} tuning trials failed; the first: {first!r}") from first
    return scored


def _trial_tables(
    outcomes: list[TrialOutcome],
    scored: Mapping[int, pd.DataFrame],
    job: WalkForwardJob,
    run: Mapping[str, Any] | None,
) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    """Per trial: its trials-table rows (one per symbol) and its ledger rows; a failed trial's over
    the windows the others were scored on."""
    # Every trial has the same windows: a failed trial's are those the completed ones were scored on.
    periods = {row.symbol: (row.period_start, row.period_end) for row in next(iter(scored.values())).itertuples()}
    trial_tables, ledger_parts = [], []
    for outcome in outcomes:
        if outcome.result is None:
            rows = failed_trial_rows(outcome.walk_forward_params, job, periods, run)
            state = {
                "state": outcome.state,
                "objective": math.nan,
                "error": f"{type(outcome.error).__name__}: {outcome.error}",
            }
            symbol_sharpe = {}
        else:
            rows = scored[outcome.number]
            state = {"state": outcome.state, "objective": objective_value(outcome.result.folds), "error": None}
            symbol_sharpe = {symbol: objective_value(folds) for symbol, folds in outcome.result.folds.groupby("symbol")}
        ledger_parts.append(rows)
        trial_tables.append(
            rows[["symbol", "config_hash"]].assign(
                trial=outcome.number,
                **state,
                symbol_sharpe_median=rows["symbol"].map(symbol_sharpe),
                duration_s=round(outcome.duration_s, 3),
                population=outcome.population,
                population_size=outcome.population_size,
                **{f"param.{name}": value for name, value in outcome.values.items()},
            )
        )
    return trial_tables, ledger_parts


def _with_chosen(trials: pd.DataFrame, best: int) -> pd.DataFrame:
    """The trials table with ``chosen`` (trial ``best``) and its leading columns first."""
    trials["chosen"] = trials["trial"] == best
    return trials[LEADING_COLUMNS + [column for column in trials if column not in LEADING_COLUMNS]]


def failed_trial_rows(
    trial_params: WalkForwardParams,
    job: WalkForwardJob,
    periods: Mapping[str, tuple[str, str]],
    run: Mapping[str, Any] | None,
) -> pd.DataFrame:
    """Ledger rows of a trial that produced no returns (state ``fail``): the configuration hash a
    successful run of it would have (``walk_forward.trial_configuration``), no moments (its Sharpe
    is undefined), no runs, over ``periods`` (per symbol: the windows it was to be scored on)."""
    config = trial_params.with_gap(job.feature_extraction.features)
    return pd.DataFrame(
        [
            trial_row(
                source=TUNING_LEDGER_SOURCE,
                symbol=symbol,
                split="walk_forward",
                period_start=start,
                period_end=end,
                agent=AGENT,
                configuration=trial_configuration(AGENT, config, job, symbol),
                moments=return_moments([]),
                n_runs=0,
                periods_per_year=job.periods_per_year[symbol],
                run=run,
                state="fail",
            )
            for symbol, (start, end) in periods.items()
        ]
    )


def tune(
    prices: pd.DataFrame,
    params: TuningParams,
    walk_forward: WalkForwardParams,
    feature_extraction: FeatureExtractionParams,
    env_construction: EnvConstructionParams,
    sac_icm: SacIcmParams,
    seed: int,
    runtime: RuntimeParams,
    run_metadata: dict[str, Any],
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The trials table, their trial-ledger rows (appended to the ledger) and the chosen
    parameters; each batch of ``tuning.trials_per_population`` trials runs as one walk-forward
    execution on the ``runtime.engine`` executor."""
    frames = by_symbol(prices)
    result = run_tuning(
        frames,
        params,
        walk_forward,
        WalkForwardJob.of(frames, feature_extraction, env_construction, sac_icm, seed),
        make_executor(runtime),
        run_metadata,
    )
    return result.trials, result.ledger_rows, result.parameters
