"""Walk-forward windows and their out-of-sample scores.

The windows (``make_folds``) slide a training window and the test window after it through the
history; ``gap_bars`` bars (purge + embargo, at least the longest feature look-back) separate them.
Each fold's env spec (``fold_env_spec``) fits every statistic (GARCH, the scaler) on the fold's
training window only. ``summarise`` reports medians and quartiles across folds and seeds and the
PSR/DSR of the stitched out-of-sample curves. ``phases.walk_forward`` trains and scores the agents.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trading_rl.envs import EnvConfig, EnvSpec, build_env_spec
from trading_rl.evaluation.ledger.ledger import Trials
from trading_rl.evaluation.metrics.attribution import Attribution, return_attribution
from trading_rl.evaluation.metrics.baselines import MARKET
from trading_rl.evaluation.metrics.metrics import (
    deflated_sharpe_ratio,
    probabilistic_sharpe_ratio,
    return_metrics,
    window_sharpes,
)
from trading_rl.features import (
    apply_scaler,
    compute_features,
    fit_scaler,
    make_splits,
    max_lookback,
    without_masked_entries,
)
from trading_rl.features.indicators import FeatureParams
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.monitoring.collapse import trading_flags

# The parameter section whose keys the errors below name.
PARAMS_PREFIX = "walk_forward"


@dataclass(frozen=True)
class Fold:
    """One walk-forward window as half-open bar positions ``[start, stop)`` into a symbol's bars."""

    index: int
    train_start: int
    train_stop: int
    test_start: int
    test_stop: int
    retrain: bool


def development_prices(prices: pd.DataFrame, data_end: str | None, params: FeatureExtractionParams) -> pd.DataFrame:
    """The bars the walk-forward may use: through ``data_end``.

    ``"validation"`` ends at the validation split's last bar (``feature_extraction.splits``, the same
    purge gap as the pipeline), so neither the default run nor any choice made from walk-forward
    results ever sees the test split, which ``final_evaluation`` spends once. ``"train"`` ends at the
    training split's last bar (the ``tuning`` pipeline: its choice sees neither the validation nor
    the test split). ``"all"`` uses every bar (a rerun that validates the newest period, after the
    test split was spent); an ISO date ends there.
    """
    if data_end in (None, "all"):
        return prices
    if data_end in ("train", "validation"):
        split_params = {**params.splits.to_dict(), "gap_bars": max_lookback(params.features)}
        end = pd.Timestamp(make_splits(prices.index, split_params)[data_end]["end"])
    else:
        try:
            end = pd.Timestamp(data_end)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"parameter '{PARAMS_PREFIX}.data_end' must be 'train', 'validation', 'all' or a date, got {data_end!r}"
            ) from error
    return prices.loc[:end]


def make_folds(
    n_bars: int,
    train_length: int,
    test_length: int,
    step: int,
    gap_bars: int,
    retrain_frequency: int = 1,
    max_folds: int | None = None,
) -> list[Fold]:
    """Rolling windows anchored at the last bar, in chronological order.

    Fold ``k`` (counted back from the end) tests on ``[n - k·step - test_length, n - k·step)`` and
    trains on the ``train_length`` bars ending ``gap_bars`` before that. Only windows whose training
    start is ``>= 0`` are kept; ``max_folds`` keeps the most recent ones. The first kept fold always
    retrains; later ones retrain every ``retrain_frequency`` folds and fine-tune otherwise.
    """
    windows = []
    k = 0
    while max_folds is None or k < max_folds:
        test_stop = n_bars - k * step
        test_start = test_stop - test_length
        train_stop = test_start - gap_bars
        train_start = train_stop - train_length
        if train_start < 0:
            break
        windows.append((train_start, train_stop, test_start, test_stop))
        k += 1
    if not windows:
        raise ValueError(
            f"no walk-forward window fits in {n_bars} bars: need train_length ({train_length}) + "
            f"gap_bars ({gap_bars}) + test_length ({test_length}) bars"
        )
    windows.reverse()
    return [Fold(i, *bounds, retrain=(i % retrain_frequency == 0)) for i, bounds in enumerate(windows)]


