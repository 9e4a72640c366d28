"""One walk-forward execution: fold preparation, the chains on the executor, and each window scored
into a row of the fold table with its test steps."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.envs import EnvSpec
from trading_rl.evaluation.metrics.attribution import (
    attribution_metrics,
    env_cost_rate,
    return_attribution,
    rollout_exposure,
)
from trading_rl.evaluation.metrics.baselines import MARKET, market_returns, run_baselines
from trading_rl.evaluation.metrics.metrics import compute_metrics, json_ready, return_metrics
from trading_rl.evaluation.validation.folds import (
    Fold,
    development_prices,
    fold_env_spec,
    make_folds,
    retrain_groups,
    tradable_index,
)
from trading_rl.features.indicators import FeatureParams
from trading_rl.monitoring.collapse import CollapseThresholds, trading_verdict
from trading_rl.phases.walk_forward.chains import RetrainTask, TrainedChain, run_retrain_group
from trading_rl.phases.walk_forward.ledger import agent_seed
from trading_rl.phases.walk_forward.params import PARAMS_PREFIX, WalkForwardJob, WalkForwardParams
from trading_rl.phases.walk_forward.trainers import AGENT_TRAINERS, agent_section
from trading_rl.runtime.engine import Executor, SequentialExecutor
from trading_rl.seeding import SeedRole, trial_seed

logger = logging.getLogger(__name__)


@dataclass
class WalkForwardResult:
    """``folds``: one row per symbol × fold × (agent, seed) or baseline, window bounds + metrics.
    ``returns``: every test step of every row of ``folds`` (timestamp, return, raw action, traded
    value, exposure and the market line's return on the step; the market line's raw action and
    traded value are NaN, its exposure 1). ``chains``: each trained agent's
    training record and final model (``walk_forward.chains``)."""

    folds: pd.DataFrame
    returns: pd.DataFrame
    chains: list[TrainedChain] = field(default_factory=list)


def _test_rows(rollout: pd.DataFrame, labels: dict[str, Any], exposure: np.ndarray, market: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            **labels,
            "timestamp": pd.to_datetime(rollout["timestamp"]).to_numpy(),
            "return": rollout["return"].to_numpy(dtype=np.float64),
            # for the return attribution of stitched series and regimes (evaluation.metrics.attribution)
            "exposure": exposure,
            "market": market,
            "action_raw": rollout["action_raw"].to_numpy(dtype=np.float64),
            "trade_value": rollout["trade_value"].to_numpy(dtype=np.float64),
            # for the tearsheet's position-and-trades panel
            "position": rollout["position"].to_numpy(dtype=np.float64),
            "fill_price": rollout["fill_price"].to_numpy(dtype=np.float64),
        }
    )


def _market_rows(spec: EnvSpec, seed: int, rollout: pd.DataFrame) -> pd.DataFrame:
    """The market line (fully invested, no cap, no costs) on the same steps as ``rollout``."""
    returns = market_returns(spec.make_env("test", evaluation=True), seed)
    return rollout.assign(
        **{"return": returns, "action_raw": np.nan, "trade_value": np.nan, "position": np.nan, "fill_price": np.nan}
    )


def prepare_fold(
    symbol: str, prices: pd.DataFrame, fold: Fold, job: WalkForwardJob
) -> tuple[EnvSpec, dict[str, pd.DataFrame]]:
    """A task: the fold's env spec and the baselines' test rollouts (``MARKET`` included)."""
    spec = fold_env_spec(symbol, prices, fold, job.feature_extraction, job.env, job.periods_per_year[symbol])
    fold_seed = trial_seed(job.seed, SeedRole.WALK_FORWARD_FOLD, fold.index)
    rollouts = run_baselines(partial(spec.make_env, "test", evaluation=True), seed=fold_seed)
    rollouts[MARKET] = _market_rows(spec, fold_seed, rollouts["cash"])
    return spec, rollouts


@dataclass(frozen=True)
class ChainKey:
    """Where a retrain task's chain belongs: its variant, symbol, agent, seed index and folds."""

    variant: int
    symbol: str
    agent: str
    seed_index: int
    group: list[Fold]


def _chain_progress(keys: Sequence[ChainKey]) -> Callable[[int, Any], None]:
    """One INFO line per finished chain (the walk-forward's silent minutes were its chains)."""
    started, done = time.perf_counter(), [0]

    def log(index: int, result: Any) -> None:
        done[0] += 1
        key = keys[index]
        logger.info(
            "walk_forward: chain %d/%d done after %.0f s: %s %s seed %d, folds %d-%d",
            done[0],
            len(keys),
            time.perf_counter() - started,
            key.symbol,
            key.agent,
            key.seed_index,
            key.group[0].index,
            key.group[-1].index,
        )

    return log


