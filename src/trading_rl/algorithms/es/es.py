"""Evolution-strategy baseline (Salimans et al. 2017, "Evolution Strategies as a Scalable
Alternative to Reinforcement Learning") for the continuous trading env.

A small deterministic tanh MLP (observation → action in [-1, 1]) lives in one flat parameter
vector θ. Each generation draws ``population_size / 2`` Gaussian directions ε and scores the
antithetic pairs θ ± σε by their *fitness*: the return of the same training episodes (the sum of
env rewards, i.e. the log net return), the same episodes for every candidate so the pair
difference measures the direction and not the luck of the draw. Fitness is replaced by centred
ranks (robust to outliers, invariant to reward scale), the gradient estimate
``Σ_i rank_i ε_i / (n σ)`` is ascended with Adam, and a decoupled weight decay pulls θ towards 0.

Candidates are scored in parallel by a process pool (``num_workers`` processes, each holding its
own env built once from the spec); scoring is deterministic, so pooled and in-process runs give
identical results. The module stays numpy-only so pool workers start fast.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from gymnasium.spaces import flatdim

from trading_rl.config import Section, setting
from trading_rl.envs import EnvSpec
from trading_rl.seeding import SeedRole, seed_sequence

PARAMS_PREFIX = "es"


@dataclass(frozen=True, kw_only=True)
class EsParams(Section):
    """Sigma, learning rate and weight decay of docs/algorithms.md ("Evolution strategy"); a population of
    256 is a config value for long budgets (conf), 64 keeps a generation to seconds on a laptop."""

    generations: int = setting(50, interval="[1, inf)")
    population_size: int = setting(
        64, check=lambda n: None if n >= 2 and n % 2 == 0 else "an even integer >= 2 (antithetic pairs)"
    )
    sigma: float = setting(0.02, interval="(0, inf)")
    learning_rate: float = setting(0.01, interval="(0, inf)")
    weight_decay: float = setting(0.001, interval="[0, 1)")
    episodes_per_generation: int = setting(1, interval="[1, inf)")  # training episodes per candidate
    # empty: linear policy
    hidden_sizes: list[int] = setting(
        [16], check=lambda sizes: None if all(n >= 1 for n in sizes) else "a list of positive layer widths"
    )


class MLPPolicy:
    """Deterministic tanh MLP whose weights are slices of one flat vector (what ES perturbs)."""

    def __init__(self, obs_dim: int, action_dim: int, hidden_sizes: Sequence[int] = (16,)) -> None:
        self.sizes = [int(obs_dim), *map(int, hidden_sizes), int(action_dim)]
        self.shapes = [(n_out, n_in) for n_in, n_out in zip(self.sizes[:-1], self.sizes[1:])]
        self.n_params = sum(n_out * n_in + n_out for n_out, n_in in self.shapes)

    def layers(self, theta: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """``[(W, b), ...]`` as views into ``theta``."""
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta has shape {theta.shape}, this policy has {self.n_params} parameters")
        layers, offset = [], 0
        for n_out, n_in in self.shapes:
            weight = theta[offset : offset + n_out * n_in].reshape(n_out, n_in)
            offset += n_out * n_in
            layers.append((weight, theta[offset : offset + n_out]))
            offset += n_out
        return layers

    def initial_parameters(self, rng: np.random.Generator) -> np.ndarray:
        """Weights ~ N(0, 1/fan_in), biases 0: unit-scale pre-activations, so the first actions
        spread over [-1, 1] and across the hold threshold (an all-hold population has no gradient)."""
        theta = np.zeros(self.n_params)
        for weight, _ in self.layers(theta):
            weight[...] = rng.normal(0.0, 1.0 / math.sqrt(weight.shape[1]), weight.shape)
        return theta

    def act(self, theta_layers: list[tuple[np.ndarray, np.ndarray]], observation: np.ndarray) -> np.ndarray:
        hidden = np.asarray(observation, dtype=np.float64)
        for weight, bias in theta_layers:
            hidden = np.tanh(hidden @ weight.T + bias)
        return hidden


def centered_ranks(fitness: np.ndarray) -> np.ndarray:
    """Fitness shaping: ranks mapped linearly onto [-0.5, 0.5] (ties share their average rank), so
    the values sum to zero and only the order of the candidates matters."""
    fitness = np.asarray(fitness, dtype=np.float64)
    if fitness.size < 2:
        return np.zeros_like(fitness)
    # imported here: registering the pipelines (every kedro command) must not pay for it
    from scipy.stats import rankdata

    return (rankdata(fitness, method="average") - 1.0) / (fitness.size - 1) - 0.5


class Adam:
    """Adam for gradient *ascent* on a numpy vector (Kingma & Ba 2015)."""

    def __init__(
        self, n_params: int, learning_rate: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
    ) -> None:
        self.learning_rate, self.beta1, self.beta2, self.eps = learning_rate, beta1, beta2, eps
        self.m = np.zeros(n_params)
        self.v = np.zeros(n_params)
        self.t = 0

    def step(self, gradient: np.ndarray) -> np.ndarray:
        """The change to add to the parameters for this ascent ``gradient``."""
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * gradient
        self.v = self.beta2 * self.v + (1 - self.beta2) * gradient**2
        m_hat = self.m / (1 - self.beta1**self.t)
        v_hat = self.v / (1 - self.beta2**self.t)
        return self.learning_rate * m_hat / (np.sqrt(v_hat) + self.eps)


class EvolutionStrategy:
    """Ask/tell ES on a flat vector: ``ask()`` the population, score it, ``tell(fitness)``."""

    def __init__(
        self,
        theta: np.ndarray,
        population_size: int,
        sigma: float,
        learning_rate: float,
        weight_decay: float,
        seed: int | np.random.SeedSequence,
    ) -> None:
        if population_size < 2 or population_size % 2:
            raise ValueError(f"population_size must be an even integer >= 2, got {population_size}")
        self.theta = np.array(theta, dtype=np.float64)
        self.population_size, self.sigma, self.weight_decay = population_size, sigma, weight_decay
        self.optimizer = Adam(self.theta.size, learning_rate)
        self.rng = np.random.default_rng(seed)
        self.noise: np.ndarray | None = None

    def ask(self) -> np.ndarray:
        """``[θ + σε_1 … θ + σε_h, θ − σε_1 … θ − σε_h]`` with ``h = population_size / 2``."""
        self.noise = self.rng.standard_normal((self.population_size // 2, self.theta.size))
        directions = np.concatenate([self.noise, -self.noise])
        return self.theta + self.sigma * directions

    def tell(self, fitness: np.ndarray) -> dict[str, float]:
        """Update θ from the fitness of the last ``ask()``'s population (same order)."""
        if self.noise is None:
            raise RuntimeError("tell() needs the population of a previous ask()")
        fitness = np.asarray(fitness, dtype=np.float64)
        if fitness.shape != (self.population_size,):
            raise ValueError(f"fitness has shape {fitness.shape}, expected ({self.population_size},)")
        shaped = centered_ranks(fitness)
        half = self.population_size // 2
        gradient = (shaped[:half] - shaped[half:]) @ self.noise / (self.population_size * self.sigma)
        step = self.optimizer.step(gradient)
        self.theta = self.theta + step - self.optimizer.learning_rate * self.weight_decay * self.theta
        self.noise = None
        return {
            "mean_fitness": float(fitness.mean()),
            "max_fitness": float(fitness.max()),
            "std_fitness": float(fitness.std()),
            "gradient_norm": float(np.linalg.norm(gradient)),
            "step_norm": float(np.linalg.norm(step)),
        }


