"""Throughput (env steps per wall-clock second) of the V-trace actor-learner with 1 and 2 Ray
actors (and 2 with SAC's network sizes), and of its in-process mode, against SB3 SAC
(``build_agent`` with the ICM off) on the same env: the default ``ContinuousTradingEnv`` on the
S&P 500 daily training split.

V-trace rate: steady state, i.e. the env steps of every update after the first over the time
those updates took (the first update also waits for the actors' processes to start). Per update it
also reports the slowest actor's rollout time, the learner's update time and the whole iteration.
The scaling model (``docs/benchmarks.md``) takes its inputs from in-process timings of one actor's
rollouts and of learner updates on 1..16 trajectories, plus the Ray round trip measured here.
SAC rate: ``--sac-steps`` steps after an untimed warm-up, one gradient step per env step (its
defaults).

    python benchmarks/vtrace_throughput.py --vtrace-steps 20000 --sac-steps 500
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import statistics
import time

import numpy as np
import ray
import torch

from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.algorithms.vtrace.actor_critic import policy_weights
from trading_rl.algorithms.vtrace.actor_learner import PARAMS_PREFIX, VTraceLearner, VTraceParams, train_vtrace
from trading_rl.algorithms.vtrace.rollouts import RolloutWorker
from trading_rl.data import load_prices
from trading_rl.envs import EnvConfig, build_env_spec
from trading_rl.features import FeatureParams, apply_scaler, compute_features, fit_scaler, make_splits, split_frame
from trading_rl.training.params import AgentParams


def sp500_spec():
    prices = load_prices("sp500")
    features = compute_features(prices, FeatureParams())
    splits = make_splits(features.index, {"train_fraction": 0.7, "validation_fraction": 0.15})
    scaled = apply_scaler(features, fit_scaler(split_frame(features, splits, "train")))
    return build_env_spec("sp500", prices, scaled, splits, EnvConfig(), 252.0)  # daily bars


def vtrace_rates(spec, steps: int, workers: int, backend: str, **params) -> dict[str, float]:
    """Steady-state steps/s plus median actor (rollout) and learner (update) seconds per update."""
    _, history = train_vtrace(
        spec,
        VTraceParams.from_mapping({"total_timesteps": steps, **params}, PARAMS_PREFIX),
        seed=0,
        num_workers=workers,
        backend=backend,
    )
    steady = history[1:]
    seconds = sum(row["update_seconds"] for row in steady)
    steps_done = history[-1]["env_steps"] - history[0]["env_steps"]
    return {
        "steps_per_second": steps_done / seconds,
        "actor_seconds": statistics.median(row["collect_seconds"] for row in steady),
        "learner_seconds": statistics.median(row["learner_seconds"] for row in steady),
        "iteration_seconds": statistics.median(row["update_seconds"] for row in steady),
        "updates": len(history),
    }


def component_costs(spec, params: dict, repeats: int = 20) -> tuple[float, float, float]:
    """(actor seconds per env step, learner fixed seconds per update, learner seconds per batch
    step), timed in this process: rollouts of one actor, and updates on batches of N = 1..16
    trajectories with a least-squares line through the medians."""
    params = VTraceParams.from_mapping(params, PARAMS_PREFIX)
    worker = RolloutWorker(spec, params, seed=0)
    weights = policy_weights(worker.policy)
    trajectories = [worker.rollout(weights) for _ in range(16)]
    actor = statistics.median(worker.rollout(weights).collect_seconds for _ in range(repeats))
    learner = VTraceLearner(copy.deepcopy(worker.policy), params)
    sizes, medians = [1, 2, 4, 8, 16], []
    for size in sizes:
        timings = []
        for _ in range(repeats):
            started = time.perf_counter()
            learner.update(trajectories[:size])
            timings.append(time.perf_counter() - started)
        medians.append(statistics.median(timings))
    per_trajectory, fixed = np.polyfit(sizes, medians, 1)
    return actor / params.unroll_length, fixed, per_trajectory / params.unroll_length


def sac_rate(spec, steps: int, warmup: int) -> float:
    params = {"icm": {"enabled": False}, "sac": {"learning_starts": 100}}
    model = build_agent(
        spec.make_env("train", seed=0), AgentParams.from_mapping(params, "sac_icm.agent"), seed=0, device="cpu"
    )
    model.learn(warmup)
    started = time.perf_counter()
    model.learn(steps, reset_num_timesteps=False)
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vtrace-steps", type=int, default=20_000, help="env steps per V-trace run")
    parser.add_argument("--sac-steps", type=int, default=500, help="timed SAC env steps")
    parser.add_argument("--sac-warmup", type=int, default=300)
    parser.add_argument("--ray-cpus", type=int, default=2, help="CPUs of the local Ray")
    args = parser.parse_args()
    torch.set_num_threads(1)
    spec = sp500_spec()
    unroll = VTraceParams().unroll_length

    costs = component_costs(spec, {})
    results = {"in-process, 1 actor": vtrace_rates(spec, args.vtrace_steps, 1, "local")}
    ray.init(num_cpus=args.ray_cpus, include_dashboard=False, log_to_driver=False)
    try:
        for workers in (1, 2):
            results[f"Ray, {workers} actor(s)"] = vtrace_rates(spec, args.vtrace_steps, workers, "ray")
        results["Ray, 2 actor(s), SAC's nets [256, 256, 128]"] = vtrace_rates(
            spec, args.vtrace_steps, 2, "ray", net_arch=[256, 256, 128], activation="relu"
        )
    finally:
        ray.shutdown()
    sac = sac_rate(spec, args.sac_steps, args.sac_warmup)

    env = spec.make_env("train")
    print(f"env: ContinuousTradingEnv, S&P 500 train split, observation {env.observation_space.shape}")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
        f"torch {torch.__version__}, 1 torch thread per process; V-trace unroll {unroll}, "
        f"{args.vtrace_steps} steps per run; SAC {args.sac_steps} timed steps"
    )
    print("| run | env steps/s | × SAC | actor ms/rollout | learner ms/update | ms/iteration | overhead ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, row in results.items():
        # in-process the rollout and the update run one after the other; on Ray they overlap
        busy = (sum if name.startswith("in-process") else max)((row["actor_seconds"], row["learner_seconds"]))
        overhead = row["iteration_seconds"] - busy
        print(
            f"| V-trace, {name} | {row['steps_per_second']:,.0f} | {row['steps_per_second'] / sac:,.0f} | "
            f"{row['actor_seconds'] * 1e3:.1f} | {row['learner_seconds'] * 1e3:.1f} | "
            f"{row['iteration_seconds'] * 1e3:.1f} | {overhead * 1e3:.1f} |"
        )
    print(f"| SB3 SAC (ICM off, defaults) | {sac:,.1f} | 1 | | | | |")

    actor_per_step, learner_fixed, learner_per_step = costs
    one = results["Ray, 1 actor(s)"]
    round_trip = one["iteration_seconds"] - max(one["actor_seconds"], one["learner_seconds"])
    print(
        f"model inputs (T = {unroll}, in-process timings): actor {actor_per_step * 1e6:.0f} µs/step; learner "
        f"{learner_fixed * 1e3:.2f} ms + {learner_per_step * 1e6:.1f} µs per batch step (fit over N = 1..16); "
        f"Ray round trip {round_trip * 1e3:.1f} ms per iteration (1 actor)"
    )
    for workers in (1, 2, 4, 8, 16, 32):
        iteration = max(unroll * actor_per_step, learner_fixed + learner_per_step * workers * unroll) + round_trip
        print(f"  model, {workers:2d} actors on their own cores: {workers * unroll / iteration:,.0f} steps/s")


if __name__ == "__main__":
    main()
