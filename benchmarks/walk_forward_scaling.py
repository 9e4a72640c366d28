"""Walk-forward speed-up with Ray workers vs the sequential engine, same results asserted.

    python benchmarks/walk_forward_scaling.py [--workers 2] [--seeds 4] [--timesteps 1000]

Runs one walk-forward (S&P 500 daily bars, project features with per-fold GARCH, SAC+ICM with small
nets) twice: on the sequential executor and on a local Ray with ``--workers`` CPUs, and checks that
the per-fold tables and every test step are identical. Reports wall-clock times, the time of each
wave of tasks (fold preparation, then one task per seed × retrain group), the serial remainder
(fold planning, recording metrics, building the tables) and the Amdahl prediction for N workers.
Ray's start-up (a one-off per process) is reported apart from the walk-forward itself; the Ray run
includes its workers' first imports of torch and SB3.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import pandas as pd

from trading_rl.data import load_prices
from trading_rl.envs import EnvConfig
from trading_rl.features.params import FeatureExtractionParams
from trading_rl.phases.walk_forward import WalkForwardJob, WalkForwardParams, run_walk_forward
from trading_rl.runtime import Executor, RayExecutor, SequentialExecutor, connect_ray
from trading_rl.training.params import AgentParams

AGENT = {
    "sac": {"learning_starts": 200, "batch_size": 64, "buffer_size": 20_000},
    "policy": {"net_arch": [64, 64]},
    "icm": {"warmup_steps": 200, "feature_dim": 16, "hidden_dim": 32},
}
# The feature_extraction section: conf/base's symbol and splits (data_end "validation" ends there).
FEATURES = {
    "symbols": ["sp500"],
    "splits": {"train_end": "2012-12-31", "validation_end": "2015-12-31"},
    "features": {},
    "scaler": {"method": "robust", "clip": 5.0},
}
ENV = {"window_size": 10, "episode_length": 250}


def cpu_timed(timed_fn, **kwargs):
    """``timed_fn(**kwargs)`` and the CPU seconds it took in its process."""
    start = time.process_time()
    result = timed_fn(**kwargs)
    return result, time.process_time() - start


class TimedExecutor(Executor):
    """Delegates to ``executor``; records each ``map`` (one per wave): task count, wall seconds and
    the tasks' CPU seconds (CPU / wall = the cores the wave actually got)."""

    def __init__(self, executor) -> None:
        self.executor = executor
        self.waves: list[tuple[int, float, float]] = []

    def share(self, value):
        return self.executor.share(value)

    def map(self, fn, kwargs_list, on_result=None, *, others_may_compute=False):
        start = time.perf_counter()
        timed = self.executor.map(
            cpu_timed, [{"timed_fn": fn, **kwargs} for kwargs in kwargs_list], others_may_compute=others_may_compute
        )
        self.waves.append((len(kwargs_list), time.perf_counter() - start, sum(cpu for _, cpu in timed)))
        results = [result for result, _ in timed]
        for index, result in enumerate(results if on_result is not None else []):
            on_result(index, result)
        return results


def run(executor, args) -> tuple[object, float, list[tuple[int, float]]]:
    params = {
        "train_length": 750,
        "test_length": 125,
        "step": 125,
        "max_folds": 4,
        "retrain_frequency": 2,
        "seeds": args.seeds,
        "agents": ["sac_icm"],
        "timesteps": args.timesteps,
        "finetune_timesteps": args.timesteps // 4,
        "device": "cpu",
        "agent_overrides": {},
    }
    prices = load_prices("sp500").loc["2008":]
    timed = TimedExecutor(executor)
    start = time.perf_counter()
    job = WalkForwardJob(
        FeatureExtractionParams.from_mapping(FEATURES),
        EnvConfig.from_mapping(ENV),
        {"sp500": 252.0},
        {"sac_icm": AgentParams.from_mapping(AGENT)},
        42,
    )
    result = run_walk_forward({"sp500": prices}, WalkForwardParams.from_mapping(params), job, timed)
    return result, time.perf_counter() - start, timed.waves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--timesteps", type=int, default=1000)
    args = parser.parse_args()

    sequential, t_seq, seq_waves = run(SequentialExecutor(), args)
    start = time.perf_counter()
    connect_ray(num_cpus=args.workers)
    t_ray_start = time.perf_counter() - start
    on_ray, t_ray, ray_waves = run(RayExecutor(), args)
    pd.testing.assert_frame_equal(on_ray.folds, sequential.folds, check_exact=True)
    pd.testing.assert_frame_equal(on_ray.returns, sequential.returns, check_exact=True)

    serial = t_seq - sum(seconds for _, seconds, _ in seq_waves)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"seeds {args.seeds}, timesteps {args.timesteps} (+{args.timesteps // 4} fine-tune)"
    )
    for name, waves in (("sequential", seq_waves), (f"ray x{args.workers}", ray_waves)):
        print(
            f"  {name:<12} waves: "
            + ", ".join(f"{n} tasks {s:.1f} s wall, {cpu:.1f} CPU-s ({cpu / s:.2f} cores)" for n, s, cpu in waves)
        )
    print(
        f"sequential: {t_seq:.1f} s   ray ({args.workers} workers): {t_ray:.1f} s   "
        f"(+ Ray start {t_ray_start:.1f} s, once per process)"
    )
    print(
        f"speed-up: {t_seq / t_ray:.2f}x  (with Ray start: {t_seq / (t_ray + t_ray_start):.2f}x)  -- results identical"
    )
    fraction = serial / t_seq
    print(f"serial fraction (planning, recording, tables): {serial:.2f} s = {fraction:.1%}")
    chains = seq_waves[-1][0]
    for workers in (2, 4, 8, 16):
        waves = math.ceil(chains / workers)
        predicted = serial + seq_waves[0][1] / min(workers, seq_waves[0][0]) + seq_waves[-1][1] * waves / chains
        amdahl = 1 / (fraction + (1 - fraction) / workers)
        print(
            f"  model N={workers:>2}: {t_seq / predicted:.2f}x (Amdahl bound {amdahl:.2f}x, "
            f"{chains} chain tasks in {waves} wave(s))"
        )


if __name__ == "__main__":
    main()
