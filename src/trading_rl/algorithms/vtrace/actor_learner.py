"""IMPALA-style actor-learner with V-trace (Espeholt et al. 2018) for the continuous trading env.

Actors (Ray actors, or the same class in-process) each own one training env and a copy of the
policy; they run ``unroll_length`` steps with the weights they were sent and return a
``Trajectory``. The learner stacks one trajectory per actor into a time-major batch, recomputes the
target policy's log-probabilities of the *same continuous actions*, corrects with V-trace and takes
one optimiser step (one backward through policy-gradient, value and entropy losses), then
broadcasts the new weights (one ``ray.put``, shared by every actor). The network is in
``actor_critic``, the actors' rollouts in ``rollouts``.

Schedule: the learner sends weights ``w_k`` for the next rollout *before* it updates on batch
``k``, so actors collect while the learner learns and every batch after the first is one update
behind the learner — the policy lag V-trace corrects. Each trajectory depends only on the weights
it was sent and its actor's own env and random state, never on timing, so Ray and in-process runs
give the same numbers for the same seed.

Policy: a Gaussian over the raw action with a state-independent learned log-std, *clipped* by the
env (``ContinuousTradingEnv`` clips any action to [-1, 1]). The action recorded is the sampled
value passed to ``env.step``; its density is a plain Gaussian density, so ``π/μ`` is exact and the
entropy has a closed form. (A tanh-squashed Gaussian would need the pre-squash value stored to keep
``atanh`` finite near ±1, for the same ratios.)

Episode ends: a terminal step gets discount 0. A time-limit truncation also gets discount 0 — the
next row of the trajectory is already the next episode — but its reward gets ``γ V(x_final)`` added
by the learner, so the time limit is not mistaken for the end of the world.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from gymnasium.spaces import flatdim
from torch import nn

from trading_rl.algorithms.vtrace.actor_critic import GaussianActorCritic, build_actor_critic, policy_weights
from trading_rl.algorithms.vtrace.rollouts import RolloutWorker, Trajectory
from trading_rl.algorithms.vtrace.vtrace import vtrace_from_importance_weights
from trading_rl.config import Section, layer_widths_problem, setting
from trading_rl.envs import EnvSpec
from trading_rl.runtime.engine import connect_ray
from trading_rl.seeding import SeedRole
from trading_rl.seeding import seeds as role_seeds
from trading_rl.training.device import resolve_device
from trading_rl.training.params import ACTIVATIONS

PARAMS_PREFIX = "vtrace"
BACKENDS = ("auto", "ray", "local")


@dataclass(frozen=True, kw_only=True)
class VTraceLearnerParams(Section):
    """Everything but the budget: ``walk_forward.vtrace`` (the walk-forward sets the budget)."""

    REFUSED = {"total_timesteps": "the walk-forward's budget is walk_forward.timesteps"}

    unroll_length: int = setting(64, interval="[1, inf)")  # T: steps per trajectory
    learning_rate: float = setting(3e-4, interval="(0, inf)")
    gamma: float = setting(0.99, interval="(0, 1]")
    # log returns per bar are ~1e-3; scaled so values and advantages are O(0.1)
    reward_scale: float = setting(100.0, interval="(0, inf)")
    entropy_coef: float = setting(1e-3, interval="[0, inf)")
    value_coef: float = setting(0.5, interval="[0, inf)")
    max_grad_norm: float = setting(1.0, interval="(0, inf)")
    # null: no clipping
    clip_rho_threshold: float | None = setting(1.0, interval="(0, inf)")
    clip_pg_rho_threshold: float | None = setting(1.0, interval="(0, inf)")
    clip_c_threshold: float | None = setting(1.0, interval="(0, inf)")
    net_arch: list[int] = setting([64, 64], check=layer_widths_problem)
    activation: str = setting("tanh", choices=tuple(ACTIVATIONS))
    initial_log_std: float = -0.5
    cpus_per_worker: float = setting(1.0, interval="(0, inf)")  # Ray CPUs reserved per actor

    def with_budget(self, total_timesteps: int) -> VTraceParams:
        """These settings with the walk-forward's budget: what ``train_vtrace`` takes."""
        return VTraceParams(**{f.name: getattr(self, f.name) for f in fields(self)}, total_timesteps=total_timesteps)


@dataclass(frozen=True, kw_only=True)
class VTraceParams(VTraceLearnerParams):
    REFUSED = {}

    total_timesteps: int = setting(50_000, interval="[1, inf)")  # env steps over all actors


# History keys that measure time rather than learning (they differ between otherwise identical runs).
TIMING_KEYS = ("collect_seconds", "learner_seconds", "wait_seconds", "update_seconds")