def fold_splits(index: pd.DatetimeIndex, fold: Fold) -> dict[str, Any]:
    """The fold as a splits dict (inclusive ISO bounds) for ``build_env_spec``."""

    def bounds(start: int, stop: int) -> dict[str, Any]:
        return {"start": index[start].isoformat(), "end": index[stop - 1].isoformat(), "n_bars": stop - start}

    return {
        "train": bounds(fold.train_start, fold.train_stop),
        "test": bounds(fold.test_start, fold.test_stop),
        "gap_bars": fold.test_start - fold.train_stop,
    }


def tradable_index(prices: pd.DataFrame, features: FeatureParams) -> pd.DatetimeIndex:
    """Bars on which every feature is defined (the first ``max_lookback`` bars are warm-up)."""
    return prices.index[max_lookback(features) :]


def fold_env_spec(
    symbol: str,
    prices: pd.DataFrame,
    fold: Fold,
    params: FeatureExtractionParams,
    env_config: EnvConfig,
    periods_per_year: float,
) -> EnvSpec:
    """Env spec of one fold: features up to the test end, GARCH and scaler fitted on the fold's
    training window only (the scaler without the entries the stale-open mask replaced)."""
    index = tradable_index(prices, params.features)
    splits = fold_splits(index, fold)
    train_end = pd.Timestamp(splits["train"]["end"])
    features_config = params.features
    if features_config.garch is not None:
        garch = dataclasses.replace(features_config.garch, fit_end=splits["train"]["end"])
        features_config = dataclasses.replace(features_config, garch=garch)
    history = prices.loc[: pd.Timestamp(splits["test"]["end"])]
    features = compute_features(history, features_config, symbol).loc[index[0] :]
    train_rows = features.loc[pd.Timestamp(splits["train"]["start"]) : train_end]
    scaler = fit_scaler(
        without_masked_entries(train_rows, history, features_config), params.scaler.method, params.scaler.clip
    )
    return build_env_spec(
        symbol=symbol,
        prices=history,
        scaled_features=apply_scaler(features, scaler),
        splits=splits,
        config=env_config,
        periods_per_year=periods_per_year,
        feature_scaler=scaler,
        market_model=params.market_model(symbol),
    )


def retrain_groups(folds: Sequence[Fold]) -> list[list[Fold]]:
    """Consecutive folds that share one agent: a retrain fold and the fine-tuned folds after it.

    Groups are independent of each other (a retrain starts from scratch with the chain's seed), so
    they may run in parallel; the folds inside a group may not (each fine-tunes the previous one).
    """
    groups: list[list[Fold]] = []
    for fold in folds:
        if fold.retrain or not groups:
            groups.append([])
        groups[-1].append(fold)
    return groups


def stitch_out_of_sample(returns: pd.DataFrame) -> pd.DataFrame:
    """One out-of-sample return series per symbol × agent × seed: the folds' test steps in time
    order, where overlapping test windows (``step < test_length``) keep the earlier fold's steps
    only up to the later fold's first test step. Adds ``equity`` (growth of 1)."""
    keys = ["symbol", "kind", "agent", "seed"]
    parts = []
    for _, group in returns.groupby(keys, sort=False):
        group = group.sort_values(["fold", "timestamp"])
        next_start = group.groupby("fold")["timestamp"].min().shift(-1)
        cutoff = group["fold"].map(next_start)
        kept = group[cutoff.isna() | (group["timestamp"] < cutoff)].sort_values("timestamp")
        parts.append(kept.assign(equity=np.cumprod(1.0 + kept["return"].to_numpy())))
    return pd.concat(parts, ignore_index=True)


SUMMARY_METRICS = (
    "sharpe",
    "total_return",
    "max_drawdown",
    "win_rate",
    "action_entropy",
    "hold_share",
    "n_trades",
    "turnover",
    "alpha_annual",
    "beta",
    "mean_exposure",
)
# Of each seed's stitched series (evaluation.metrics.attribution), reported as the median over seeds.
STITCHED_ATTRIBUTION = (
    "alpha_annual",
    "alpha_ci90_low",
    "alpha_ci90_high",
    "alpha_se",
    "alpha_t",
    "beta",
    "mean_exposure",
    "timing_corr",
    "information_ratio",
    "sharpe",
    "sharpe_se",
    "exposure_matched_sharpe",
    "exposure_matched_return",
)
# The standard error of a median over k windows, as a multiple of the values' sd / sqrt(k): the
# large-sample value sqrt(pi / 2) for normally distributed values.
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2.0)
# An edge this many standard errors from zero is what a report could have told from luck (about a
# 95% two-sided test; a smaller true edge is likely to go unseen).
DETECTABLE_SE_MULTIPLE = 2.0