def shared_protocol(variants: Sequence[WalkForwardParams], features: FeatureParams) -> list:
    """Each variant with its gap checked, checked to share everything but ``agent_overrides``
    (the windows, folds and baselines that one execution computes once for all of them)."""
    if not variants:
        raise ValueError("run_walk_forward_variants needs at least one walk_forward parameter variant")
    configs = [variant.with_gap(features) for variant in variants]
    first = configs[0].to_dict()
    for index, config in enumerate(configs[1:], start=1):
        values = config.to_dict()
        differing = sorted(key for key in values if key != "agent_overrides" and values[key] != first[key])
        if differing:
            raise ValueError(
                f"walk-forward variants may differ only in '{PARAMS_PREFIX}.agent_overrides'; "
                f"variant {index} differs from variant 0 in {[f'{PARAMS_PREFIX}.{key}' for key in differing]}"
            )
    return configs


def folds_of(prices: pd.DataFrame, config: WalkForwardParams, features: FeatureParams) -> list[Fold]:
    """The windows of one symbol's development ``prices`` under ``config`` (its gap checked,
    ``WalkForwardParams.with_gap``)."""
    assert config.gap_bars is not None, "the gap is checked first (WalkForwardParams.with_gap)"
    return make_folds(
        len(tradable_index(prices, features)),
        config.train_length,
        config.test_length,
        config.step,
        config.gap_bars,
        config.retrain_frequency,
        config.max_folds,
    )


@dataclass(frozen=True)
class _Scorer:
    """Scores a window's test rollout: its row of the fold table (window bounds, metrics and, but for
    the market line, the return attribution against it) and its test steps."""

    job: WalkForwardJob
    specs: Mapping[tuple[str, int], EnvSpec]
    market: Mapping[tuple[str, int], np.ndarray]

    def __call__(
        self, symbol: str, fold: Fold, labels: dict[str, Any], rollout: pd.DataFrame
    ) -> tuple[dict, pd.DataFrame]:
        spec = self.specs[(symbol, fold.index)]
        ppy = self.job.periods_per_year[symbol]
        market = self.market[(symbol, fold.index)]
        window = {
            "symbol": symbol,
            "fold": fold.index,
            "train_start": spec.splits["train"]["start"],
            "train_end": spec.splits["train"]["end"],
            "test_start": spec.splits["test"]["start"],
            "test_end": spec.splits["test"]["end"],
            "retrained": fold.retrain,
        }
        if labels["agent"] == MARKET:
            exposure = np.ones(len(rollout))
            metrics = json_ready(return_metrics(rollout["return"].to_numpy(), ppy))
        else:
            hold_threshold = self.job.env.hold_threshold
            exposure = rollout_exposure(rollout)
            verdict = trading_verdict(
                rollout["action_raw"], rollout["trade_value"], hold_threshold, CollapseThresholds()
            )
            attribution = return_attribution(
                rollout["return"].to_numpy(dtype=np.float64),
                exposure,
                market,
                periods_per_year=ppy,
                cost_rate=env_cost_rate(self.job.env),
            )
            metrics = {**compute_metrics(rollout, ppy, hold_threshold), **verdict, **attribution_metrics(attribution)}
        steps = _test_rows(rollout, {"symbol": symbol, "fold": fold.index, **labels}, exposure, market)
        return {**window, **labels, **metrics}, steps


def _checked_seed_indices(config: WalkForwardParams, seed_indices: Sequence[int] | None) -> list[int]:
    """``seed_indices`` (default: every seed), refused unless increasing indexes of ``config.seeds``."""
    seed_indices = list(range(config.seeds) if seed_indices is None else seed_indices)
    if not seed_indices or seed_indices != sorted(set(seed_indices) & set(range(config.seeds))):
        raise ValueError(
            f"seed_indices must be increasing indexes of '{PARAMS_PREFIX}.seeds' ({config.seeds}), got {seed_indices}"
        )
    return seed_indices


def _walked_symbols(prices: Mapping[str, pd.DataFrame], config: WalkForwardParams) -> list[str]:
    """``walk_forward.symbols`` (default: every symbol of ``prices``), refused when one has no prices."""
    symbols = config.symbols or list(prices)
    missing = [symbol for symbol in symbols if symbol not in prices]
    if missing:
        raise ValueError(f"parameter '{PARAMS_PREFIX}.symbols' lists {missing}, not among {sorted(prices)}")
    return symbols


