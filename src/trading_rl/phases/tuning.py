"""Hyper-parameter tuning of the walk-forward's SAC+ICM agent, with every trial on the ledger.

Optuna samples agent parameters from ``tuning.search_space``; each sample (a trial) is scored by a
walk-forward whose windows end at the training split's last bar, so the choice sees neither the
validation split (what the default run's walk-forward and gates report on) nor the test split
(spent once by ``final_evaluation``). The score is the median out-of-sample Sharpe over the
trial's windows × seeds × symbols. Trials are asked ``tuning.trials_per_population`` at a time and
their walk-forwards run as one execution (on the population engine, their agents are members of
the same populations).

With ``tuning.pruning`` on, each trial first trains its first ``rung_seeds`` seeds; Optuna's
median rule stops (prunes) the trials whose objective there is below the median of the completed
trials', and only the others train their remaining seeds.

Tuning is selection, and selection inflates the best Sharpe: every trial, a failed or pruned one
included, becomes a row of the trial ledger (``evaluation.ledger.ledger``), so the Deflated Sharpe of the
chosen configuration, and of anything evaluated after it, counts all of them.

The chosen values are written as a parameters mapping (``sac_icm.agent`` and
``walk_forward.agent_overrides``) that a run takes with ``--params`` (:func:`params_argument`) or
as a parameters file in a config env.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
import optuna
import pandas as pd

from trading_rl.config import ConfigError, Section, setting
from trading_rl.evaluation.ledger.ledger import Period, deflated_sharpe, trial_row, trials_for
from trading_rl.evaluation.metrics.metrics import MOMENT_KEYS, json_ready, psr_from_moments, return_moments
from trading_rl.phases.walk_forward import (
    WalkForwardJob,
    WalkForwardParams,
    WalkForwardResult,
    agent_section,
    merge_seed_runs,
    run_walk_forward_variants,
    trial_configuration,
    trial_rows,
)
from trading_rl.runtime.engine import Executor
from trading_rl.training.params import AgentParams

logger = logging.getLogger(__name__)

PARAMS_PREFIX = "tuning"
AGENT = "sac_icm"  # the agent tuned; its sections are those of sac_icm.agent
DATA_END = "train"  # every trial's windows end at the training split's last bar
TUNING_LEDGER_SOURCE = "tuning"  # the ledger rows' source
OBJECTIVE = "median out-of-sample Sharpe over windows x seeds x symbols (a window without a Sharpe counts 0)"
# Set by the tuning pipeline itself, refused in tuning.walk_forward.
FIXED_PROTOCOL = {
    "data_end": "the trials' windows always end at the training split's last bar",
    "agents": f"tuning tunes the {AGENT} agent",
}


@dataclass(frozen=True, kw_only=True)
class SearchDimension(Section):
    """One tuned parameter: a ``float`` or ``int`` range ``[low, high]`` (``log``: sampled on a log
    scale), or ``categorical`` ``choices`` (numbers, strings, booleans: what Optuna stores)."""

    kind: Literal["float", "int", "categorical"]
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: list[Any] | None = None

    def validate(self, prefix: str) -> None:
        if self.kind == "categorical":
            if not self.choices:
                raise ConfigError(f"parameter '{prefix}.choices' must be a non-empty list for kind 'categorical'")
            given = [key for key in ("low", "high") if getattr(self, key) is not None] + (["log"] if self.log else [])
            if given:
                raise ConfigError(f"parameter '{prefix}' is categorical: it takes 'choices', not {given}")
            scalars = (bool, int, float, str)
            if not all(choice is None or isinstance(choice, scalars) for choice in self.choices):
                raise ConfigError(
                    f"parameter '{prefix}.choices' must hold numbers, strings or booleans, got {self.choices!r}"
                )
            return
        if self.choices is not None:
            raise ConfigError(f"parameter '{prefix}' is a {self.kind} range: it takes 'low' and 'high', not 'choices'")
        for key in ("low", "high"):
            value = getattr(self, key)
            if value is None:
                raise ConfigError(f"parameter '{prefix}.{key}' is missing (kind '{self.kind}')")
            if self.kind == "int" and value != int(value):
                raise ConfigError(f"parameter '{prefix}.{key}' must be an integer for kind 'int', got {value!r}")
        low, high = self.bounds()
        if low >= high:
            raise ConfigError(f"parameter '{prefix}.low' ({low}) must be < '{prefix}.high' ({high})")
        if self.log and low <= 0:
            raise ConfigError(f"parameter '{prefix}.low' must be > 0 when 'log' is true, got {low}")

    def bounds(self) -> tuple[float, float]:
        """``(low, high)`` of a range (``validate`` checked both are given)."""
        return float(self.low or 0.0), float(self.high or 0.0)

    def extremes(self) -> list[Any]:
        """The values that bound what may be sampled: both ends, or every choice."""
        if self.kind == "categorical":
            return list(self.choices or [])
        low, high = self.bounds()
        return [int(low), int(high)] if self.kind == "int" else [low, high]


@dataclass(frozen=True, kw_only=True)
class PruningParams(Section):
    """``tuning.pruning``: the median stopping rule, with seeds as the fidelity. A trial first
    trains seeds ``0..rung_seeds-1``; Optuna's ``MedianPruner`` prunes it when its objective there
    is below the median of the completed trials' at the same rung (never before
    ``n_startup_trials`` trials have completed), else it trains its other seeds. Seeds are the
    fidelity because they are independent replicates of the whole walk-forward; its windows are not
    (each fine-tunes the previous one's agent), so a prefix of windows is not a cheaper estimate of
    the same objective."""

    enabled: bool = False
    rung_seeds: int = setting(1, interval="[1, inf)")
    n_startup_trials: int = setting(4, interval="[0, inf)")

    def pruner(self) -> optuna.pruners.BasePruner:
        if not self.enabled:
            return optuna.pruners.NopPruner()
        return optuna.pruners.MedianPruner(n_startup_trials=self.n_startup_trials)


def _non_empty(space: dict) -> str | None:
    tuned = [name for name, dimension in space.items() if dimension is not None]
    return None if tuned else "a mapping of dotted sac_icm.agent keys to search dimensions, at least one not null"


@dataclass(frozen=True, kw_only=True)
class TuningParams(Section):
    """The ``tuning`` section (conf/base states the same defaults; tests/test_config.py checks it).

    ``walk_forward``: keys of the walk_forward section that the trials run with instead (budgets,
    windows, seeds, symbols); each replaces walk_forward's value whole. ``search_space``: dotted
    keys of ``sac_icm.agent`` (applied over ``walk_forward.agent_overrides``) to their dimension;
    ``null`` leaves a key untuned (config envs merge the search space key by key, so this is how
    an env drops a dimension of conf/base). ``trials_per_population``: trials asked of Optuna at a
    time and evaluated as one walk-forward execution (on the population engine their agents train
    as members of the same populations; elsewhere they are more tasks at once). ``pruning``:
    :class:`PruningParams`.
    """

    n_trials: int = setting(20, interval="[1, inf)")
    trials_per_population: int = setting(4, interval="[1, inf)")
    sampler: Literal["tpe", "random"] = "tpe"
    sampler_seed: int | None = None  # null: the run's seed
    walk_forward: dict[str, Any] = setting({})
    search_space: dict[str, SearchDimension | None] = setting(
        {
            "sac.learning_rate": SearchDimension(kind="float", low=1.0e-4, high=1.0e-3, log=True),
            "sac.batch_size": SearchDimension(kind="categorical", choices=[32, 64, 128]),
            "reward_scale": SearchDimension(kind="float", low=10.0, high=1000.0, log=True),
            "icm.intrinsic_weight": SearchDimension(kind="float", low=0.0, high=0.3),
        },
        check=_non_empty,
    )
    # The Optuna study's storage: a SQLite file (one study per run, named after its save version)
    # that `optuna-dashboard sqlite:///<file>` opens; null keeps the study in memory.
    storage: str | None = "data/07_model_output/optuna/tuning.db"
    pruning: PruningParams = setting(PruningParams())

    def dimensions(self) -> dict[str, SearchDimension]:
        """The tuned keys (those not ``null``)."""
        return {name: dimension for name, dimension in self.search_space.items() if dimension is not None}

    def validate(self, prefix: str) -> None:
        for key, reason in FIXED_PROTOCOL.items():
            if key in self.walk_forward:
                raise ConfigError(f"parameter '{prefix}.walk_forward.{key}' is not accepted: {reason}")
        WalkForwardParams.from_mapping(self.walk_forward, f"{prefix}.walk_forward")
        for name, dimension in self.dimensions().items():
            for value in dimension.extremes():
                AgentParams.from_mapping(nested({name: value}), f"{prefix}.search_space")


def check_search_space(tuning: TuningParams, protocol: WalkForwardParams, agent: AgentParams) -> None:
    """``agent`` (``sac_icm.agent``) is valid under the trials' ``protocol`` (``trial_protocol``) at
    each dimension's extreme values (``batch_size <= buffer_size`` ...)."""
    agent_params = {AGENT: agent}
    for name, dimension in tuning.dimensions().items():
        for value in dimension.extremes():
            overrides = merge_sections(protocol.agent_overrides, nested({name: value}))
            try:
                agent_section(AGENT, agent_params, overrides)
            except ConfigError as error:
                raise ConfigError(
                    f"parameter '{PARAMS_PREFIX}.search_space.{name}': the trials' agent refuses {value!r} ({error})"
                ) from error


def check_pruning(tuning: TuningParams, protocol: WalkForwardParams) -> None:
    """Pruning, when on, has seeds to save: the trials' ``protocol`` (``trial_protocol``) runs more
    seeds than a rung."""
    pruning = tuning.pruning
    if pruning.enabled and protocol.seeds <= pruning.rung_seeds:
        raise ConfigError(
            f"parameter '{PARAMS_PREFIX}.pruning.rung_seeds' ({pruning.rung_seeds}) must be below the trials' "
            f"seeds ({protocol.seeds}, walk_forward.seeds under {PARAMS_PREFIX}.walk_forward): a trial is pruned "
            f"after its first rung_seeds seeds, so with no seed left there is nothing to save; give the trials "
            f"more seeds or set {PARAMS_PREFIX}.pruning.enabled: false"
        )


def nested(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{"sac.learning_rate": 1e-4}`` -> ``{"sac": {"learning_rate": 1e-4}}``."""
    result: dict[str, Any] = {}
    for key, value in values.items():
        *sections, leaf = key.split(".")
        target = result
        for section in sections:
            target = target.setdefault(section, {})
        target[leaf] = value
    return result


def merge_sections(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``overrides`` (``walk_forward.agent_overrides`` style: sections of ``sac_icm.agent``) over
    ``base``, section by section."""
    merged = {key: dict(value) if isinstance(value, Mapping) else value for key, value in base.items()}
    for key, value in overrides.items():
        merged[key] = {**merged.get(key, {}), **value} if isinstance(value, Mapping) else value
    return merged


def trial_protocol(walk_forward: WalkForwardParams, tuning: TuningParams) -> WalkForwardParams:
    """The walk_forward parameters every trial runs with: ``tuning.walk_forward`` over the
    walk_forward section (each key replacing its value whole), the tuned agent alone, windows
    ending at the training split's end."""
    return walk_forward.replaced(
        {**tuning.walk_forward, "agents": [AGENT], "data_end": DATA_END}, f"{PARAMS_PREFIX}.walk_forward"
    )


def study_storage(path: str | None) -> str | None:
    """``sqlite:///<path>`` with the file's folder made; ``None`` (in memory) for no path."""
    if path is None:
        return None
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def make_sampler(name: str, seed: int, batched: bool = False) -> optuna.samplers.BaseSampler:
    """``batched``: trials are asked before the earlier ones of their batch are told, so TPE treats
    those running trials as bad (constant liar) instead of sampling next to them again."""
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, constant_liar=batched)
    return optuna.samplers.RandomSampler(seed=seed)


def suggest(trial: optuna.Trial, search_space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One value per dimension, by its dotted key."""
    values: dict[str, Any] = {}
    for name, dimension in search_space.items():
        if dimension["kind"] == "categorical":
            values[name] = trial.suggest_categorical(name, dimension["choices"])
        elif dimension["kind"] == "int":
            values[name] = trial.suggest_int(name, int(dimension["low"]), int(dimension["high"]), log=dimension["log"])
        else:
            values[name] = trial.suggest_float(name, dimension["low"], dimension["high"], log=dimension["log"])
    return values


def objective_value(folds: pd.DataFrame) -> float:
    """Median Sharpe of the agent's test windows (every symbol × fold × seed). A window without a
    Sharpe (the agent never traded) counts 0, as in the ledger, so idling does not win by omission."""
    sharpe = folds.loc[folds["kind"] == "agent", "sharpe"].astype(float)
    return float(sharpe.replace([np.inf, -np.inf], np.nan).fillna(0.0).median())


def tuned_parameters(values: Mapping[str, Any]) -> dict[str, Any]:
    """The chosen values as a parameters mapping: for ``sac_icm`` and for the walk-forward (whose
    ``agent_overrides`` would otherwise shadow a tuned key such as ``sac.batch_size``)."""
    # Two copies: one shared dict would be written as a YAML anchor and alias.
    return {"sac_icm": {"agent": nested(values)}, "walk_forward": {"agent_overrides": nested(values)}}


def _dotted_items(mapping: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items = []
    for key, value in mapping.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        items += _dotted_items(value, name) if isinstance(value, Mapping) else [(name, value)]
    return items


def params_argument(parameters: Mapping[str, Any]) -> str:
    """``parameters`` as the value of ``kedro run --params`` (dotted keys, YAML scalars)."""
    return ",".join(f"{key}={json.dumps(value)}" for key, value in _dotted_items(parameters))


class PendingTrial(NamedTuple):
    """A trial asked of Optuna: the trial, its sampled values and the walk-forward parameters
    they make."""

    trial: optuna.Trial
    values: dict[str, Any]
    walk_forward_params: WalkForwardParams


class TrialOutcome(NamedTuple):
    """One trial as run: its number, sampled values, walk-forward parameters, either the
    walk-forward's result (a pruned trial's: its rung's seeds) or the error it raised, and the
    execution it ran in: ``population`` (the index of the batch it was asked in),
    ``population_size`` (the trials evaluated together with it, itself included: the batch's size,
    or 1 when rerun alone; with pruning, in its first rung) and the wall time of its executions."""

    number: int
    values: dict[str, Any]
    walk_forward_params: WalkForwardParams
    result: WalkForwardResult | None
    error: Exception | None
    duration_s: float
    population: int
    population_size: int
    pruned: bool = False

    @property
    def state(self) -> str:
        """``complete``, ``pruned`` or ``fail``: the trials table's and the ledger row's state."""
        if self.result is None:
            return "fail"
        return "pruned" if self.pruned else "complete"


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
    sampler_seed = job.seed if section.sampler_seed is None else section.sampler_seed
    batched = section.trials_per_population > 1
    study = optuna.create_study(
        direction="maximize",
        sampler=make_sampler(section.sampler, sampler_seed, batched),
        storage=study_storage(section.storage),
        pruner=pruning.pruner(),
        study_name=f"tuning {(run or {}).get('save_version') or 'outside kedro'}",
    )

    def evaluate(pending: list[PendingTrial], population: int, seed_indices: range | None = None) -> list[TrialOutcome]:
        """The trials' walk-forwards (on ``seed_indices``, default every seed) as one execution; a
        trial whose walk-forward raises (a diverged agent, a combination of values the agent
        refuses) is a failed outcome, not an error."""
        started = time.perf_counter()
        try:
            results: list[WalkForwardResult | None] = list(
                run_walk_forward_variants(
                    prices, [entry.walk_forward_params for entry in pending], job, executor, seed_indices
                )
            )
            error = None
        except Exception as raised:  # a failed trial is a result: recorded, not fatal
            if len(pending) > 1:
                logger.warning(
                    "tuning: population %d (trials %s) raised %s: %s; rerunning each of its trials alone",
                    population,
                    [entry.trial.number for entry in pending],
                    type(raised).__name__,
                    raised,
                )
                return [outcome for entry in pending for outcome in evaluate([entry], population, seed_indices)]
            logger.warning("tuning trial %d failed: %s: %s", pending[0].trial.number, type(raised).__name__, raised)
            results, error = [None], raised
        duration = time.perf_counter() - started
        return [
            TrialOutcome(
                entry.trial.number,
                entry.values,
                entry.walk_forward_params,
                result,
                error,
                duration,
                population,
                len(pending),
            )
            for entry, result in zip(pending, results)
        ]

    def evaluate_pruning(pending: list[PendingTrial], population: int) -> list[TrialOutcome]:
        """The trials' first ``rung_seeds`` seeds, each trial's objective there reported to Optuna;
        then the other seeds of those its pruner keeps, joined into one run of every seed."""

        def pruned_at_rung(trial: optuna.Trial, result: WalkForwardResult) -> bool:
            trial.report(objective_value(result.folds), step=pruning.rung_seeds)
            return trial.should_prune()

        first = evaluate(pending, population, range(pruning.rung_seeds))
        outcomes: dict[int, TrialOutcome] = {}
        kept: list[tuple[PendingTrial, TrialOutcome, WalkForwardResult]] = []
        for entry, outcome in zip(pending, first):
            if outcome.result is None:
                outcomes[entry.trial.number] = outcome
            elif pruned_at_rung(entry.trial, outcome.result):
                outcomes[entry.trial.number] = outcome._replace(pruned=True)
            else:
                kept.append((entry, outcome, outcome.result))
        rest = range(pruning.rung_seeds, protocol.seeds)
        rest_outcomes = evaluate([entry for entry, _, _ in kept], population, rest) if kept else []
        for (entry, head, head_result), tail in zip(kept, rest_outcomes):
            outcomes[entry.trial.number] = tail._replace(
                result=None if tail.result is None else merge_seed_runs([head_result, tail.result]),
                duration_s=head.duration_s + tail.duration_s,
                population_size=head.population_size,
            )
        return [outcomes[entry.trial.number] for entry in pending]

    outcomes: list[TrialOutcome] = []
    for population, asked in enumerate(range(0, section.n_trials, section.trials_per_population)):
        pending = []
        for _ in range(min(section.trials_per_population, section.n_trials - asked)):
            trial = study.ask()
            values = suggest(trial, search_space)
            overrides = merge_sections(config.agent_overrides, nested(values))
            pending.append(PendingTrial(trial, values, dataclasses.replace(protocol, agent_overrides=overrides)))
        evaluated = evaluate_pruning(pending, population) if pruning.enabled else evaluate(pending, population)
        for entry, outcome in zip(pending, evaluated):
            if outcome.result is None:
                study.tell(entry.trial, state=optuna.trial.TrialState.FAIL)
            elif outcome.pruned:
                study.tell(entry.trial, state=optuna.trial.TrialState.PRUNED)
                logger.info(
                    "tuning trial %d pruned: objective %.4f on its first %d seed(s) with %s",
                    outcome.number,
                    objective_value(outcome.result.folds),
                    pruning.rung_seeds,
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
    best = study.best_trial
    trials = pd.concat(trial_tables, ignore_index=True)
    trials["chosen"] = trials["trial"] == best.number
    leading = [
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
    trials = trials[leading + [column for column in trials if column not in leading]]
    logger.info(
        "tuning: trial %d of %d chosen (objective %.4f); %d failed, %d pruned",
        best.number,
        len(outcomes),
        best.value,
        len(outcomes) - len(scored),
        sum(outcome.pruned for outcome in outcomes),
    )
    return TuningResult(trials, pd.concat(ledger_parts, ignore_index=True), tuned_parameters(best.params))


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


def tuning_report(
    trials: pd.DataFrame, ledger: pd.DataFrame, parameters: Mapping[str, Any], run: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The study (trial counts, table), the chosen configuration with its ``--params`` string, and
    per symbol its PSR and Deflated Sharpe on the trials' out-of-sample windows. DSR counts every
    configuration in ``ledger`` for the symbol (``ledger.trials_for``: this study's trials and
    every earlier one, of any source); ``n_trials`` says how many."""
    per_trial = trials.drop_duplicates("trial")
    chosen = trials[trials["chosen"]]
    selection = {}
    for row in chosen.itertuples(index=False):
        # A pruned row of the same configuration (a duplicate sample) holds only its rung's seeds.
        rows = ledger[
            (ledger["config_hash"] == row.config_hash) & (ledger["split"] != "test") & (ledger["state"] != "pruned")
        ]
        if rows.empty:
            raise ValueError(
                f"dataset 'trial_ledger' has no row for the chosen configuration {row.config_hash} "
                f"of {row.symbol}: the tuning rows were not appended"
            )
        moments = rows.iloc[-1][list(MOMENT_KEYS)].to_dict()
        period = Period.of(rows.iloc[-1]["period_start"], rows.iloc[-1]["period_end"])
        trials_counted = trials_for(ledger, row.symbol, period)
        selection[row.symbol] = {
            "config_hash": row.config_hash,
            **json_ready(
                {
                    "sharpe_median": row.symbol_sharpe_median,
                    "sharpe_annualised": rows.iloc[-1]["sharpe_annualised"],
                    "psr": psr_from_moments(moments),
                    "dsr": deflated_sharpe(moments, trials_counted),
                    "n_trials": trials_counted.n,
                    "trials_variance": trials_counted.variance,
                }
            ),
            "trials_period": {"start": period.start, "end": period.end},
            "trials_by_source": trials_counted.by_source,
        }
    best = chosen.iloc[0]
    table = per_trial.drop(columns=["symbol", "symbol_sharpe_median", "config_hash"])
    return {
        "objective": OBJECTIVE,
        "data_end": DATA_END,
        "out_of_sample": {
            row.symbol: {"start": row.period_start, "end": row.period_end}
            for row in ledger[ledger["config_hash"].isin(chosen["config_hash"])].itertuples()
        },
        "n_study_trials": int(len(per_trial)),
        "n_failed": int((per_trial["state"] == "fail").sum()),
        "n_pruned": int((per_trial["state"] == "pruned").sum()),
        "chosen": {
            "trial": int(best["trial"]),
            "objective": float(best["objective"]),
            "parameters": dict(parameters),
            "params_argument": params_argument(parameters),
        },
        "selection": selection,
        "trials": json.loads(table.to_json(orient="records")),  # NaN as null
        "run": dict(run or {}),
    }