def _quartiles(values: pd.Series) -> dict[str, float | None]:
    finite = values.astype(float).replace([np.inf, -np.inf], np.nan).dropna()
    if finite.empty:
        return {"median": None, "q25": None, "q75": None, "iqr": None, "n": 0}
    # + 0.0 turns -0.0 (e.g. the entropy of a single bucket) into 0.0.
    q25, median, q75 = np.quantile(finite.to_numpy(), [0.25, 0.5, 0.75]) + 0.0
    return {
        "median": float(median),
        "q25": float(q25),
        "q75": float(q75),
        "iqr": float(q75 - q25),
        "n": int(finite.size),
    }


def median_standard_error(values: pd.Series) -> float | None:
    """Standard error of the median of ``values`` (``MEDIAN_SE_FACTOR`` × sd / sqrt(k)); ``None``
    with fewer than 2 finite values."""
    finite = values.astype(float).replace([np.inf, -np.inf], np.nan).dropna()
    if finite.size < 2:
        return None
    return float(MEDIAN_SE_FACTOR * finite.std(ddof=1) / math.sqrt(finite.size))


def stitched_attribution(curves: pd.DataFrame, periods_per_year: float, cost_rate: float) -> list[Attribution]:
    """``return_attribution`` of each seed's stitched series in ``curves`` (one symbol × agent),
    against the market line's return on the same steps (the ``market`` column)."""
    return [
        return_attribution(
            curve["return"].to_numpy(dtype=np.float64),
            curve["exposure"].to_numpy(dtype=np.float64),
            curve["market"].to_numpy(dtype=np.float64),
            periods_per_year=periods_per_year,
            cost_rate=cost_rate,
        )
        for _, curve in curves.groupby("seed", sort=True)
    ]


def attribution_summary(attributions: Sequence[Attribution], rows: pd.DataFrame) -> dict[str, Any]:
    """Medians over seeds of the stitched series' attribution, the ``skill`` share (seeds whose
    alpha's 90% lower bound is > 0), and the standard errors a reader needs to judge the size of
    edge the walk-forward could have detected: of each seed's stitched Sharpe and alpha (median over
    seeds) and of the median over windows (``rows``: the agent's window rows), with the minimum
    detectable values ``DETECTABLE_SE_MULTIPLE`` × those errors."""
    per_seed = pd.DataFrame([attribution.to_dict() for attribution in attributions])
    medians = {key: _quartiles(per_seed[key])["median"] for key in STITCHED_ATTRIBUTION}
    lows = per_seed["alpha_ci90_low"].astype(float)
    errors = {
        "sharpe_stitched": medians["sharpe_se"],
        "alpha_stitched": medians["alpha_se"],
        "sharpe_median_windows": median_standard_error(rows["sharpe"]),
        "alpha_median_windows": median_standard_error(rows["alpha_annual"]) if "alpha_annual" in rows else None,
    }
    return {
        "stitched_attribution_median": medians,
        "skill_seed_share": float((lows.fillna(-np.inf) > 0).mean()) if len(lows) else None,
        "standard_errors": errors,
        "min_detectable": {
            name: None if value is None else DETECTABLE_SE_MULTIPLE * value for name, value in errors.items()
        },
    }


def chain_name(symbol: str, agent: str, seed: int, first_fold: int, last_fold: int) -> str:
    """``sp500_sac_icm_seed0_folds0-2``: a walk-forward chain's name, unique per run, usable as a file
    and MLflow model name (the saved chain models and their logged metrics read it)."""
    return f"{symbol}_{agent}_seed{seed}_folds{first_fold}-{last_fold}"


def chain_metrics(folds: pd.DataFrame, chain: str) -> dict[str, float]:
    """The medians over its test windows of the chain named ``chain`` (``chain_name``) of the
    summary's headline metrics (``sharpe`` by the one Sharpe convention), with ``n_windows``: the
    model's own evaluation, for its MLflow logged model. Empty when no agent rows of ``folds`` are
    that chain's."""
    span = re.search(r"_folds(\d+)-(\d+)$", chain)
    if span is None:
        return {}
    first, last = int(span[1]), int(span[2])
    agents = folds[(folds["kind"] == "agent") & folds["fold"].between(first, last)]
    for (symbol, agent, seed), windows in agents.groupby(["symbol", "agent", "seed"], sort=False):
        if chain_name(symbol, agent, seed, first, last) == chain:
            metrics = {"sharpe": float(np.median(window_sharpes(windows["sharpe"])))}
            metrics.update({metric: float(windows[metric].median()) for metric in ("total_return", "max_drawdown")})
            return {**metrics, "n_windows": float(len(windows))}
    return {}