@dataclass(frozen=True)
class _PreparedFolds:
    """Every symbol's folds, each fold's env spec (shared on the executor too) and baseline rollouts."""

    symbol_folds: dict[str, list[Fold]]
    fold_keys: list[tuple[str, Fold]]
    prepared: list[tuple[EnvSpec, dict[str, pd.DataFrame]]]
    specs: dict[tuple[str, int], EnvSpec]
    shared_specs: dict[tuple[str, int], Any]


def _prepare_folds(
    prices: Mapping[str, pd.DataFrame],
    symbols: list[str],
    config: WalkForwardParams,
    job: WalkForwardJob,
    executor: Executor,
) -> _PreparedFolds:
    """The first wave: each symbol's development prices cut into folds, one ``prepare_fold`` task per
    symbol × fold on ``executor``."""
    prices = {symbol: development_prices(prices[symbol], config.data_end, job.feature_extraction) for symbol in symbols}
    symbol_folds = {symbol: folds_of(prices[symbol], config, job.feature_extraction.features) for symbol in symbols}
    fold_keys = [(symbol, fold) for symbol in symbols for fold in symbol_folds[symbol]]
    shared_prices = {symbol: executor.share(prices[symbol]) for symbol in symbols}
    prepared = executor.map(
        prepare_fold,
        [{"symbol": symbol, "prices": shared_prices[symbol], "fold": fold, "job": job} for symbol, fold in fold_keys],
    )
    specs = {(symbol, fold.index): spec for (symbol, fold), (spec, _) in zip(fold_keys, prepared)}
    shared_specs = {key: executor.share(spec) for key, spec in specs.items()}
    return _PreparedFolds(symbol_folds, fold_keys, prepared, specs, shared_specs)


def _chain_tasks(
    configs: Sequence[WalkForwardParams],
    symbols: list[str],
    seed_indices: list[int],
    agent_params: dict[str, Any],
    job: WalkForwardJob,
    folds: _PreparedFolds,
) -> tuple[list[ChainKey], list[RetrainTask]]:
    """The second wave: one retrain task per variant × symbol × agent × seed × retrain group, with
    the key saying where its chain belongs."""
    config = configs[0]
    keys, tasks = [], []
    for variant, variant_config in enumerate(configs):
        for symbol in symbols:
            for agent in config.agents:
                section = agent_section(agent, agent_params, variant_config.agent_overrides)
                for seed_index in seed_indices:
                    for group in retrain_groups(folds.symbol_folds[symbol]):
                        keys.append(ChainKey(variant, symbol, agent, seed_index, group))
                        tasks.append(
                            RetrainTask(
                                agent=agent,
                                trainer=AGENT_TRAINERS[agent],
                                specs=[folds.shared_specs[(symbol, fold.index)] for fold in group],
                                retrains=[fold.retrain for fold in group],
                                params=section,
                                seed=agent_seed(job.seed, seed_index),
                                timesteps=config.timesteps,
                                finetune_timesteps=config.finetune_timesteps,
                                device=config.device,
                            )
                        )
    return keys, tasks


def _scored_results(
    n_variants: int,
    symbols: list[str],
    job: WalkForwardJob,
    folds: _PreparedFolds,
    keys: Sequence[ChainKey],
    chain_results: Sequence[Any],
) -> list[WalkForwardResult]:
    """Each variant's result: per symbol the baselines' windows, then its agents' windows, scored."""
    market = {
        (symbol, fold.index): rollouts[MARKET]["return"].to_numpy(dtype=np.float64)
        for (symbol, fold), (_, rollouts) in zip(folds.fold_keys, folds.prepared)
    }
    scored = _Scorer(job, folds.specs, market)
    baselines: dict[str, list[tuple[dict, pd.DataFrame]]] = {symbol: [] for symbol in symbols}
    for (symbol, fold), (_, rollouts) in zip(folds.fold_keys, folds.prepared):
        baselines[symbol] += [
            scored(symbol, fold, {"kind": "baseline", "agent": name, "seed": -1}, rollout)
            for name, rollout in rollouts.items()
        ]
    agent_windows: list[dict[str, list[tuple[dict, pd.DataFrame]]]] = [
        {symbol: [] for symbol in symbols} for _ in range(n_variants)
    ]
    chains: list[list[TrainedChain]] = [[] for _ in range(n_variants)]
    for key, result in zip(keys, chain_results):
        agent_windows[key.variant][key.symbol] += [
            scored(key.symbol, fold, {"kind": "agent", "agent": key.agent, "seed": key.seed_index}, rollout)
            for fold, rollout in zip(key.group, result.rollouts)
        ]
        chains[key.variant].append(
            TrainedChain(
                key.symbol, key.agent, key.seed_index, [fold.index for fold in key.group], result.training, result.agent
            )
        )
    results = []
    for variant in range(n_variants):
        windows = [window for symbol in symbols for window in baselines[symbol] + agent_windows[variant][symbol]]
        results.append(
            WalkForwardResult(
                folds=pd.DataFrame([row for row, _ in windows]),
                returns=pd.concat([steps for _, steps in windows], ignore_index=True),
                chains=chains[variant],
            )
        )
    return results


