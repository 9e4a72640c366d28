"""Walk-forward validation: rolling train/test windows, retrained or fine-tuned agents, several seeds.

The windows, their env specs and the summaries are ``evaluation.folds``; this module trains the
agents (``AGENT_TRAINERS``) and scores them.

A backtest on one split tells little: one period, one seed, and every choice made while looking at
it. Walk-forward slides a training window and the test window after it through the history, trains
an agent per window (from scratch every ``retrain_frequency`` windows, fine-tuned from the previous
window's agent in between), and only ever scores an agent on bars after everything it learned from.

Leakage guards, each of which a test checks:

- ``gap_bars`` bars (purge + embargo) separate a training window from its test window; they must be
  at least the longest feature look-back, so no test-window feature reaches back into training bars
  (features are causal, so no training feature reaches forward either). The config is rejected,
  naming the key, when the gap is smaller.
- Features are recomputed per fold with every fitted statistic (GARCH parameters, the scaler) fitted
  on that fold's training window only.
- The training env holds the training window (plus ``window_size - 1`` context bars before it); the
  test env the test window (plus context bars, which lie in the gap). Test bars are never stepped on
  during training.

Windows are anchored at the last usable bar (``data_end``): by default the validation split's last
bar, so the walk-forward never sees the test split; the last test window ends there and earlier ones
step back by ``step`` bars. ``data_end: all`` makes a rerun after new data validate the most recent
period.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from stable_baselines3.common.utils import set_random_seed

from trading_rl.agents import build_agent, resolve_device, resolve_params, wrap_training_env
from trading_rl.agents.sac_icm import AgentParams, copy_sections
from trading_rl.algorithms.actor_learner import VTraceAgent, VTraceLearnerParams, train_vtrace
from trading_rl.algorithms.es import EsParams, train_es_agent
from trading_rl.config import ConfigError, Section, setting
from trading_rl.envs import EnvConfig, EnvSpec
from trading_rl.evaluation.attribution import (
    attribution_metrics,
    env_cost_rate,
    return_attribution,
    rollout_exposure,
)
from trading_rl.evaluation.baselines import MARKET, market_returns, run_baselines
from trading_rl.evaluation.folds import (
    Fold,
    development_prices,
    fold_env_spec,
    make_folds,
    retrain_groups,
    stitch_out_of_sample,
    stitched_attribution,
    tradable_index,
)
from trading_rl.evaluation.ledger import STREAMS, trial_row
from trading_rl.evaluation.metrics import compute_metrics, json_ready, return_metrics, return_moments
from trading_rl.evaluation.rollout import policy_from_sb3, run_episode
from trading_rl.features import max_lookback
from trading_rl.monitoring.collapse import trading_verdict
from trading_rl.phases.chains import ChainResult, TrainedChain, saved_agent, training_point
from trading_rl.phases.options_her import continue_on_spec, train_from_spec
from trading_rl.phases.reward_shaper import train_shaped
from trading_rl.runtime.engine import Executor, SequentialExecutor
from trading_rl.seeding import SeedRole, trial_seed

logger = logging.getLogger(__name__)

PARAMS_PREFIX = "walk_forward"


def _agents_problem(agents: list[str]) -> str | None:
    unknown = [name for name in agents if name not in AGENT_TRAINERS]
    if not agents or unknown or len(set(agents)) != len(agents):
        return f"a non-empty list of distinct agents among {sorted(AGENT_TRAINERS)}"
    return None


@dataclass(frozen=True, kw_only=True)
class WalkForwardParams(Section):
    """The ``walk_forward`` section (conf/base states the same defaults; tests/test_config.py
    checks it). ``vtrace`` and ``es`` configure those agents when ``agents`` lists them."""

    symbols: list[str] | None = None
    data_end: str | None = "validation"
    train_length: int = setting(1000, interval="[1, inf)")
    test_length: int = setting(250, interval="[1, inf)")
    step: int = setting(250, interval="[1, inf)")
    gap_bars: int | None = setting(None, interval="[0, inf)")
    max_folds: int | None = setting(3, interval="[1, inf)")
    retrain_frequency: int = setting(3, interval="[1, inf)")
    seeds: int = setting(2, interval="[1, inf)")
    agents: list[str] = setting(["sac_icm"], check=_agents_problem)
    timesteps: int = setting(20_000, interval="[1, inf)")
    finetune_timesteps: int = setting(2000, interval="[0, inf)")
    agent_overrides: dict[str, Any] = setting(
        {
            "sac": {"learning_starts": 300, "buffer_size": 20_000, "batch_size": 64},
            "policy": {"net_arch": [64, 64]},
            "icm": {"warmup_steps": 300},
        }
    )
    device: str = setting("auto", runtime=True)
    vtrace: VTraceLearnerParams = setting(VTraceLearnerParams())
    es: EsParams = setting(EsParams())

    @classmethod
    def from_mapping(cls, config: Any = None, prefix: str = PARAMS_PREFIX, base: Any = None) -> WalkForwardParams:
        """``max_folds: all`` is the documented spelling of ``null`` (every window that fits)."""
        if isinstance(config, Mapping) and config.get("max_folds") == "all":
            config = {**config, "max_folds": None}
        return super().from_mapping(config, prefix, base)

    def validate(self, prefix: str) -> None:
        # Keys and values of the overrides are those of sac_icm.agent.
        AgentParams.from_mapping(self.agent_overrides, f"{prefix}.agent_overrides")


def resolve_walk_forward_params(params: Mapping[str, Any] | None, feature_params: Mapping[str, Any] | None) -> dict:
    """Defaults overlaid with ``params``, validated; errors name the offending key.

    ``max_folds: all`` (or null) keeps every window. ``gap_bars: null`` means the longest feature
    look-back; a smaller explicit gap is an error because test features would then reach back into
    training bars.
    """
    resolved = WalkForwardParams.from_mapping(params, PARAMS_PREFIX).to_dict()
    lookback = max_lookback(dict(feature_params.get("features") or {}) if feature_params else None)
    if resolved["gap_bars"] is None:
        resolved["gap_bars"] = lookback
    if resolved["gap_bars"] < lookback:
        raise ConfigError(
            f"parameter '{PARAMS_PREFIX}.gap_bars' is {resolved['gap_bars']}, smaller than the longest feature "
            f"look-back ({lookback} bars): test features would reach back into training bars"
        )
    return resolved


# ---------------------------------------------------------------- agents


Trainer = Callable[[EnvSpec, Mapping[str, Any], int, int, Any, str], Any]


def train_sac(
    spec: EnvSpec,
    agent_params: Mapping[str, Any],
    seed: int,
    timesteps: int,
    model: Any = None,
    device: str = "auto",
    icm: bool = True,
) -> Any:
    """Train SAC(+ICM) on the fold's training window; with ``model`` given, fine-tune it instead
    (continue training on the new window, keeping its replay buffer and step count). The training
    env gets the curriculum and auxiliary-target wrappers that ``agent_params`` switch on, for a
    fine-tune too (a fresh curriculum over the new window's bars)."""
    fresh = model is None
    model = sac_on_fold(spec, agent_params, seed, model, device, icm)
    model.learn(total_timesteps=timesteps, reset_num_timesteps=fresh)
    return model


def sac_on_fold(spec: EnvSpec, agent_params: Mapping[str, Any], seed: int, model: Any, device: str, icm: bool) -> Any:
    """``train_sac``'s agent before ``learn``: a new SAC(+ICM) on the fold's training env, or
    ``model`` moved onto it (the population engine trains many of these together)."""
    env = spec.make_env("train", seed=seed)
    if model is None:
        params = copy_sections(agent_params)
        params["icm"] = {**params.get("icm", {}), "enabled": icm}
        return build_agent(env, params, seed=seed, device=device)
    model.set_env(wrap_training_env(env, resolve_params(dict(agent_params or {}))))
    return model


def _train_sac_icm(spec, agent_params, seed, timesteps, model=None, device="auto"):
    return train_sac(spec, agent_params, seed, timesteps, model, device, icm=True)


def _train_plain_sac(spec, agent_params, seed, timesteps, model=None, device="auto"):
    return train_sac(spec, agent_params, seed, timesteps, model, device, icm=False)


def _train_vtrace(spec, agent_params, seed, timesteps, model=None, device="auto"):
    """IMPALA-style V-trace actor-learner with ``timesteps`` env steps over all its actors. The
    actors run inside this process (the same numbers as Ray actors): a walk-forward task is already
    one unit of parallelism, and Ray actors started from inside a task could wait forever for CPUs
    that the other tasks hold."""
    params = {**dict(agent_params or {}), "total_timesteps": timesteps}
    init_model = model.model if model is not None else None
    policy, _ = train_vtrace(spec, params, seed, backend="local", device=resolve_device(device), init_model=init_model)
    return VTraceAgent(policy, seed)


def _train_es(spec, agent_params, seed, timesteps, model=None, device="auto"):
    """Evolution strategy; its budget is ``es.generations`` (a population per generation, not env
    steps), for a fresh run and for fine-tuning from the previous window's parameters alike. The
    population is scored in this process (same numbers as a process pool; see ``_train_vtrace``)."""
    return train_es_agent(spec, agent_params, seed, model, num_workers=1)


def train_hierarchical(spec, agent_params, seed, timesteps, model=None, device="auto", her=False):
    """The options_her phase's hierarchical agent (options, with or without HER) on the fold's
    training window. ``agent_params``: ``{"source": sac_icm agent section, "phase": options_her
    section}``; the source is a fresh SAC+ICM model that gives the networks and the P&L reward scale
    (untrained: the walk-forward compares mechanisms from scratch). With ``model`` given, it is
    fine-tuned on the new window instead."""
    phase = {section: values for section, values in dict(agent_params.get("phase") or {}).items()}
    phase["her"] = {**dict(phase.get("her") or {}), "enabled": her}
    device = resolve_device(device)
    if model is None:
        source = build_agent(spec.make_env("train", seed=seed), dict(agent_params.get("source") or {}), seed, device)
        model, _, _ = train_from_spec(spec, source, phase, seed, device, timesteps)
    else:
        continue_on_spec(model, spec, phase, seed, timesteps)
    return model


def _train_options(spec, agent_params, seed, timesteps, model=None, device="auto"):
    return train_hierarchical(spec, agent_params, seed, timesteps, model, device, her=False)


def _train_options_her(spec, agent_params, seed, timesteps, model=None, device="auto"):
    return train_hierarchical(spec, agent_params, seed, timesteps, model, device, her=True)


def _train_shaped(spec, agent_params, seed, timesteps, model=None, device="auto"):
    """SAC+ICM on the reward_shaper phase's shaped reward (prior objective weights). ``agent_params``:
    ``{"source": sac_icm agent section, "phase": reward_shaper section}``."""
    return train_shaped(
        spec,
        dict(agent_params.get("source") or {}),
        dict(agent_params.get("phase") or {}),
        seed,
        timesteps,
        model,
        resolve_device(device),
    )


# name -> trainer(spec, agent_params, seed, timesteps, model_or_None, device) -> model with SB3's
# ``predict``, or with its own ``rollout(spec, split, seed)`` (the hierarchical agent, whose option
# layer and env settings must wrap the env).
# Another phase's agent joins walk-forward by registering its trainer here and listing
# its name in ``walk_forward.agents``; its parameters arrive under the same name in ``agent_params``.
AGENT_TRAINERS: dict[str, Trainer] = {
    "sac_icm": _train_sac_icm,
    "sac": _train_plain_sac,
    "vtrace": _train_vtrace,
    "es": _train_es,
    "options": _train_options,
    "options_her": _train_options_her,
    "shaped": _train_shaped,
}

# Agents that share another agent's parameter section ("sac" is SAC+ICM with the ICM switched off).
AGENT_PARAMS_SOURCE: dict[str, str] = {"sac": "sac_icm", "options_her": "options"}

# Parameter sections that ``walk_forward.agent_overrides`` (sections of the sac_icm schema: ``sac``,
# ``icm``, ...) applies to; other agents (vtrace, es) have flat parameters of their own.
OVERRIDDEN_AGENT_PARAMS = {"sac_icm"}


# ---------------------------------------------------------------- running


def _test_rows(rollout: pd.DataFrame, labels: dict[str, Any], exposure: np.ndarray, market: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            **labels,
            "timestamp": pd.to_datetime(rollout["timestamp"]).to_numpy(),
            "return": rollout["return"].to_numpy(dtype=np.float64),
            # for the return attribution of stitched series and regimes (evaluation.attribution)
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


def with_overrides(agent_params: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Agent parameters with ``walk_forward.agent_overrides`` applied section by section (walk-forward
    trains many short runs, so e.g. ``learning_starts`` and ``buffer_size`` usually differ)."""
    merged = copy_sections(agent_params)
    for key, value in dict(overrides or {}).items():
        merged[key] = {**merged.get(key, {}), **value} if isinstance(value, Mapping) else value
    return merged


@dataclass
class WalkForwardResult:
    """``folds``: one row per symbol × fold × (agent, seed) or baseline, window bounds + metrics.
    ``returns``: every test step of every row of ``folds`` (timestamp, return, raw action, traded
    value, exposure and the market line's return on the step; the market line's raw action and
    traded value are NaN, its exposure 1). ``chains``: each trained agent's
    training record and final model (``phases.chains``)."""

    folds: pd.DataFrame
    returns: pd.DataFrame
    chains: list[TrainedChain] = field(default_factory=list)


def prepare_fold(
    symbol: str,
    prices: pd.DataFrame,
    fold: Fold,
    feature_params: Mapping[str, Any] | None,
    env_config: Mapping[str, Any],
    periods_per_year: float,
    seed: int,
) -> tuple[EnvSpec, dict[str, pd.DataFrame]]:
    """A task: the fold's env spec and the baselines' test rollouts (``MARKET`` included)."""
    spec = fold_env_spec(symbol, prices, fold, feature_params, env_config, periods_per_year)
    fold_seed = trial_seed(seed, SeedRole.WALK_FORWARD_FOLD, fold.index)
    rollouts = run_baselines(partial(spec.make_env, "test", evaluation=True), seed=fold_seed)
    rollouts[MARKET] = _market_rows(spec, fold_seed, rollouts["cash"])
    return spec, rollouts


def run_retrain_group(
    trainer: Trainer,
    specs: Sequence[EnvSpec],
    retrains: Sequence[bool],
    agent_params: Mapping[str, Any],
    seed: int,
    timesteps: int,
    finetune_timesteps: int,
    device: str,
) -> ChainResult:
    """A task: train on the group's first fold, fine-tune through the rest; each fold's test rollout
    and training point, and the final agent (``phases.chains``). Seeds Python, NumPy and torch
    first, so the result depends on the arguments only."""
    set_random_seed(seed)
    model = None
    rollouts, training, trained_steps = [], [], 0
    for spec, retrain in zip(specs, retrains):
        if retrain or model is None:
            model, trained_steps = trainer(spec, agent_params, seed, timesteps, None, device), timesteps
        elif finetune_timesteps > 0:
            model = trainer(spec, agent_params, seed, finetune_timesteps, model, device)
            trained_steps += finetune_timesteps
        training.append(training_point(model, trained_steps))
        rollouts.append(fold_test_rollout(model, spec, seed))
    return ChainResult(rollouts, training, saved_agent(model))


def fold_test_rollout(model: Any, spec: EnvSpec, seed: int) -> pd.DataFrame:
    """The trained agent's episode on the fold's test window."""
    if hasattr(model, "rollout"):
        return model.rollout(spec, "test", seed)
    return run_episode(spec.make_env("test", evaluation=True), policy_from_sb3(model), seed=seed)


def _chain_progress(group_keys: Sequence[tuple]) -> Callable[[int, Any], None]:
    """One INFO line per finished chain (the walk-forward's silent minutes were its chains)."""
    started, done = time.perf_counter(), [0]

    def log(index: int, result: Any) -> None:
        done[0] += 1
        _, symbol, agent, seed_index, group = group_keys[index]
        logger.info(
            "walk_forward: chain %d/%d done after %.0f s: %s %s seed %d, folds %d-%d",
            done[0],
            len(group_keys),
            time.perf_counter() - started,
            symbol,
            agent,
            seed_index,
            group[0].index,
            group[-1].index,
        )

    return log


def run_walk_forward(
    prices: Mapping[str, pd.DataFrame],
    params: Mapping[str, Any],
    feature_params: Mapping[str, Any] | None,
    env_config: Mapping[str, Any],
    periods_per_year: Mapping[str, float],
    agent_params: Mapping[str, Mapping[str, Any]],
    seed: int,
    executor: Executor | None = None,
) -> WalkForwardResult:
    """Every symbol × fold × agent × seed, plus the baselines per fold, scored on the test window.

    ``prices``: ``{symbol: OHLCV frame}``. Baselines (``evaluation.baselines``) run through the same
    test env, with the same costs, as the agents; ``buy_and_hold_full`` is the uncapped, cost-free
    market line (return metrics only).

    Work runs on ``executor`` (default: in this process) in two waves of independent tasks: one
    ``prepare_fold`` per symbol × fold, then one ``run_retrain_group`` per symbol × agent × seed ×
    retrain group. Rows come out in the same order, with the same numbers, whatever the executor.
    The one-variant case of ``run_walk_forward_variants``.
    """
    [result] = run_walk_forward_variants(
        prices, [params], feature_params, env_config, periods_per_year, agent_params, seed, executor
    )
    return result


def shared_protocol(variants: Sequence[Mapping[str, Any]], feature_params: Mapping[str, Any] | None) -> list[dict]:
    """Each variant's resolved parameters, checked to share everything but ``agent_overrides``
    (the windows, folds and baselines that one execution computes once for all of them)."""
    if not variants:
        raise ValueError("run_walk_forward_variants needs at least one walk_forward parameter variant")
    configs = [resolve_walk_forward_params(variant, feature_params) for variant in variants]
    for index, config in enumerate(configs[1:], start=1):
        differing = sorted(key for key in config if key != "agent_overrides" and config[key] != configs[0][key])
        if differing:
            raise ValueError(
                f"walk-forward variants may differ only in '{PARAMS_PREFIX}.agent_overrides'; "
                f"variant {index} differs from variant 0 in {[f'{PARAMS_PREFIX}.{key}' for key in differing]}"
            )
    return configs


def folds_of(prices: pd.DataFrame, config: Mapping[str, Any], feature_params: Mapping[str, Any] | None) -> list[Fold]:
    """The windows of one symbol's development ``prices`` under resolved walk-forward ``config``."""
    return make_folds(
        len(tradable_index(prices, feature_params)),
        config["train_length"],
        config["test_length"],
        config["step"],
        config["gap_bars"],
        config["retrain_frequency"],
        config["max_folds"],
    )


def run_walk_forward_variants(
    prices: Mapping[str, pd.DataFrame],
    variants: Sequence[Mapping[str, Any]],
    feature_params: Mapping[str, Any] | None,
    env_config: Mapping[str, Any],
    periods_per_year: Mapping[str, float],
    agent_params: Mapping[str, Mapping[str, Any]],
    seed: int,
    executor: Executor | None = None,
) -> list[WalkForwardResult]:
    """``run_walk_forward`` of each of ``variants`` (walk_forward parameters that differ only in
    ``agent_overrides``), as one execution: the folds and baselines once, shared, and every
    variant's ``run_retrain_group`` tasks in one ``executor.map`` (or ``run_retrain_groups``) call.

    A task seeds itself from its arguments, so on the sequential and Ray engines each result equals
    ``run_walk_forward`` of its variant alone; on the population engine the variants' SAC chains
    train as members of the same populations (more members per batched step).
    """
    executor = executor or SequentialExecutor()
    configs = shared_protocol(variants, feature_params)
    config = configs[0]
    agent_params = with_walk_forward_agents(agent_params, config)
    resolved_env = EnvConfig.from_mapping(env_config)
    hold_threshold, cost_rate = resolved_env.hold_threshold, env_cost_rate(resolved_env)
    symbols = config["symbols"] or list(prices)
    missing = [symbol for symbol in symbols if symbol not in prices]
    if missing:
        raise ValueError(f"parameter '{PARAMS_PREFIX}.symbols' lists {missing}, not among {sorted(prices)}")

    prices = {symbol: development_prices(prices[symbol], config["data_end"], feature_params) for symbol in symbols}
    symbol_folds = {symbol: folds_of(prices[symbol], config, feature_params) for symbol in symbols}
    fold_keys = [(symbol, fold) for symbol in symbols for fold in symbol_folds[symbol]]
    shared_prices = {symbol: executor.share(prices[symbol]) for symbol in symbols}
    prepared = executor.map(
        prepare_fold,
        [
            {
                "symbol": symbol,
                "prices": shared_prices[symbol],
                "fold": fold,
                "feature_params": feature_params,
                "env_config": env_config,
                "periods_per_year": periods_per_year[symbol],
                "seed": seed,
            }
            for symbol, fold in fold_keys
        ],
    )
    specs = {(symbol, fold.index): spec for (symbol, fold), (spec, _) in zip(fold_keys, prepared)}
    shared_specs = {key: executor.share(spec) for key, spec in specs.items()}

    group_tasks, group_keys = [], []
    for variant, variant_config in enumerate(configs):
        for symbol in symbols:
            for agent in config["agents"]:
                section = agent_section(agent, agent_params, variant_config["agent_overrides"])
                for seed_index in range(config["seeds"]):
                    for group in retrain_groups(symbol_folds[symbol]):
                        group_keys.append((variant, symbol, agent, seed_index, group))
                        group_tasks.append(
                            {
                                "trainer": AGENT_TRAINERS[agent],
                                "specs": [shared_specs[(symbol, fold.index)] for fold in group],
                                "retrains": [fold.retrain for fold in group],
                                "agent_params": section,
                                "seed": agent_seed(seed, seed_index),
                                "timesteps": config["timesteps"],
                                "finetune_timesteps": config["finetune_timesteps"],
                                "device": config["device"],
                            }
                        )
    # The population engine trains the SAC chains together (phases.population_walk_forward).
    run_groups = getattr(executor, "run_retrain_groups", None)
    if run_groups is not None:
        group_results = run_groups(group_tasks, [agent for _, _, agent, _, _ in group_keys])
    else:
        group_results = executor.map(run_retrain_group, group_tasks, on_result=_chain_progress(group_keys))

    fold_market = {
        (symbol, fold.index): rollouts[MARKET]["return"].to_numpy(dtype=np.float64)
        for (symbol, fold), (_, rollouts) in zip(fold_keys, prepared)
    }

    def scored(symbol: str, fold: Fold, labels: dict[str, Any], rollout: pd.DataFrame) -> tuple[dict, pd.DataFrame]:
        """The window's row of ``folds`` (metrics and, but for the market line, the return
        attribution against it) and its test steps."""
        spec = specs[(symbol, fold.index)]
        ppy = periods_per_year[symbol]
        market = fold_market[(symbol, fold.index)]
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
            exposure = rollout_exposure(rollout)
            verdict = trading_verdict(rollout["action_raw"], rollout["trade_value"], hold_threshold)
            attribution = return_attribution(
                rollout["return"].to_numpy(dtype=np.float64),
                exposure,
                market,
                periods_per_year=ppy,
                cost_rate=cost_rate,
            )
            metrics = {**compute_metrics(rollout, ppy, hold_threshold), **verdict, **attribution_metrics(attribution)}
        steps = _test_rows(rollout, {"symbol": symbol, "fold": fold.index, **labels}, exposure, market)
        return {**window, **labels, **metrics}, steps

    baselines: dict[str, list[tuple[dict, pd.DataFrame]]] = {symbol: [] for symbol in symbols}
    for (symbol, fold), (_, rollouts) in zip(fold_keys, prepared):
        baselines[symbol] += [
            scored(symbol, fold, {"kind": "baseline", "agent": name, "seed": -1}, rollout)
            for name, rollout in rollouts.items()
        ]
    agent_windows: list[dict[str, list[tuple[dict, pd.DataFrame]]]] = [
        {symbol: [] for symbol in symbols} for _ in configs
    ]
    chains: list[list[TrainedChain]] = [[] for _ in configs]
    for (variant, symbol, agent, seed_index, group), result in zip(group_keys, group_results):
        agent_windows[variant][symbol] += [
            scored(symbol, fold, {"kind": "agent", "agent": agent, "seed": seed_index}, rollout)
            for fold, rollout in zip(group, result.rollouts)
        ]
        chains[variant].append(
            TrainedChain(symbol, agent, seed_index, [fold.index for fold in group], result.training, result.agent)
        )
    results = []
    for variant in range(len(configs)):
        windows = [window for symbol in symbols for window in baselines[symbol] + agent_windows[variant][symbol]]
        results.append(
            WalkForwardResult(
                folds=pd.DataFrame([row for row, _ in windows]),
                returns=pd.concat([steps for _, steps in windows], ignore_index=True),
                chains=chains[variant],
            )
        )
    return results


# ---------------------------------------------------------------- trial ledger

# Walk-forward parameters that are not the protocol of one agent configuration: which symbols and
# agents run (every agent trains on the same random streams, ``agent_seed``), the overrides (inside
# the agent's parameters), vtrace and es (those agents' own parameters) and the seed count (a stream).
NOT_CONFIGURATION = ("symbols", "agents", "agent_overrides", "vtrace", "es", "seeds")
# The stream every walk-forward agent trains on. It was the agent's index in ``walk_forward.agents``
# (so [sac_icm] and [sac, sac_icm] trained sac_icm on other seeds); index 0 for all keeps the numbers
# of every first-listed agent and gives the arms of an A/B common random numbers per (fold, seed).
SHARED_AGENT_STREAM = 0


def agent_seed(seed: int, seed_index: int) -> int:
    """The training seed of every agent's chain for seed ``seed_index``, whichever agents run."""
    return trial_seed(seed, SeedRole.WALK_FORWARD_AGENT, SHARED_AGENT_STREAM, seed_index)


def with_walk_forward_agents(agent_params: Mapping[str, Mapping[str, Any]], config: Mapping[str, Any]) -> dict:
    """``agent_params`` plus the agents configured inside ``walk_forward`` (``vtrace``, ``es``)."""
    return {"vtrace": config["vtrace"], "es": config["es"], **agent_params}


def agent_section(agent: str, agent_params: Mapping[str, Mapping[str, Any]], overrides: Mapping[str, Any]) -> dict:
    """The parameters ``agent`` trains with in walk-forward: its (or its source agent's) section of
    ``agent_params``, with ``walk_forward.agent_overrides`` applied where they apply."""
    source = AGENT_PARAMS_SOURCE.get(agent, agent)
    section = agent_params.get(source, {})
    return with_overrides(section, overrides) if source in OVERRIDDEN_AGENT_PARAMS else dict(section)


def trial_configuration(
    agent: str,
    config: Mapping[str, Any],
    feature_params: Mapping[str, Any] | None,
    env_config: Mapping[str, Any],
    agent_params: Mapping[str, Mapping[str, Any]],
    seed: int,
    symbol: str,
) -> dict[str, Any]:
    """What one ledger trial is (hashed into its ``config_hash``): the agent, its effective
    parameters as they act (``identity_params``), the walk-forward protocol (windows, gap,
    retraining, budgets), the feature and scaler parameters, the env config and the symbol; its
    random streams (base seed, seed count, agent stream) under ``streams``. ``config``: resolved
    walk-forward parameters; ``agent_params``: with the walk-forward's own agents added."""
    protocol = WalkForwardParams.identity_view(config)
    return {
        "agent": agent,
        "agent_params": identity_params(agent, agent_section(agent, agent_params, config["agent_overrides"])),
        "walk_forward": {key: value for key, value in protocol.items() if key not in NOT_CONFIGURATION},
        "features": {key: (feature_params or {}).get(key) for key in ("features", "scaler")},
        "env": EnvConfig.identity_view(env_config),
        "symbol": symbol,
        STREAMS: {"seed": seed, "seeds": config["seeds"], "agent_stream": SHARED_AGENT_STREAM},
    }


def identity_params(agent: str, section: Mapping[str, Any]) -> dict[str, Any]:
    """An agent's parameters as they act: for the SAC family (sac_icm's schema) over their defaults
    (a default left out and one written out are the same), the run-time keys and switched-off
    sections dropped (``AgentParams.identity_view``), and for ``sac`` the ICM switched off as its
    trainer does (its ICM settings cannot act)."""
    if AGENT_PARAMS_SOURCE.get(agent, agent) not in OVERRIDDEN_AGENT_PARAMS:
        return dict(section)
    params = copy_sections(section)
    if agent == "sac":
        params["icm"] = {**params.get("icm", {}), "enabled": False}
    return AgentParams.identity_view(resolve_params(params))


def trial_rows(
    returns: pd.DataFrame,
    params: Mapping[str, Any],
    feature_params: Mapping[str, Any] | None,
    env_config: Mapping[str, Any],
    periods_per_year: Mapping[str, float],
    agent_params: Mapping[str, Mapping[str, Any]],
    seed: int,
    run: Mapping[str, Any] | None = None,
    source: str = "walk_forward",
) -> pd.DataFrame:
    """One trial-ledger row per symbol × agent configuration (baselines are not trials): the
    moments of its fold × seed stitched out-of-sample returns, pooled over seeds, and the median
    over seeds of their return attribution at the env's costs; ``source`` says who evaluated
    (``walk_forward``, ``tuning``)."""
    config = resolve_walk_forward_params(params, feature_params)
    agent_params = with_walk_forward_agents(agent_params, config)
    cost_rate = env_cost_rate(EnvConfig.from_mapping(env_config))
    agent_steps = returns[returns["kind"] == "agent"]
    stitched = stitch_out_of_sample(agent_steps)
    rows = []
    for (symbol, agent), curve in stitched.groupby(["symbol", "agent"], sort=False):
        steps = agent_steps[(agent_steps["symbol"] == symbol) & (agent_steps["agent"] == agent)]
        configuration = trial_configuration(agent, config, feature_params, env_config, agent_params, seed, symbol)
        per_seed = pd.DataFrame(
            [item.to_dict() for item in stitched_attribution(curve, periods_per_year[symbol], cost_rate)]
        )
        rows.append(
            trial_row(
                source=source,
                symbol=symbol,
                split="walk_forward",
                period_start=pd.Timestamp(curve["timestamp"].min()).isoformat(),
                period_end=pd.Timestamp(curve["timestamp"].max()).isoformat(),
                agent=agent,
                configuration=configuration,
                moments=return_moments(curve["return"].to_numpy()),
                n_runs=len(steps[["seed", "fold"]].drop_duplicates()),
                periods_per_year=periods_per_year[symbol],
                run=run,
                attribution=per_seed.drop(columns="reason").astype(float).median().to_dict(),
            )
        )
    return pd.DataFrame(rows)