class VTraceLearner:
    """Adam on ``policy-gradient + value_coef·value − entropy_coef·entropy``, V-trace targets."""

    def __init__(self, model: GaussianActorCritic, params: VTraceParams, device: str = "cpu") -> None:
        self.params = params
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=float(self.params.learning_rate))

    def batch(self, trajectories: Sequence[Trajectory]) -> dict[str, torch.Tensor]:
        """Time-major tensors ``[T(+1), B, ...]`` with one column per trajectory; rewards scaled."""

        def stack(field: str, dtype=torch.float32) -> torch.Tensor:
            array = np.stack([getattr(trajectory, field) for trajectory in trajectories], axis=1)
            return torch.as_tensor(array, dtype=dtype, device=self.device)

        batch = {
            "observations": stack("observations"),
            "actions": stack("actions"),
            "rewards": stack("rewards") * float(self.params.reward_scale),
            "discounts": stack("discounts"),
            "behaviour_log_probs": stack("behaviour_log_probs"),
        }
        # A time limit is not a terminal state: bootstrap from the episode's final observation.
        columns = [np.full(len(tr.truncated_steps), b) for b, tr in enumerate(trajectories)]
        if sum(map(len, columns)):
            steps = torch.as_tensor(np.concatenate([tr.truncated_steps for tr in trajectories]), device=self.device)
            final = torch.as_tensor(
                np.concatenate([tr.truncated_observations for tr in trajectories]), device=self.device
            )
            with torch.no_grad():
                tail = float(self.params.gamma) * self.model.value(final)
            batch["rewards"][steps, torch.as_tensor(np.concatenate(columns), device=self.device)] += tail
        return batch

    def losses(self, batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        values_all = self.model.value(batch["observations"])
        values, bootstrap_value = values_all[:-1], values_all[-1].detach()
        observations = batch["observations"][:-1]
        target_log_probs = self.model.log_prob(observations, batch["actions"])
        # Ratios of the densities of the recorded continuous actions, target over behaviour.
        log_rhos = target_log_probs.detach() - batch["behaviour_log_probs"]
        targets = vtrace_from_importance_weights(
            log_rhos,
            batch["discounts"],
            batch["rewards"],
            values.detach(),
            bootstrap_value,
            clip_rho_threshold=self.params.clip_rho_threshold,
            clip_pg_rho_threshold=self.params.clip_pg_rho_threshold,
            clip_c_threshold=self.params.clip_c_threshold,
        )
        policy_loss = -(targets.pg_advantages * target_log_probs).mean()
        value_loss = 0.5 * (targets.vs - values).pow(2).mean()
        entropy = self.model.entropy()
        total = policy_loss + self.params.value_coef * value_loss - self.params.entropy_coef * entropy
        return {
            "total": total,
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "log_rhos": log_rhos,
            "vs": targets.vs,
        }

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """One optimiser step on the trajectories (one backward); returns the losses before the step."""
        losses = self.losses(self.batch(trajectories))
        self.optimizer.zero_grad(set_to_none=True)
        losses["total"].backward()
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), float(self.params.max_grad_norm))
        self.optimizer.step()
        rhos = losses["log_rhos"].exp()
        threshold = self.params.clip_rho_threshold
        return {
            "loss": losses["total"].detach().item(),
            "policy_loss": losses["policy_loss"].detach().item(),
            "value_loss": losses["value_loss"].detach().item(),
            "entropy": losses["entropy"].detach().item(),
            "grad_norm": float(grad_norm),
            "mean_rho": rhos.mean().item(),
            "clipped_rho_fraction": (rhos > threshold).float().mean().item() if threshold is not None else 0.0,
        }


class _LocalWorkers:
    """The actors in this process: a submitted rollout runs at once; its result is the handle."""

    def __init__(self, spec: EnvSpec, params: VTraceParams, seeds: Sequence[int]) -> None:
        self.workers = [RolloutWorker(spec, params, seed) for seed in seeds]

    def submit(self, weights: Mapping[str, np.ndarray]) -> list[Trajectory]:
        return [worker.rollout(weights) for worker in self.workers]

    @staticmethod
    def gather(handles: list[Trajectory]) -> list[Trajectory]:
        return handles

    def close(self) -> None:
        self.workers.clear()


class _RayWorkers:
    """One Ray actor per worker (one torch thread each); weights go out as one shared object."""

    def __init__(self, spec: EnvSpec, params: VTraceParams, seeds: Sequence[int]) -> None:
        import ray

        self.ray = ray
        needed = len(seeds) * float(params.cpus_per_worker)
        available = ray.cluster_resources().get("CPU", 0.0)
        if needed > available:  # the actors would wait for CPUs forever
            raise ValueError(
                f"{len(seeds)} actors × {PARAMS_PREFIX}.cpus_per_worker={params.cpus_per_worker} need {needed:g} "
                f"Ray CPUs, the cluster has {available:g}; use fewer workers or a smaller cpus_per_worker"
            )
        remote_worker = ray.remote(num_cpus=float(params.cpus_per_worker))(RolloutWorker)
        spec_ref = ray.put(spec)
        # Ray's stubs type a handle's methods as the plain methods; their ``.remote`` exists only at run time.
        self.actors: list[Any] = [remote_worker.remote(spec_ref, params, seed, 1) for seed in seeds]

    def submit(self, weights: Mapping[str, np.ndarray]) -> list:
        weights_ref = self.ray.put(dict(weights))
        return [actor.rollout.remote(weights_ref) for actor in self.actors]

    def gather(self, handles: list) -> list[Trajectory]:
        return self.ray.get(handles)

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors.clear()


