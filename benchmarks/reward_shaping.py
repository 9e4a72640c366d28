"""Cost of the full reward shaper (objectives + weight network + potential + frozen ICM) vs the env step.

**As used in training** (the ``reward_shaper`` phase): SB3 SAC steps ``training.n_envs`` training
envs in a ``DummyVecEnv`` (each under ``Monitor``) and ``ShapedRewardVecEnv`` scores all of them in
one batched shaper call. Per env-step time of that vector env with the shaper vs the same vector env
alone, for several ``n_envs`` (the phase's default marked). The two step in turns, batch by batch,
on the same actions; best of ``--repeats``.

For reference, **one env behind the gymnasium wrapper** (``ShapedRewardWrapper``, for agents that
step a single env): time per step of the wrapped env vs the bare env.

Same S&P 500 daily bars and scaled features everywhere, the default env config, networks at the
phase's base sizes (weights and Φ hidden 128, ICM 128/64), pre-drawn random actions.

    python benchmarks/reward_shaping.py [--steps 20000] [--n-envs 1 16 64 128 256] [--repeats 3]
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
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

from trading_rl.algorithms.sac_icm.icm import IntrinsicCuriosityModule  # noqa: E402
from trading_rl.data import load_prices  # noqa: E402
from trading_rl.envs import ContinuousTradingEnv, EnvConfig  # noqa: E402
from trading_rl.features import FeatureParams, apply_scaler, compute_features, fit_scaler  # noqa: E402
from trading_rl.rewards import (  # noqa: E402
    ObjectiveParams,
    ObjectiveWeightNetwork,
    PotentialNetwork,
    RewardShaper,
    ShapedRewardVecEnv,
    ShapedRewardWrapper,
    context_indices,
)
from trading_rl.rewards.shaped_training import RewardShaperParams  # noqa: E402
from trading_rl.rewards.shaper import ShapingParams  # noqa: E402


def make_env(prices, features, seed):
    env = ContinuousTradingEnv(prices, features, EnvConfig())
    env.reset(seed=seed)
    return env


def make_shaper(layout, n_envs):
    torch.manual_seed(0)
    dim = len(context_indices(layout))
    weights, potential = ObjectiveWeightNetwork(dim, 128), PotentialNetwork(dim, 128)
    icm = IntrinsicCuriosityModule(layout.dim, 1)
    config = EnvConfig()  # the env make_env builds
    return RewardShaper(
        layout,
        n_envs,
        ObjectiveParams(),
        weight_network=weights,
        potential=potential,
        icm=icm,
        adaptation=ShapingParams(),
        periods_per_year=config.periods_per_year,
        hold_threshold=config.hold_threshold,
    )


def time_env_loop(env, actions) -> float:
    """Seconds per step of a gymnasium env, resetting at episode ends."""
    env.reset(seed=0)
    started = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return (time.perf_counter() - started) / len(actions)


def time_vec_pair(plain, shaped, actions) -> tuple[float, float]:
    """Seconds per env-step of two vector envs (they reset their envs themselves), stepped in turns
    on the same ``actions`` ``(steps, n, 1)`` so that machine noise hits both alike."""
    for venv in (plain, shaped):
        venv.seed(0)
        venv.reset()
    plain_time = shaped_time = 0.0
    for batch in actions:
        started = time.perf_counter()
        plain.step(batch)
        middle = time.perf_counter()
        shaped.step(batch)
        shaped_time += time.perf_counter() - middle
        plain_time += middle - started
    steps = actions[..., 0].size
    return plain_time / steps, shaped_time / steps


def vec_env(prices, features, n_envs):
    """The phase's training vector env: ``n_envs`` envs, each under SB3's ``Monitor``."""
    return DummyVecEnv([lambda i=i: Monitor(make_env(prices, features, i)) for i in range(n_envs)])


def best_of_alternating(timers: dict, repeats: int) -> dict[str, float]:
    """Best time of each timer, run in turns so machine noise hits them alike."""
    best = {name: float("inf") for name in timers}
    for _ in range(repeats):
        for name, timer in timers.items():
            best[name] = min(best[name], timer())
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per timing (all envs together)")
    parser.add_argument("--n-envs", type=int, nargs="+", default=[1, 16, 64, 128, 256])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    prices = load_prices("sp500")
    raw = compute_features(prices, FeatureParams(garch=None)).dropna()
    features = apply_scaler(raw, fit_scaler(raw))
    prices = prices.loc[features.index]
    layout = make_env(prices, features, 0).layout
    phase_n_envs = RewardShaperParams().training.n_envs

    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"observation dim {layout.dim}, context dim {len(context_indices(layout))}, {args.steps} env steps per timing"
    )
    print("as used in training: DummyVecEnv of n envs (Monitor) vs + ShapedRewardVecEnv (one shaper call per step)")
    for n_envs in sorted(set(args.n_envs) | {phase_n_envs}):
        actions = np.random.default_rng(n_envs).uniform(-1, 1, (max(args.steps // n_envs, 20), n_envs, 1))
        plain = vec_env(prices, features, n_envs)
        shaped = ShapedRewardVecEnv(vec_env(prices, features, n_envs), make_shaper(layout, n_envs))
        runs = [time_vec_pair(plain, shaped, actions) for _ in range(args.repeats)]
        best = {"env": min(run[0] for run in runs), "shaped": min(run[1] for run in runs)}
        added = best["shaped"] - best["env"]
        marker = "  <- reward_shaper.training.n_envs" if n_envs == phase_n_envs else ""
        print(
            f"  n_envs {n_envs:4d}: env step {best['env'] * 1e6:7.2f} us, shaped {best['shaped'] * 1e6:7.2f} us"
            f" per env-step; shaper adds {added * 1e6:7.2f} us = {added / best['env']:+6.0%}{marker}"
        )

    actions = np.random.default_rng(0).uniform(-1, 1, (args.steps, 1)).astype(np.float32)
    env = make_env(prices, features, 0)
    wrapped = ShapedRewardWrapper(make_env(prices, features, 0), make_shaper(layout, 1))
    best = best_of_alternating(
        {"env": lambda: time_env_loop(env, actions), "shaped": lambda: time_env_loop(wrapped, actions)}, args.repeats
    )
    added = best["shaped"] - best["env"]
    print("one env, gymnasium API: bare env vs ShapedRewardWrapper")
    print(
        f"  env step {best['env'] * 1e6:7.2f} us, shaped {best['shaped'] * 1e6:7.2f} us; "
        f"shaper adds {added * 1e6:7.2f} us = {added / best['env']:+6.0%}"
    )
    print("target: shaper adds <= +50% of the env step (as used in training); seeds' bound: < 1 ms per step")


if __name__ == "__main__":
    main()