class FitnessEvaluator:
    """Scores parameter vectors by their return over given training episodes, on one env."""

    def __init__(self, spec: EnvSpec, hidden_sizes: Sequence[int]) -> None:
        self.env = spec.make_env("train")
        self.policy = MLPPolicy(flatdim(self.env.observation_space), flatdim(self.env.action_space), hidden_sizes)

    def episode_return(self, theta: np.ndarray, episode_seed: int) -> float:
        """Sum of env rewards of the episode that ``reset(seed=episode_seed)`` starts: its log net return."""
        layers = self.policy.layers(theta)
        observation, _ = self.env.reset(seed=int(episode_seed))
        total, done = 0.0, False
        while not done:
            observation, reward, terminated, truncated, _ = self.env.step(self.policy.act(layers, observation))
            total += float(reward)
            done = terminated or truncated
        return total

    def __call__(self, thetas: np.ndarray, episode_seeds: Sequence[int]) -> np.ndarray:
        return np.array([np.mean([self.episode_return(theta, s) for s in episode_seeds]) for theta in thetas])


_WORKER_EVALUATOR: FitnessEvaluator | None = None


def _start_worker(spec: EnvSpec, hidden_sizes: Sequence[int]) -> None:
    global _WORKER_EVALUATOR
    _WORKER_EVALUATOR = FitnessEvaluator(spec, hidden_sizes)