def _use_ray(backend: str, ray_address: str | None) -> bool:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "auto":
        import ray

        return ray_address is not None or ray.is_initialized()
    return backend == "ray"


def train_vtrace(
    spec: EnvSpec,
    params: VTraceParams,
    seed: int,
    num_workers: int = 2,
    ray_address: str | None = None,
    backend: str = "auto",
    device: str = "cpu",
    init_model: GaussianActorCritic | None = None,
) -> tuple[GaussianActorCritic, list[dict[str, float]]]:
    """Train the actor-critic on ``spec``'s training split; returns ``(model on CPU, history)``.

    ``backend``: ``"ray"`` runs the actors as Ray actors (on the running Ray, else one started at
    ``ray_address``, ``None`` meaning this machine, by ``runtime.connect_ray``: it stays up for the
    rest of the process, as the walk-forward engine's does); ``"local"`` runs the same actors in this
    process; ``"auto"`` is Ray when an address is given or Ray is already running. Both give the
    same numbers for the same seed (with the learner on CPU). ``init_model`` continues from an
    existing network (fine-tuning; the optimiser starts fresh). One ``history`` row per update: losses,
    ratio statistics, returns of the episodes that ended, and timings (``collect_seconds``: slowest
    actor's rollout; ``wait_seconds``: learner blocked on the actors; ``learner_seconds``: the update;
    ``update_seconds``: the whole iteration, in-process rollouts included).
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be an integer >= 1, got {num_workers!r}")
    probe = spec.make_env("train")
    obs_dim = flatdim(probe.observation_space)
    action_dim = flatdim(probe.action_space)
    if init_model is not None:
        model = copy.deepcopy(init_model)
    else:
        model = build_actor_critic(obs_dim, action_dim, params, seed)
    learner = VTraceLearner(model, params, resolve_device(device))
    steps_per_update = params.unroll_length * num_workers
    n_updates = max(1, math.ceil(params.total_timesteps / steps_per_update))
    seeds = role_seeds(seed, SeedRole.VTRACE_ACTORS, num_workers)
    history: list[dict[str, float]] = []

    with contextlib.ExitStack() as stack:
        if _use_ray(backend, ray_address):
            connect_ray(ray_address)
            workers: _LocalWorkers | _RayWorkers = _RayWorkers(spec, params, seeds)
        else:
            workers = _LocalWorkers(spec, params, seeds)
        stack.callback(workers.close)
        pending = workers.submit(policy_weights(learner.model))
        for update in range(n_updates):
            iteration_started = time.perf_counter()
            trajectories = workers.gather(pending)
            waited = time.perf_counter() - iteration_started
            if update + 1 < n_updates:  # actors collect with these weights while the learner updates
                pending = workers.submit(policy_weights(learner.model))
            started = time.perf_counter()
            stats = learner.update(trajectories)
            episode_returns = [r for trajectory in trajectories for r in trajectory.episode_returns]
            history.append(
                {
                    "update": update,
                    "env_steps": (update + 1) * steps_per_update,
                    **stats,
                    "episodes": len(episode_returns),
                    "mean_episode_return": float(np.mean(episode_returns)) if episode_returns else math.nan,
                    "collect_seconds": max(trajectory.collect_seconds for trajectory in trajectories),
                    "learner_seconds": time.perf_counter() - started,
                    "wait_seconds": waited,
                    "update_seconds": time.perf_counter() - iteration_started,
                }
            )
    return learner.model.cpu(), history


class VTraceAgent:
    """A trained actor-critic behind SB3's ``predict`` (what walk-forward and rollouts call)."""

    def __init__(self, model: GaussianActorCritic, seed: int = 0) -> None:
        self.model = model.cpu().eval()
        self.rng = np.random.default_rng(seed)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        """``(action, None)``: the Gaussian's mean (or a sample) clipped to [-1, 1], as the env trades it.

        ``observation`` is one observation or a batch; the action has the matching leading shape."""
        obs = np.asarray(observation, dtype=np.float32)
        single = obs.ndim == 1
        with torch.no_grad():
            action = self.model.mean(torch.from_numpy(obs.reshape(-1, obs.shape[-1]))).numpy()
            if not deterministic:
                action = action + self.model.log_std.exp().numpy() * self.rng.standard_normal(action.shape)
        action = np.clip(action, -1.0, 1.0).astype(np.float32)
        return (action[0] if single else action), None


def train_vtrace_agent(
    spec: EnvSpec,
    params: VTraceParams,
    seed: int,
    model: VTraceAgent | None = None,
    num_workers: int = 2,
    device: str = "cpu",
) -> VTraceAgent:
    """The ``vtrace`` agent type: ``train_vtrace`` with the automatic back-end (Ray when it runs,
    in-process otherwise; same result), fine-tuning ``model`` when given. ``params.total_timesteps``
    is the budget."""
    policy, _ = train_vtrace(
        spec, params, seed, num_workers, device=device, init_model=model.model if model is not None else None
    )
    return VTraceAgent(policy, seed)