def summarise(
    folds: pd.DataFrame,
    returns: pd.DataFrame,
    trials: Mapping[str, Trials],
    *,
    periods_per_year: Mapping[str, float],
    cost_rate: float,
) -> dict[str, Any]:
    """Median and inter-quartile range across seeds and folds (never the best seed) per symbol ×
    agent, the share of windows with a positive Sharpe, PSR/DSR of the stitched curves, and the
    return attribution of the stitched curves with the standard errors of Sharpe and alpha
    (``attribution_summary``; not for the market line, which is what it is measured against).

    DSR counts every configuration tried, not the runs of one: ``trials[symbol]`` holds the
    per-period Sharpe ratios of the configurations in the trial ledger for the symbol
    (``ledger.trials_for``), whose number and spread set the bar that the best of them would reach
    by luck. Baselines are not selected among trials: no DSR; with fewer than 2 trials there is no
    DSR either. PSR and DSR are computed per seed's stitched curve and reported as the median over
    seeds; ``n_trials`` and ``trials_by_source`` say what was counted.
    """
    missing = [column for column in ("exposure", "market") if column not in returns]
    if missing:
        raise ValueError(f"walk_forward_returns lacks column(s) {missing}; rerun the walk_forward pipeline")
    stitched = stitch_out_of_sample(returns)
    summary: dict[str, Any] = {}
    for symbol, symbol_folds in folds.groupby("symbol", sort=False):
        symbol_trials = trials.get(symbol, Trials((), {}))
        entries = {}
        for (kind, agent), rows in symbol_folds.groupby(["kind", "agent"], sort=False):
            sharpe = rows["sharpe"].astype(float)
            curves = stitched[(stitched["symbol"] == symbol) & (stitched["agent"] == agent)]
            psr, dsr = [], []
            for _, curve in curves.groupby("seed"):
                r = curve["return"].to_numpy()
                psr.append(probabilistic_sharpe_ratio(r))
                if kind == "agent" and symbol_trials.n >= 2:
                    dsr.append(deflated_sharpe_ratio(r, symbol_trials.sharpes))
            entries[agent] = {
                "kind": kind,
                "n_windows": int(len(rows)),
                "positive_sharpe_share": float((sharpe.fillna(-np.inf) > 0).mean()),
                # Windows whose agent fills on >= 2% of steps without a collapse gate failing.
                "trading_share": (
                    float(trading_flags(rows["trades"]).mean()) if kind == "agent" and "trades" in rows else None
                ),
                "metrics": {
                    metric: _quartiles(pd.Series(window_sharpes(rows[metric])) if metric == "sharpe" else rows[metric])
                    for metric in SUMMARY_METRICS
                    if metric in rows
                },
                "psr_median": _quartiles(pd.Series(psr, dtype=float))["median"],
                "dsr_median": _quartiles(pd.Series(dsr, dtype=float))["median"],
                "stitched_total_return_median": _quartiles(curves.groupby("seed")["equity"].last() - 1.0)["median"],
            }
            if agent != MARKET:
                attributions = stitched_attribution(curves, periods_per_year[symbol], cost_rate)
                entries[agent].update(attribution_summary(attributions, rows))
            # the tearsheet's series: each seed's stitched curve
            per_seed_returns = pd.DataFrame(
                [
                    return_metrics(curve["return"].to_numpy(), periods_per_year[symbol])
                    for _, curve in curves.groupby("seed")
                ]
            )
            entries[agent]["stitched_median"] = {
                metric: _quartiles(per_seed_returns[metric])["median"]
                for metric in ("sharpe", "total_return", "max_drawdown")
            }
        summary[symbol] = {
            "n_trials": symbol_trials.n,
            "trials_by_source": symbol_trials.by_source,
            "trials": symbol_trials.describe(),
            "trials_from": "trial_ledger: one per configuration tried for the symbol on this run's out-of-sample "
            "period (re-rolls pooled)",
            "agents": entries,
        }
    return summary
