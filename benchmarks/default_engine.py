"""Which ``runtime.engine`` runs the default run's walk-forward fastest on this machine?

    python benchmarks/default_engine.py [--timesteps 5000] [--engines sequential ray population population-ray]

Runs ``run_walk_forward`` with the default run's own work — conf/base's ``walk_forward`` section
(its symbols, folds, seeds, agents, nets and ``agent_overrides``), features, env and ``sac_icm``
agent, on the packaged S&P 500 and NASDAQ bars — once per engine, in this process, through
``phases.walk_forward.population.make_executor`` (what the pipeline node calls). Only the budgets are
shrunk: ``--timesteps`` from scratch and a tenth of it per fine-tune (conf/base: 20,000 and 2,000),
so the ratio between engines is that of the full run as long as the updates dominate (past the
300 ``learning_starts``). Ray's start-up is timed apart (once per process) and reported with it.

Prints each engine's wall seconds, this process's CPU seconds (Ray's work runs in its workers, so
its CPU column is the driver's only) and the speed-up over the sequential engine; the fastest
engine is the one conf/base should name. Sequential and Ray give identical tables (asserted); the
population's are the same in distribution only (``population_walk_forward_ab.py``).
``population-ray`` is the population engine with ``runtime.population.workers: --workers`` (a
population per Ray worker; its tables equal ``population``'s, asserted).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmarks, run as a script
from learning_curve import load_parameters  # noqa: E402

from trading_rl.data import load_prices  # noqa: E402
from trading_rl.envs import EnvConfig  # noqa: E402
from trading_rl.features.params import FeatureExtractionParams  # noqa: E402
from trading_rl.phases.walk_forward import (  # noqa: E402
    WalkForwardJob,
    WalkForwardParams,
    run_walk_forward,  # noqa: E402
)
from trading_rl.phases.walk_forward.population import make_executor  # noqa: E402
from trading_rl.runtime import RuntimeParams, connect_ray  # noqa: E402
from trading_rl.training.params import AgentParams  # noqa: E402

ENGINES = ("sequential", "ray", "population", "population-ray")
SYMBOLS = ("sp500", "nasdaq")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timesteps", type=int, default=5000, help="from-scratch budget (conf/base: 20000)")
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="population-ray's workers")
    args = parser.parse_args()

    params = load_parameters("base")
    walk_forward = {**params["walk_forward"], "timesteps": args.timesteps, "finetune_timesteps": args.timesteps // 10}
    prices = {symbol: load_prices(symbol) for symbol in SYMBOLS}
    env_config = params["env_construction"]["env"]
    arguments = (
        prices,
        WalkForwardParams.from_mapping(walk_forward, "walk_forward"),
        WalkForwardJob(
            FeatureExtractionParams.from_mapping(params["feature_extraction"], "feature_extraction"),
            EnvConfig.from_mapping(env_config),
            dict.fromkeys(SYMBOLS, 252.0),
            {"sac_icm": AgentParams.from_mapping(params["sac_icm"]["agent"], "sac_icm.agent")},
            params["seed"],
        ),
    )
    print(
        f"# {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}; conf/base walk_forward ({len(SYMBOLS)} symbols, "
        f"{walk_forward['seeds']} seeds, {walk_forward['max_folds']} folds, agents {walk_forward['agents']}), "
        f"{args.timesteps} steps from scratch + {args.timesteps // 10} per fine-tune"
    )
    walls: dict[str, float] = {}
    tables: dict[str, pd.DataFrame] = {}
    ray_start = 0.0
    for engine in args.engines:
        on_ray = engine in ("ray", "population-ray")
        if on_ray and not ray_start:
            start = time.perf_counter()
            connect_ray()
            ray_start = time.perf_counter() - start
        runtime = {"engine": engine}
        if engine == "population-ray":
            runtime = {"engine": "population", "population": {"workers": args.workers}}
        executor = make_executor(RuntimeParams.from_mapping(runtime, "runtime"))
        wall, cpu = time.perf_counter(), time.process_time()
        tables[engine] = run_walk_forward(*arguments, executor=executor).folds
        walls[engine] = time.perf_counter() - wall
        extra = f" (+ {ray_start:.1f} s Ray start)" if on_ray else ""
        print(f"{engine}: {walls[engine]:.1f} s wall{extra}, {time.process_time() - cpu:.1f} CPU-s here", flush=True)
    if {"sequential", "ray"} <= set(tables):
        pd.testing.assert_frame_equal(tables["ray"], tables["sequential"], check_exact=True)
        print("sequential and ray tables identical")
    if {"population", "population-ray"} <= set(tables):
        pd.testing.assert_frame_equal(tables["population-ray"], tables["population"], check_exact=True)
        print("population and population-ray tables identical")
    with_start = {
        engine: wall + (ray_start if engine in ("ray", "population-ray") else 0.0) for engine, wall in walls.items()
    }
    reference = "sequential" if "sequential" in walls else next(iter(walls))
    print(f"| engine | wall s | speed-up over {reference} |")
    print("|---|---:|---:|")
    for engine, wall in with_start.items():
        print(f"| {engine} | {wall:.1f} | {with_start[reference] / wall:.2f}x |")
    print(f"fastest here: {min(with_start, key=with_start.__getitem__)} (load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
