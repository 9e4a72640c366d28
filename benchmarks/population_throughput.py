"""Agent-updates per second of the population SAC learner against N sequential SB3 SAC runs.

    python benchmarks/population_throughput.py [--sizes 1 4 16 64] [--updates 30] [--threads 1]
        [--net 64 64] [--batch 64] [--obs-dim 265] [--end-to-end 4 16] [--e2e-steps 300] [--e2e-device cuda]

Gradient updates (``train``): for each N, N members with replay buffers pre-filled with random
transitions of the walk-forward's shapes (observation of 265 floats as the trading env's window of
26 features × 10 bars plus position state, one action; nets and batch of
``walk_forward.agent_overrides``: [64, 64], 64). Sequential: each of N SB3 ``SAC`` models runs
``SAC.train(updates, 64)`` in turn. Population: one ``PopulationSAC.train(updates, 64)`` over the N.
Both on every device present (CPU always, CUDA when available), in the same process; reported as
agent-updates/s (N × updates / seconds; CPU seconds on CPU, wall seconds with a synchronised device
on CUDA) and the ratio to the sequential runs.

End to end (``--end-to-end N ...``): N walk-forward agents (``build_agent`` with the
``agent_overrides``, plain SAC and SAC+ICM) on the real ``ContinuousTradingEnv`` (S&P 500 train split),
``learn(e2e_steps)`` after ``learning_starts`` as one population and as N sequential SB3 runs: env
steps, action selection, replay and the ICM updates included (the population batches all of them:
one ``BatchedTradingEnv`` step, one forward of the stacked actors, the stacked replay on the device).

The end-to-end rows name the agents they built (net_arch, observation, ICM sizes): they follow the
walk-forward's base, not ``--net``/``--obs-dim``.

On a GPU, one command gives all three ratios at N = 64 against sequential SB3 on the same GPU:
``PYTHONPATH=src python benchmarks/population_throughput.py --sizes 64 --updates 20 --end-to-end 64
--e2e-steps 100 --e2e-device cuda`` (its CPU rows come first, then the CUDA update rows, then end to
end); ``--e2e-device cuda`` without a CUDA device is refused, since SB3 would quietly use the CPU.

The physical reference: matmul FLOPs of one SAC update (``update_flops``: forward and backward of the
actor and the twin critics as SB3's step computes them) × agent-updates/s, against the device's
measured float32 matmul rate (a 1024² × 1024² product).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3 import SAC
from stable_baselines3.common.env_util import make_vec_env

from trading_rl.algorithms.population.population_sac import PopulationSAC
from trading_rl.training.params import AgentParams
from trading_rl.training.sb3_logging import quiet_logger

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmarks, run as a script


def _make_spaces_env(obs_dim: int):
    import gymnasium as gym

    class Shapes(gym.Env):
        observation_space = spaces.Box(-5.0, 5.0, (obs_dim,), np.float32)
        action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

        def reset(self, *, seed=None, options=None):
            return np.zeros(obs_dim, np.float32), {}

        def step(self, action):
            return np.zeros(obs_dim, np.float32), 0.0, False, False, {}

    return make_vec_env(Shapes, n_envs=1)


def filled_agent(env, net: list[int], batch: int, seed: int, device: str, transitions: int = 2000) -> SAC:
    model = SAC(
        "MlpPolicy",
        env,
        policy_kwargs={"net_arch": net},
        batch_size=batch,
        buffer_size=transitions,
        seed=seed,
        device=device,
        verbose=0,
    )
    model.set_logger(quiet_logger(0))  # what `train` records into, without a tempdir folder
    rng = np.random.default_rng(seed)
    obs_dim = env.observation_space.shape[0]
    for _ in range(transitions):
        model.replay_buffer.add(
            rng.normal(size=(1, obs_dim)).astype(np.float32),
            rng.normal(size=(1, obs_dim)).astype(np.float32),
            rng.uniform(-1, 1, size=(1, 1)).astype(np.float32),
            rng.normal(size=1).astype(np.float32) * 1e-2,
            np.zeros(1),
            [{}],
        )
    return model


def update_flops(obs_dim: int, action_dim: int, net: list[int], batch: int, n_critics: int = 2) -> float:
    """Matmul FLOPs of one SB3 SAC update: actor forward on s (and its backward, 2×), actor forward
    on s' (no grad), target critics on s', critics on (s, a) with backward (3×), critics on (s, π(s))
    with the backward to the actions (2×)."""

    def mlp(inputs: int, outputs: int) -> float:
        sizes = [inputs, *net, outputs]
        return sum(2.0 * batch * a * b for a, b in zip(sizes, sizes[1:]))

    actor = mlp(obs_dim, 2 * action_dim)  # mean and log-std heads
    critic = n_critics * mlp(obs_dim + action_dim, 1)
    return 3 * actor + actor + critic + 3 * critic + 2 * critic


def matmul_peak(device: str, size: int = 1024, repeats: int = 10) -> float:
    """Measured float32 matmul FLOP/s on ``device`` (best of ``repeats``)."""
    a = th.randn(size, size, device=device)
    b = th.randn(size, size, device=device)
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        a @ b
        _sync(device)
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        th.cuda.synchronize()


def _timed(device: str, work) -> float:
    """Seconds of ``work()``: this process's CPU time on CPU (robust to other jobs), wall time with
    a synchronised device on CUDA."""
    _sync(device)
    clock = time.process_time if device == "cpu" else time.perf_counter
    start = clock()
    work()
    _sync(device)
    return clock() - start


def measure_updates(device: str, n: int, updates: int, net: list[int], batch: int, obs_dim: int) -> tuple[float, float]:
    """(sequential, population) agent-updates/s for ``n`` members."""
    env = _make_spaces_env(obs_dim)
    members = [filled_agent(env, net, batch, seed, device) for seed in range(n)]
    for member in members:  # warm-up: first-call allocations, Adam state
        member.train(2, batch)
    sequential = _timed(device, lambda: [member.train(updates, batch) for member in members])
    population = PopulationSAC(members)
    population.train(2, batch)
    batched = _timed(device, lambda: population.train(updates, batch))
    population.release()
    return n * updates / sequential, n * updates / batched


def measure_end_to_end(n: int, steps: int, icm: bool, device: str = "cpu") -> tuple[float, float, str]:
    """(sequential, population) env steps with updates per second (CPU seconds on CPU, wall seconds
    on CUDA) and the agents' shapes: N walk-forward agents (``build_agent`` with
    ``walk_forward.agent_overrides``, ICM on or off) on the trading env, their networks on ``device``."""
    from train_throughput import make_env_factory

    from trading_rl.algorithms.sac_icm.sac_icm import build_agent
    from trading_rl.phases.walk_forward import WalkForwardParams

    make_env, _ = make_env_factory()
    params = {section: dict(values) for section, values in WalkForwardParams().agent_overrides.items()}
    params["icm"] = {**params.get("icm", {}), "enabled": icm}
    members = [
        build_agent(make_env(), AgentParams.from_mapping(params, "sac_icm.agent"), seed=seed, device=device)
        for seed in range(n)
    ]
    learning_starts = members[0].learning_starts
    for member in members:
        member.learn(learning_starts + 20)
    sequential = _timed(device, lambda: [m.learn(steps, reset_num_timesteps=False) for m in members])
    population = PopulationSAC(members)
    population.learn(10, reset_num_timesteps=False)
    batched = _timed(device, lambda: population.learn(steps, reset_num_timesteps=False))
    population.release()
    lead = members[0]
    shapes = f"net_arch {lead.policy.net_arch}, observation {lead.observation_space.shape}, batch {lead.batch_size}"
    if lead.icm is not None:
        shapes += f", ICM hidden {lead.icm.config.hidden_dim} / features {lead.icm.config.feature_dim}"
    return n * steps / sequential, n * steps / batched, shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--updates", type=int, default=30, help="timed gradient updates per member")
    parser.add_argument("--net", type=int, nargs="+", default=[64, 64])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--obs-dim", type=int, default=265)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (walk-forward tasks run with 1)")
    parser.add_argument("--end-to-end", type=int, nargs="*", default=[], help="member counts of env-stepping runs")
    parser.add_argument("--e2e-steps", type=int, default=300)
    parser.add_argument("--e2e-device", default="cpu", help="where the end-to-end members' networks live (cpu, cuda)")
    args = parser.parse_args()
    if args.e2e_device.startswith("cuda") and not th.cuda.is_available():
        # SB3 would fall back to the CPU without a word and the rows would be labelled cuda.
        parser.error(f"--e2e-device {args.e2e_device}: torch {th.__version__} sees no CUDA device")
    th.set_num_threads(args.threads)

    devices = ["cpu"] + (["cuda"] if th.cuda.is_available() else [])
    print(
        f"# {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}, torch {th.__version__}, {args.threads} thread(s)"
    )
    flops = update_flops(args.obs_dim, 1, args.net, args.batch)
    print(f"# nets {args.net}, batch {args.batch}, observation {args.obs_dim}; {flops / 1e6:.2f} MFLOP per update")
    for device in devices:
        peak = matmul_peak(device)
        label = th.cuda.get_device_name() if device == "cuda" else "CPU"
        print(f"\n## {label}: measured matmul peak {peak / 1e9:.1f} GFLOP/s")
        print("| N | sequential SB3 updates/s | population updates/s | ratio | population share of peak |")
        print("|---:|---:|---:|---:|---:|")
        for n in args.sizes:
            sequential, population = measure_updates(device, n, args.updates, args.net, args.batch, args.obs_dim)
            print(
                f"| {n} | {sequential:.0f} | {population:.0f} | {population / sequential:.2f} | "
                f"{population * flops / peak:.2%} |",
                flush=True,
            )
    for n in args.end_to_end:
        for icm in (False, True):
            sequential, population, shapes = measure_end_to_end(n, args.e2e_steps, icm, args.e2e_device)
            print(
                f"\n## End to end on the trading env, N = {n}, {'SAC+ICM' if icm else 'SAC'}, "
                f"{args.e2e_steps} steps each (networks on {args.e2e_device}, one process; {shapes})"
            )
            seconds = "CPU-s" if args.e2e_device == "cpu" else "s"
            print(
                f"sequential {sequential:.0f} agent-steps/{seconds}, population {population:.0f}, "
                f"ratio {population / sequential:.2f}",
                flush=True,
            )
    print(f"\n# load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
