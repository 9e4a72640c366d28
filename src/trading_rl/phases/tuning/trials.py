"""One Optuna trial after another: the study's storage and sampler, a trial's sampled values and
objective, and a population of trials evaluated as one walk-forward execution (with pruning, seed
rung first)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import optuna
import pandas as pd

from trading_rl.phases.walk_forward import (
    WalkForwardJob,
    WalkForwardParams,
    WalkForwardResult,
    merge_seed_runs,
    run_walk_forward_variants,
)
from trading_rl.runtime.engine import Executor

logger = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class TrialEvaluator:
    """Runs a population of trials: their walk-forwards on ``prices`` with ``job`` on ``executor``;
    with pruning, first their ``rung_seeds`` seeds, then the rest of ``seeds``."""

    prices: Mapping[str, pd.DataFrame]
    job: WalkForwardJob
    executor: Executor | None
    rung_seeds: int
    seeds: int

    def evaluate(
        self, pending: list[PendingTrial], population: int, seed_indices: range | None = None
    ) -> list[TrialOutcome]:
        """The trials' walk-forwards (on ``seed_indices``, default every seed) as one execution; a
        trial whose walk-forward raises (a diverged agent, a combination of values the agent
        refuses) is a failed outcome, not an error."""
        started = time.perf_counter()
        try:
            results: list[WalkForwardResult | None] = list(
                run_walk_forward_variants(
                    self.prices, [entry.walk_forward_params for entry in pending], self.job, self.executor, seed_indices
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
                return [outcome for entry in pending for outcome in self.evaluate([entry], population, seed_indices)]
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

    def evaluate_pruning(self, pending: list[PendingTrial], population: int) -> list[TrialOutcome]:
        """The trials' first ``rung_seeds`` seeds, each trial's objective there reported to Optuna;
        then the other seeds of those its pruner keeps, joined into one run of every seed."""

        def pruned_at_rung(trial: optuna.Trial, result: WalkForwardResult) -> bool:
            trial.report(objective_value(result.folds), step=self.rung_seeds)
            return trial.should_prune()

        first = self.evaluate(pending, population, range(self.rung_seeds))
        outcomes: dict[int, TrialOutcome] = {}
        kept: list[tuple[PendingTrial, TrialOutcome, WalkForwardResult]] = []
        for entry, outcome in zip(pending, first):
            if outcome.result is None:
                outcomes[entry.trial.number] = outcome
            elif pruned_at_rung(entry.trial, outcome.result):
                outcomes[entry.trial.number] = outcome._replace(pruned=True)
            else:
                kept.append((entry, outcome, outcome.result))
        rest = range(self.rung_seeds, self.seeds)
        rest_outcomes = self.evaluate([entry for entry, _, _ in kept], population, rest) if kept else []
        for (entry, head, head_result), tail in zip(kept, rest_outcomes):
            outcomes[entry.trial.number] = tail._replace(
                result=None if tail.result is None else merge_seed_runs([head_result, tail.result]),
                duration_s=head.duration_s + tail.duration_s,
                population_size=head.population_size,
            )
        return [outcomes[entry.trial.number] for entry in pending]
