"""Cost of the full reward shaper (objectives + weight network + potential + frozen ICM) vs the env step.

Two ways the shaper runs:

- **per step, one env** (how the ``reward_shaper`` phase trains: SB3 SAC on one
  ``ShapedRewardWrapper``): time per step of the wrapped env minus the bare env;
- **batched over N envs** (``RewardShaper.step`` on a batch, as a vectorised collector would call it):
  time of one batched shaper call divided by N, next to the time of the N env steps it scores.

Same S&P 500 daily bars and scaled features for both, the default env config, networks at the phase's
base sizes (weights and Φ hidden 128, ICM 128/64), pre-drawn random actions, best of ``--repeats``.

    python benchmarks/reward_shaping.py [--steps 20000] [--batch 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

# One BLAS thread, as training runs (torch_threads: 1): on a shared 2-core machine OpenBLAS's two
# threads made a 256-row matrix product ten times slower.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from trading_rl.agents.icm import IntrinsicCuriosityModule  # noqa: E402
from trading_rl.data import load_prices  # noqa: E402
from trading_rl.envs import ContinuousTradingEnv  # noqa: E402
from trading_rl.features import apply_scaler, compute_features, fit_scaler  # noqa: E402
from trading_rl.rewards import (  # noqa: E402
    ObjectiveWeightNetwork,
    PotentialNetwork,
    RewardShaper,
    ShapedRewardWrapper,
    context_indices,
)


def make_env(prices, features, seed):
    env = ContinuousTradingEnv(prices, features)
    env.reset(seed=seed)
    return env


def make_shaper(layout, n_envs):
    torch.manual_seed(0)
    dim = len(context_indices(layout))
    weights, potential = ObjectiveWeightNetwork(dim, 128), PotentialNetwork(dim, 128)
    icm = IntrinsicCuriosityModule(layout.dim, 1)
    return RewardShaper(layout, n_envs, weight_network=weights, potential=potential, icm=icm)


def time_loop(env, actions) -> float:
    env.reset(seed=0)
    started = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return (time.perf_counter() - started) / len(actions)


def time_batched(envs, shaper, actions) -> tuple[float, float]:
    """(env seconds per env-step, shaper seconds per env-step) over ``actions`` ``(steps, n, 1)``."""
    n = len(envs)
    first = [env.reset(seed=i) for i, env in enumerate(envs)]
    shaper.reset(np.arange(n), np.stack([o for o, _ in first]), [info["equity"] for _, info in first])
    env_time = shaper_time = 0.0
    for batch in actions:
        started = time.perf_counter()
        results = [env.step(a) for env, a in zip(envs, batch)]
        stepped = time.perf_counter()
        shaper.step(np.stack([r[0] for r in results]), batch, [r[4] for r in results], [r[2] for r in results])
        shaper_time += time.perf_counter() - stepped
        env_time += stepped - started
        for row, (env, r) in enumerate(zip(envs, results)):
            if r[2] or r[3]:
                obs, info = env.reset()
                shaper.reset([row], obs[None], info["equity"])
    steps = actions.shape[0] * n
    return env_time / steps, shaper_time / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    prices = load_prices("sp500")
    raw = compute_features(prices, {"garch": None}).dropna()
    features = apply_scaler(raw, fit_scaler(raw))
    prices = prices.loc[features.index]
    actions = np.random.default_rng(0).uniform(-1, 1, (args.steps, 1)).astype(np.float32)

    env = make_env(prices, features, 0)
    wrapped = ShapedRewardWrapper(make_env(prices, features, 0), make_shaper(env.layout, 1))
    bare = min(time_loop(env, actions) for _ in range(args.repeats))
    shaped = min(time_loop(wrapped, actions) for _ in range(args.repeats))

    n = args.batch
    envs = [make_env(prices, features, i) for i in range(n)]
    batch_actions = np.random.default_rng(1).uniform(-1, 1, (max(args.steps // n, 20), n, 1))
    runs = [time_batched(envs, make_shaper(env.layout, n), batch_actions) for _ in range(args.repeats)]
    env_batched = min(r[0] for r in runs)
    shaper_batched = min(r[1] for r in runs)

    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"observation dim {env.layout.dim}, context dim {len(context_indices(env.layout))}")
    print(f"env step alone                      {bare * 1e6:9.2f} us/step")
    print(f"env + ShapedRewardWrapper (1 env)   {shaped * 1e6:9.2f} us/step")
    print(f"  shaper per step                   {(shaped - bare) * 1e6:9.2f} us  = {(shaped - bare) / bare:+.0%} of the env step")
    print(f"batched over {n} envs: env step    {env_batched * 1e6:9.2f} us/env-step")
    print(f"  shaper per env-step               {shaper_batched * 1e6:9.2f} us  = {shaper_batched / env_batched:+.0%} of the env step")
    print("target: shaper adds <= +50% of the env step; seeds' bound: < 1 ms per step")


if __name__ == "__main__":
    main()
