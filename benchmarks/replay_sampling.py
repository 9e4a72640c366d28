"""Time to sample a batch from the HER buffer vs SB3's plain ReplayBuffer, in one run.

The HER buffer is the project's ``FastHerReplayBuffer`` (SB3's ``HerReplayBuffer`` with an O(batch)
``sample``); SB3's own ``HerReplayBuffer`` is timed alongside on the same transitions. All buffers
hold the same number of transitions of the options/HER phase's shape (observation =
env observation + option one-hot; HER adds the achieved/desired goal), in episodes of
``episode_length`` steps. HER uses the phase's settings (future strategy, 4 sampled goals) and
recomputes rewards through the goal view's vectorised ``compute_reward``.

    python benchmarks/replay_sampling.py [--transitions 100000] [--batch 256] [--repeats 300]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np
import torch
from stable_baselines3 import HerReplayBuffer
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.vec_env import DummyVecEnv

from trading_rl.algorithms.options_her.her import FastHerReplayBuffer, HerParams, goal_view, replay_buffer_kwargs
from trading_rl.algorithms.options_her.option_env import augmented_space
from trading_rl.algorithms.options_her.options import OPTION_NAMES
from trading_rl.data import load_prices
from trading_rl.envs import EnvConfig, build_env_spec
from trading_rl.features import FeatureParams, apply_scaler, compute_features, fit_scaler, make_splits


def _goal_vec_env(her: dict):
    prices = load_prices("sp500").iloc[:1200]
    features = compute_features(prices, FeatureParams(garch=None)).dropna()
    splits = make_splits(features.index, {"train_fraction": 0.6, "validation_fraction": 0.2})
    scaler = fit_scaler(features.loc[: splits["train"]["end"]])
    spec = build_env_spec(
        "sp500", prices.loc[features.index], apply_scaler(features, scaler), splits, EnvConfig(), 252.0
    )
    return DummyVecEnv([lambda: goal_view(spec.make_env("train"), her)])


def _fill(buffer, transitions: int, episode_length: int, make_obs, rng) -> None:
    for step in range(transitions):
        done = np.array([(step + 1) % episode_length == 0])
        buffer.add(make_obs(rng), make_obs(rng), rng.uniform(-1, 1, (1, 1)), rng.normal(size=1), done, [{}])


def _time_sampling(buffers: dict, batch: int, repeats: int) -> dict[str, float]:
    """Median ms per ``sample(batch)``; the buffers take turns so machine noise hits them alike."""
    times: dict[str, list[float]] = {name: [] for name in buffers}
    for repeat in range(repeats + 10):
        for name, buffer in buffers.items():
            start = time.perf_counter()
            buffer.sample(batch)
            if repeat >= 10:  # warm-up
                times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--episode-length", type=int, default=500)
    args = parser.parse_args()
    torch.set_num_threads(1)
    np.random.seed(0)
    rng = np.random.default_rng(0)

    her = HerParams()
    venv = _goal_vec_env(her)
    dict_space = augmented_space(venv.observation_space, len(OPTION_NAMES))
    box_space = dict_space["observation"]
    dim = box_space.shape[0]

    her_buffer = FastHerReplayBuffer(
        args.transitions, dict_space, venv.action_space, env=venv, **replay_buffer_kwargs(her)
    )
    sb3_her_buffer = HerReplayBuffer(
        args.transitions, dict_space, venv.action_space, env=venv, **replay_buffer_kwargs(her)
    )
    plain_buffer = ReplayBuffer(args.transitions, box_space, venv.action_space)

    def dict_obs(rng):
        return {
            "observation": rng.normal(size=(1, dim)).astype(np.float32),
            "achieved_goal": rng.normal(0, 0.02, (1, 1)).astype(np.float32),
            "desired_goal": rng.normal(0, 0.02, (1, 1)).astype(np.float32),
        }

    _fill(her_buffer, args.transitions, args.episode_length, dict_obs, np.random.default_rng(1))
    _fill(sb3_her_buffer, args.transitions, args.episode_length, dict_obs, np.random.default_rng(1))
    _fill(
        plain_buffer, args.transitions, args.episode_length, lambda r: r.normal(size=(1, dim)).astype(np.float32), rng
    )

    medians = _time_sampling(
        {"her": her_buffer, "sb3_her": sb3_her_buffer, "plain": plain_buffer}, args.batch, args.repeats
    )
    her_ms, sb3_her_ms, plain_ms = medians["her"], medians["sb3_her"], medians["plain"]
    print(f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch thread(s)")
    print(f"transitions {args.transitions}, batch {args.batch}, obs dim {dim}, median of {args.repeats} samples")
    print(f"FastHerReplayBuffer (future, k=4): {her_ms:.3f} ms")
    print(f"SB3 HerReplayBuffer (future, k=4): {sb3_her_ms:.3f} ms")
    print(f"SB3 ReplayBuffer                 : {plain_ms:.3f} ms")
    print(f"ratio HER / plain                : {her_ms / plain_ms:.2f}x (target <= 3x; gate < 10 ms)")
    print(f"ratio SB3 HER / plain            : {sb3_her_ms / plain_ms:.2f}x")


if __name__ == "__main__":
    main()
