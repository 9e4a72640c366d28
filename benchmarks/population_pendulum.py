"""Does the population learner learn? Pendulum-v1 returns of SB3 SAC runs and of population members
on the same budget, hyper-parameters and evaluation.

    python benchmarks/population_pendulum.py [--seeds 0 1 2 3 4 5] [--members 4] [--steps 3000]

Prints each SB3 seed's and each population member's mean return over ``EVAL_EPISODES`` deterministic
episodes (fixed reset seeds). SB3's band on this budget is what ``tests/algorithms/
test_population_sac.py::test_population_learns_pendulum`` holds every member to.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
from stable_baselines3 import SAC

from trading_rl.algorithms.population.population_sac import PopulationSAC
from trading_rl.runtime.engine import single_threaded

# Small nets and batch (the walk-forward's size) and SB3 zoo's Pendulum learning rate.
PENDULUM_SAC = {
    "policy_kwargs": {"net_arch": [64, 64]},
    "batch_size": 64,
    "learning_rate": 1e-3,
    "learning_starts": 200,
    "verbose": 0,
    "device": "cpu",
}
EVAL_EPISODES = 5


def pendulum_agent(seed: int) -> SAC:
    return SAC("MlpPolicy", gym.make("Pendulum-v1"), seed=seed, **PENDULUM_SAC)


def mean_return(model: SAC, episodes: int = EVAL_EPISODES) -> float:
    """Mean undiscounted return of deterministic actions over ``episodes`` seeded episodes."""
    env = gym.make("Pendulum-v1")
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + episode)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def population_returns(seeds: list[int], steps: int) -> list[float]:
    members = [pendulum_agent(seed) for seed in seeds]
    PopulationSAC(members).learn(steps).release()
    return [mean_return(member) for member in members]


def sb3_returns(seeds: list[int], steps: int) -> list[float]:
    return [mean_return(pendulum_agent(seed).learn(steps)) for seed in seeds]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    # One torch thread, as walk-forward tasks run: on a loaded 2-core machine two threads ran SB3's
    # small updates 30x slower in wall time.
    with single_threaded():
        sb3 = sb3_returns(args.seeds, args.steps)
        print(f"SB3 SAC, {args.steps} steps, seeds {args.seeds}: {np.round(sb3, 1).tolist()}", flush=True)
        population = population_returns(list(range(100, 100 + args.members)), args.steps)
        print(f"population of {args.members}, {args.steps} steps: {np.round(population, 1).tolist()}")


if __name__ == "__main__":
    main()
