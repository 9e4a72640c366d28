"""Evolution strategy: antithetic sampling, rank shaping, Adam, weight decay, pooled = in-process."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.options_her_env import small_spec

from trading_rl.algorithms.es import es
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode


def make_strategy(n_params=6, population_size=10, seed=0, **overrides):
    settings = {"sigma": 0.1, "learning_rate": 0.05, "weight_decay": 0.0, **overrides}
    theta = np.random.default_rng(seed + 100).normal(size=n_params)
    return es.EvolutionStrategy(theta, population_size, seed=seed, **settings)


def test_population_is_antithetic_pairs_around_theta():
    strategy = make_strategy()
    population = strategy.ask()
    half = len(population) // 2
    pair_sums = population[:half] + population[half:]
    np.testing.assert_allclose(pair_sums, np.tile(2 * strategy.theta, (half, 1)), atol=1e-12)
    np.testing.assert_allclose((population[:half] - strategy.theta) / strategy.sigma, strategy.noise, atol=1e-12)
    assert not np.allclose(population[0], population[1])


@pytest.mark.parametrize("fitness", [[3.0, -1.0, 2.0, 2.0, 10.0, -1.0, 0.5], list(range(12)), [0.0] * 6])
def test_centered_ranks_sum_to_zero_and_follow_the_order(fitness):
    fitness = np.asarray(fitness)
    shaped = es.centered_ranks(fitness)
    # brute force: 0-based average rank = (number below) + (number of ties other than itself) / 2
    below = (fitness[None, :] < fitness[:, None]).sum(1)
    ties = (fitness[None, :] == fitness[:, None]).sum(1) - 1
    np.testing.assert_allclose(shaped, (below + ties / 2) / (len(fitness) - 1) - 0.5, atol=1e-12)
    assert abs(shaped.sum()) < 1e-12
    assert shaped.min() >= -0.5 and shaped.max() <= 0.5


def test_adam_matches_torch_adam_ascending():
    rng = np.random.default_rng(0)
    theta = rng.normal(size=5)
    reference = torch.nn.Parameter(torch.tensor(theta))
    optimizer = torch.optim.Adam([reference], lr=0.03, maximize=True)
    adam = es.Adam(5, learning_rate=0.03)
    for _ in range(4):
        gradient = rng.normal(size=5)
        theta = theta + adam.step(gradient)
        reference.grad = torch.tensor(gradient)
        optimizer.step()
    np.testing.assert_allclose(theta, reference.detach().numpy(), atol=1e-12)


def test_es_climbs_a_toy_quadratic():
    optimum = np.linspace(-1.0, 1.0, 20)
    strategy = es.EvolutionStrategy(np.zeros(20), 40, sigma=0.1, learning_rate=0.05, weight_decay=0.0, seed=1)
    fitness = lambda thetas: -((thetas - optimum) ** 2).sum(axis=1)  # noqa: E731
    start = np.linalg.norm(strategy.theta - optimum)
    for _ in range(150):
        strategy.tell(fitness(strategy.ask()))
    assert np.linalg.norm(strategy.theta - optimum) < 0.1 * start


def test_uninformative_fitness_only_decays_the_weights():
    strategy = make_strategy(weight_decay=0.01)
    theta = strategy.theta.copy()
    strategy.ask()
    stats = strategy.tell(np.ones(strategy.population_size))  # all tied: shaped fitness 0, no gradient
    assert stats["gradient_norm"] == 0.0
    np.testing.assert_allclose(strategy.theta, theta * (1 - 0.05 * 0.01), rtol=1e-12)


def test_parameters_are_validated_by_key():
    with pytest.raises(ValueError, match=r"es\.population_size"):
        es.EsParams.from_mapping({"population_size": 7}, es.PARAMS_PREFIX)
    with pytest.raises(ValueError, match=r"es\.sigmaa"):
        es.EsParams.from_mapping({"sigmaa": 0.1}, es.PARAMS_PREFIX)


@pytest.fixture(scope="module")
def spec():
    return small_spec(n_bars=700, episode_length=40)


SMALL_ES = es.EsParams(generations=3, population_size=8, hidden_sizes=[8])


def test_fitness_is_the_log_net_return_of_the_episode(spec):
    policy, history = es.train_es(spec, SMALL_ES, seed=2, num_workers=1)
    evaluator = es.FitnessEvaluator(spec, SMALL_ES.hidden_sizes)
    env = spec.make_env("train")
    rollout = run_episode(env, policy_from_sb3(policy), seed=5)
    assert evaluator.episode_return(policy.theta, 5) == pytest.approx(np.log1p(rollout["return"]).sum(), abs=1e-9)
    assert len(history) == 3 and all(np.isfinite(row["center_fitness"]) for row in history)
    action, state = policy.predict(env.reset(seed=0)[0])
    assert state is None and action.shape == (1,) and -1 <= action[0] <= 1


@pytest.mark.slow
def test_pooled_and_in_process_evaluation_give_identical_training(spec):
    sequential_policy, sequential = es.train_es(spec, SMALL_ES, seed=4, num_workers=1)
    pooled_policy, pooled = es.train_es(spec, SMALL_ES, seed=4, num_workers=2)
    np.testing.assert_array_equal(sequential_policy.theta, pooled_policy.theta)
    strip = lambda history: [{k: v for k, v in row.items() if k != "seconds"} for row in history]  # noqa: E731
    assert strip(sequential) == strip(pooled)
    assert not np.array_equal(sequential_policy.theta, es.train_es(spec, SMALL_ES, seed=5, num_workers=1)[0].theta)