def _score_in_worker(thetas: np.ndarray, episode_seeds: Sequence[int]) -> np.ndarray:
    assert _WORKER_EVALUATOR is not None, "the pool's initializer _start_worker sets it"
    return _WORKER_EVALUATOR(thetas, episode_seeds)


def _worker_context() -> multiprocessing.context.BaseContext:
    """Workers forked from a fork server that imported only this module: no fork of a threaded
    parent (torch, Ray), no re-import of the caller's ``__main__``, and after the first pool a
    worker starts in milliseconds."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


def evaluate_population(
    thetas: np.ndarray,
    episode_seeds: Sequence[int],
    evaluator: FitnessEvaluator,
    pool: Executor | None,
    num_workers: int,
) -> np.ndarray:
    """Fitness of every row of ``thetas``: in this process, or split into ``num_workers`` chunks
    scored by the pool's workers (each chunk in order, so the results are the same)."""
    if pool is None:
        return evaluator(thetas, episode_seeds)
    chunks = np.array_split(thetas, num_workers)
    return np.concatenate(list(pool.map(_score_in_worker, chunks, [list(episode_seeds)] * len(chunks))))


class ESPolicy:
    """A trained ES policy behind SB3's ``predict`` (what walk-forward and rollouts call)."""

    def __init__(self, policy: MLPPolicy, theta: np.ndarray) -> None:
        self.policy = policy
        self.theta = np.array(theta, dtype=np.float64)
        self._layers = policy.layers(self.theta)

    def predict(self, observation, state=None, episode_start=None, deterministic: bool = True):
        """``(action, None)``; the policy is deterministic, so ``deterministic`` changes nothing."""
        action = self.policy.act(self._layers, observation).astype(np.float32)
        return action, None


def train_es(
    spec: EnvSpec,
    params: EsParams,
    seed: int,
    num_workers: int = 2,
    init_theta: np.ndarray | None = None,
) -> tuple[ESPolicy, list[dict[str, float]]]:
    """Train the ES policy on ``spec``'s training split; returns ``(policy, history)``.

    ``num_workers`` > 1 scores the population in that many processes; 1 scores it in this process
    (same numbers). ``init_theta`` continues from existing parameters (fine-tuning). One ``history``
    row per generation, with the unperturbed θ's fitness on the same episodes as ``center_fitness``.
    """
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
        raise ValueError(f"num_workers must be an integer >= 1, got {num_workers!r}")
    evaluator = FitnessEvaluator(spec, params.hidden_sizes)
    init_seed, noise_seed, episode_seed = seed_sequence(seed, SeedRole.EVOLUTION_STRATEGY).spawn(3)
    theta = (
        np.array(init_theta, dtype=np.float64)
        if init_theta is not None
        else evaluator.policy.initial_parameters(np.random.default_rng(init_seed))
    )
    strategy = EvolutionStrategy(
        theta, params.population_size, params.sigma, params.learning_rate, params.weight_decay, noise_seed
    )
    episode_rng = np.random.default_rng(episode_seed)
    history: list[dict[str, float]] = []
    pool = None
    if num_workers > 1:
        pool = ProcessPoolExecutor(
            num_workers,
            mp_context=_worker_context(),
            initializer=_start_worker,
            initargs=(spec, params.hidden_sizes),
        )
    try:
        for generation in range(params.generations):
            started = time.perf_counter()
            episode_seeds = episode_rng.integers(0, 2**31 - 1, params.episodes_per_generation).tolist()
            candidates = np.vstack([strategy.ask(), strategy.theta[None]])
            fitness = evaluate_population(candidates, episode_seeds, evaluator, pool, num_workers)
            stats = strategy.tell(fitness[:-1])
            history.append(
                {
                    "generation": generation,
                    "env_steps": (generation + 1) * len(candidates) * params.episodes_per_generation,
                    "center_fitness": float(fitness[-1]),
                    **stats,
                    "seconds": time.perf_counter() - started,
                }
            )
    finally:
        if pool is not None:
            pool.shutdown()
    return ESPolicy(evaluator.policy, strategy.theta), history


def train_es_agent(
    spec: EnvSpec, params: EsParams, seed: int, model: ESPolicy | None = None, num_workers: int = 2
) -> ESPolicy:
    """The ``es`` agent type: ``train_es``'s policy, fine-tuned from ``model``'s parameters when given."""
    policy, _ = train_es(spec, params, seed, num_workers, init_theta=model.theta if model is not None else None)
    return policy
