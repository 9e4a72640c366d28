"""Training throughput: env steps per second of SAC+ICM vs plain SB3 SAC on the same env.

Both agents use the phase defaults (nets [256, 256, 128], batch 256, one gradient step per env
step); ``learning_starts`` is small so the timed window is all learning. Each repeat builds both
agents, warms them up (untimed) and then times ``--steps`` further steps; the order of the two
alternates between repeats so drifting machine load hits both. Reported: median steps per CPU second
(process time; robust to other jobs on a shared machine) and per wall-clock second of each, and the
median of the per-repeat ratios.

    python benchmarks/train_throughput.py --steps 3000 --repeats 3 --threads 1

Uses ``ContinuousTradingEnv`` on the packaged S&P 500 bars when ``trading_rl.envs`` is importable,
else gymnasium's ``Pendulum-v1`` (and says so).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch
from stable_baselines3 import SAC

from trading_rl.algorithms.sac_icm.sac_icm import build_agent, sac_kwargs
from trading_rl.training.params import AgentParams


def make_env_factory():
    """(factory, description) for the real trading env on S&P 500, or a stand-in."""
    try:
        from trading_rl.data import load_prices
        from trading_rl.envs import EnvConfig, build_env_spec
        from trading_rl.features import (
            FeatureParams,
            apply_scaler,
            compute_features,
            fit_scaler,
            make_splits,
            split_frame,
        )
    except ImportError as error:
        import gymnasium as gym

        return (lambda: gym.make("Pendulum-v1")), f"Pendulum-v1 (trading env not importable: {error})"
    prices = load_prices("sp500")
    features = compute_features(prices, FeatureParams())
    splits = make_splits(features.index, {"train_fraction": 0.7, "validation_fraction": 0.15})
    scaled = apply_scaler(features, fit_scaler(split_frame(features, splits, "train")))
    spec = build_env_spec("sp500", prices, scaled, splits, EnvConfig(), 252.0)  # daily bars
    env = spec.make_env("train")
    description = (
        f"ContinuousTradingEnv, S&P 500 daily train split, observation {env.observation_space.shape}, "
        f"episode_length {spec.config.episode_length}"
    )
    return (lambda: spec.make_env("train", seed=0)), description


def steps_per_second(model, warmup: int, steps: int) -> tuple[float, float]:
    """(steps per CPU second of this process, steps per wall-clock second) after an untimed warm-up.

    CPU time is the number to compare on a shared machine: other jobs stretch wall time unevenly."""
    model.learn(warmup)
    wall, cpu = time.perf_counter(), time.process_time()
    model.learn(steps, reset_num_timesteps=False)
    return steps / (time.process_time() - cpu), steps / (time.perf_counter() - wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3000, help="timed env steps per run")
    parser.add_argument("--warmup", type=int, default=500, help="untimed env steps before timing")
    parser.add_argument("--learning-starts", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch.set_num_threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    make_env, description = make_env_factory()
    params = {"sac": {"learning_starts": args.learning_starts}}
    builders = {
        "sac": lambda seed: SAC(
            "MlpPolicy",
            make_env(),
            **sac_kwargs(AgentParams.from_mapping(params, "sac_icm.agent")),
            seed=seed,
            device="cpu",
        ),
        "sac_icm": lambda seed: build_agent(
            make_env(), AgentParams.from_mapping(params, "sac_icm.agent"), seed=seed, device="cpu"
        ),
    }
    cpu_rates: dict[str, list[float]] = {name: [] for name in builders}
    wall_rates: dict[str, list[float]] = {name: [] for name in builders}
    for repeat in range(args.repeats):
        order = list(builders) if repeat % 2 == 0 else list(reversed(builders))
        for name in order:
            cpu_rate, wall_rate = steps_per_second(builders[name](repeat), args.warmup, args.steps)
            cpu_rates[name].append(cpu_rate)
            wall_rates[name].append(wall_rate)
            print(f"repeat {repeat} {name:8s} {cpu_rate:8.1f} steps/CPU-s {wall_rate:8.1f} steps/wall-s", flush=True)

    print(f"env: {description}")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, steps {args.steps} (+{args.warmup} warm-up), repeats {args.repeats}"
    )
    for label, rates in (("CPU time", cpu_rates), ("wall time", wall_rates)):
        ratios = [icm / sac for icm, sac in zip(rates["sac_icm"], rates["sac"])]
        medians = ", ".join(f"{name} {statistics.median(r):.1f}" for name, r in rates.items())
        print(
            f"{label:9s}: median steps/s {medians}; SAC+ICM / SAC median ratio {statistics.median(ratios):.3f} "
            f"(per repeat: {', '.join(f'{r:.3f}' for r in ratios)})"
        )


if __name__ == "__main__":
    main()