def run_walk_forward_variants(
    prices: Mapping[str, pd.DataFrame],
    variants: Sequence[WalkForwardParams],
    job: WalkForwardJob,
    executor: Executor | None = None,
    seed_indices: Sequence[int] | None = None,
) -> list[WalkForwardResult]:
    """``run_walk_forward`` of each of ``variants`` (walk_forward parameters that differ only in
    ``agent_overrides``), as one execution: the folds and baselines once, shared, and every
    variant's chains in one ``executor.run_retrain_groups`` call.

    A task seeds itself from its arguments, so on the sequential and Ray engines each result equals
    ``run_walk_forward`` of its variant alone; on the population engine the variants' SAC chains
    train as members of the same populations (more members per batched step).

    ``seed_indices``: train only these of ``range(walk_forward.seeds)`` (default: all), as a run of
    every seed would train them; ``merge_seed_runs`` joins such runs into that run's result (how
    tuning's pruner evaluates a trial seed by seed). The parameters, and so every trial identity,
    stay those of the full run.
    """
    executor = executor or SequentialExecutor()
    configs = shared_protocol(variants, job.feature_extraction.features)
    config = configs[0]
    checked_seeds = _checked_seed_indices(config, seed_indices)
    agent_params = job.with_walk_forward_agents(config)
    symbols = _walked_symbols(prices, config)
    folds = _prepare_folds(prices, symbols, config, job, executor)
    keys, tasks = _chain_tasks(configs, symbols, checked_seeds, agent_params, job, folds)
    chain_results = executor.run_retrain_groups(run_retrain_group, tasks, on_result=_chain_progress(keys))
    return _scored_results(len(configs), symbols, job, folds, keys, chain_results)


def merge_seed_runs(runs: Sequence[WalkForwardResult]) -> WalkForwardResult:
    """Runs of one walk-forward variant on successive ``seed_indices`` as the result one run of all
    their seeds gives: the baselines once (every run scores the same), then the agents' rows and
    chains in a full run's order (per symbol: baselines, then each agent's seeds in turn)."""
    first = runs[0]
    symbols = list(dict.fromkeys(first.folds["symbol"]))
    agents = list(dict.fromkeys(first.folds.loc[first.folds["kind"] == "agent", "agent"]))

    def in_run_order(frames: list[pd.DataFrame]) -> pd.DataFrame:
        baselines = frames[0][frames[0]["kind"] == "baseline"]
        rows = pd.concat([baselines, *(frame[frame["kind"] == "agent"] for frame in frames)], ignore_index=True)
        agent_rank = rows["agent"].map({agent: rank for rank, agent in enumerate(agents)}).fillna(-1)
        symbol_rank = rows["symbol"].map({symbol: rank for rank, symbol in enumerate(symbols)})
        # np.lexsort sorts by its last key first; the position, its first key, keeps ties in their order
        order = np.lexsort((np.arange(len(rows)), rows["seed"], agent_rank, rows["kind"] == "agent", symbol_rank))
        return rows.iloc[order].reset_index(drop=True)

    chains = sorted(
        (chain for run in runs for chain in run.chains),
        key=lambda chain: (symbols.index(chain.symbol), agents.index(chain.agent_name), chain.seed),
    )
    return WalkForwardResult(
        folds=in_run_order([run.folds for run in runs]),
        returns=in_run_order([run.returns for run in runs]),
        chains=chains,
    )


def run_walk_forward(
    prices: Mapping[str, pd.DataFrame],
    params: WalkForwardParams,
    job: WalkForwardJob,
    executor: Executor | None = None,
) -> WalkForwardResult:
    """Every symbol × fold × agent × seed, plus the baselines per fold, scored on the test window.

    ``prices``: ``{symbol: OHLCV frame}``. Baselines (``evaluation.metrics.baselines``) run through the same
    test env, with the same costs, as the agents; ``buy_and_hold_full`` is the uncapped, cost-free
    market line (return metrics only).

    Work runs on ``executor`` (default: in this process) in two waves of independent tasks: one
    ``prepare_fold`` per symbol × fold, then one chain per symbol × agent × seed × retrain group
    (``executor.run_retrain_groups``). Rows come out in the same order, with the same numbers,
    whatever the executor (but ``population``, docs/scale_out.md). The one-variant case of
    ``run_walk_forward_variants``.
    """
    [result] = run_walk_forward_variants(prices, [params], job, executor)
    return result
