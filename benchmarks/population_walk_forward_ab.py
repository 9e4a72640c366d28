"""Is the population engine's walk-forward the sequential engine's in distribution?

    python benchmarks/population_walk_forward_ab.py [--seeds 10] [--folds 2] [--timesteps 1000]
        [--agent sac_icm] [--symbol sp500] [--engines sequential population] [--tables DIR]

Runs ``run_walk_forward`` twice on the same real bars, parameters and base seed — once on
``SequentialExecutor``, once on the population engine — with every fold retrained from scratch
(``retrain_frequency: 1``), so the members are ``seeds × folds`` independent agents per engine. The
two cannot be bit-equal (the population's members share the global RNGs), so per metric of the
per-fold agent rows it reports both medians and the p-values of a two-sample Kolmogorov–Smirnov test
and a Mann–Whitney U test; a p-value well above 0.05 says the test finds no difference between the
engines' distributions at this sample size. Non-finite Sharpe ratios (a window without trades) count
as 0, the flat line's.

``--tables DIR`` keeps each engine's agent rows as ``DIR/<engine>.csv`` and reuses a table already
there, so the two engines can run as separate processes (one core each) and the comparison is
printed once both exist.

The base config's ``conf/base`` parameters with the walk-forward's ``agent_overrides`` apply; only the
windows (``--train-length`` bars, 2 folds of 250 test bars by default) and budgets are shrunk.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learning_curve import load_parameters  # noqa: E402

from trading_rl.data import load_prices  # noqa: E402
from trading_rl.envs import EnvConfig  # noqa: E402
from trading_rl.features.params import FeatureExtractionParams  # noqa: E402
from trading_rl.monitoring.collapse import trading_flags  # noqa: E402
from trading_rl.phases.walk_forward import WalkForwardJob, WalkForwardParams, run_walk_forward  # noqa: E402
from trading_rl.phases.walk_forward.population import PopulationExecutor  # noqa: E402
from trading_rl.runtime import SequentialExecutor  # noqa: E402
from trading_rl.training.params import AgentParams  # noqa: E402

METRICS = ("sharpe", "total_return", "hold_share", "action_entropy", "fill_rate")
ENGINES = {"sequential": SequentialExecutor, "population": PopulationExecutor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--folds", type=int, default=2)
    parser.add_argument("--timesteps", type=int, default=1000)
    parser.add_argument("--train-length", type=int, default=500)
    parser.add_argument("--agent", default="sac_icm", choices=("sac_icm", "sac"))
    parser.add_argument("--symbol", default="sp500")
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=list(ENGINES))
    parser.add_argument("--tables", type=Path, default=None, help="keep / reuse each engine's agent rows here")
    args = parser.parse_args()

    params = load_parameters("base")
    walk_forward = {
        **params["walk_forward"],
        "agents": [args.agent],
        "seeds": args.seeds,
        "max_folds": args.folds,
        "retrain_frequency": 1,
        "timesteps": args.timesteps,
        "train_length": args.train_length,
        "device": "cpu",
    }
    env_config = params["env_construction"]["env"]
    arguments = (
        {args.symbol: load_prices(args.symbol)},
        WalkForwardParams.from_mapping(walk_forward, "walk_forward"),
        WalkForwardJob(
            FeatureExtractionParams.from_mapping(params["feature_extraction"], "feature_extraction"),
            EnvConfig.from_mapping(env_config),
            {args.symbol: 252.0},
            {"sac_icm": AgentParams.from_mapping(params["sac_icm"]["agent"], "sac_icm.agent")},
            params["seed"],
        ),
    )
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.2f}; {args.agent}, {args.seeds} seeds x {args.folds} folds, "
        f"{args.timesteps} steps, train_length {args.train_length}"
    )
    tables = {}
    for name in ENGINES:
        saved = args.tables / f"{name}.csv" if args.tables is not None else None
        if saved is not None and saved.exists():
            tables[name] = pd.read_csv(saved, float_precision="round_trip")  # ties stay ties
            print(f"{name}: {len(tables[name])} agent windows from {saved}")
            continue
        if name not in args.engines:
            continue
        start = time.perf_counter()
        folds = run_walk_forward(*arguments, executor=ENGINES[name]()).folds
        tables[name] = folds[folds["kind"] == "agent"]
        print(f"{name}: {len(tables[name])} agent windows in {time.perf_counter() - start:.0f} s wall", flush=True)
        if saved is not None:
            saved.parent.mkdir(parents=True, exist_ok=True)
            tables[name].to_csv(saved, index=False)
    if len(tables) < len(ENGINES):
        print("comparison once both engines' tables exist")
        return
    print("| metric | sequential median | population median | difference [90% CI] | KS p | Mann-Whitney p |")
    print("|---|---:|---:|---:|---:|---:|")
    for metric in METRICS:
        a, b = (
            np.nan_to_num(tables[name][metric].to_numpy(dtype=float), nan=0.0, posinf=0.0, neginf=0.0)
            for name in ("sequential", "population")
        )
        ks = stats.ks_2samp(a, b).pvalue
        mwu = stats.mannwhitneyu(a, b, alternative="two-sided").pvalue
        difference, low, high = median_difference_ci(b, a)
        print(
            f"| {metric} | {np.median(a):.3f} | {np.median(b):.3f} | {difference:+.3f} [{low:+.3f}, {high:+.3f}] "
            f"| {ks:.2f} | {mwu:.2f} |"
        )
    for name, table in tables.items():
        trading = trading_flags(table["trades"])
        print(f"{name}: {int(trading.sum())} of {len(table)} windows trade (the walk-forward's `trades` verdict)")


def median_difference_ci(treatment, control, level: float = 0.9, n_resamples: int = 4000, seed: int = 0):
    """``median(treatment) - median(control)`` with a percentile bootstrap interval, each arm
    resampled on its own (the engines' agents are independent draws, not pairs): how large a
    difference the sample can rule out, which the tests' p-values do not say."""
    rng = np.random.default_rng(seed)
    replicates = np.median(rng.choice(treatment, (n_resamples, len(treatment))), axis=1) - np.median(
        rng.choice(control, (n_resamples, len(control))), axis=1
    )
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return float(np.median(treatment) - np.median(control)), float(low), float(high)


if __name__ == "__main__":
    main()
