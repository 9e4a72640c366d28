"""V-trace actor-learner: continuous-action ratios, one-backward updates, Ray = in-process."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch
from helpers.options_her_env import small_spec
from scipy.stats import norm

from trading_rl.algorithms.vtrace import actor_critic, rollouts
from trading_rl.algorithms.vtrace import actor_learner as al
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode

SMALL = al.VTraceParams(unroll_length=32, net_arch=[32, 32], total_timesteps=256, learning_rate=1e-3)


@pytest.fixture(scope="module")
def spec():
    return small_spec(n_bars=700, episode_length=40)


@pytest.fixture(scope="module")
def params():
    return SMALL


def make_model(spec, params, seed=0):
    env = spec.make_env("train")
    return actor_critic.build_actor_critic(env.observation_space.shape[0], 1, params, seed)


def test_log_rhos_are_exactly_zero_when_behaviour_is_the_target(spec, params):
    model = make_model(spec, params)
    learner = al.VTraceLearner(model, params)
    rng = np.random.default_rng(0)
    obs = torch.as_tensor(rng.normal(size=(6, 3, model.mean_net[0].in_features)), dtype=torch.float32)
    actions = torch.as_tensor(rng.normal(0.0, 0.7, size=(5, 3, 1)), dtype=torch.float32)
    with torch.no_grad():
        behaviour = model.log_prob(obs[:-1], actions)
    batch = {
        "observations": obs,
        "actions": actions,
        "rewards": torch.zeros(5, 3),
        "discounts": torch.full((5, 3), 0.99),
        "behaviour_log_probs": behaviour,
    }
    assert torch.equal(learner.losses(batch)["log_rhos"], torch.zeros(5, 3))


def test_log_rhos_are_gaussian_density_ratios_of_the_continuous_actions(spec, params):
    """Behaviour = a shifted, wider copy of the target; ratios must be the Gaussian densities of the
    exact recorded actions (a discretised or squashed action would give different numbers)."""
    target = make_model(spec, params)
    behaviour = copy.deepcopy(target)
    with torch.no_grad():
        behaviour.mean_net[-1].bias += 0.3
        behaviour.log_std += 0.4
    worker = rollouts.RolloutWorker(spec, params, seed=3)
    trajectory = worker.rollout(actor_critic.policy_weights(behaviour))
    assert np.any(np.abs(trajectory.actions - np.round(trajectory.actions)) > 0.05)

    log_rhos = al.VTraceLearner(target, params).losses(al.VTraceLearner(target, params).batch([trajectory]))["log_rhos"]
    obs = torch.from_numpy(trajectory.observations[:-1])
    with torch.no_grad():
        target_mean = target.mean(obs).numpy()[:, 0].astype(np.float64)
        behaviour_mean = behaviour.mean(obs).numpy()[:, 0].astype(np.float64)
    actions = trajectory.actions[:, 0].astype(np.float64)
    expected = norm.logpdf(actions, target_mean, np.exp(target.log_std.detach().item())) - norm.logpdf(
        actions, behaviour_mean, np.exp(behaviour.log_std.detach().item())
    )
    np.testing.assert_allclose(log_rhos[:, 0].numpy(), expected, atol=1e-4)
    assert np.abs(expected).max() > 0.1

    # the same weights on both sides: only float rounding (batch-1 vs batched forward) remains
    same = rollouts.RolloutWorker(spec, params, seed=3).rollout(actor_critic.policy_weights(target))
    on_policy = al.VTraceLearner(target, params).losses(al.VTraceLearner(target, params).batch([same]))["log_rhos"]
    assert on_policy.abs().max().item() < 1e-5


def test_one_update_is_one_backward_and_decreases_the_value_loss_on_a_fixed_batch(spec, params, monkeypatch):
    model = make_model(spec, params)
    trajectories = [
        rollouts.RolloutWorker(spec, params, seed=s).rollout(actor_critic.policy_weights(model)) for s in (1, 2)
    ]
    learner = al.VTraceLearner(model, params)
    batch = learner.batch(trajectories)
    targets = learner.losses(batch)["vs"]

    def value_loss():
        with torch.no_grad():
            return 0.5 * (targets - model.value(batch["observations"][:-1])).pow(2).mean().item()

    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    loss_before = value_loss()
    calls = []
    backward = torch.autograd.backward
    monkeypatch.setattr(torch.autograd, "backward", lambda *a, **k: calls.append(1) or backward(*a, **k))
    stats = learner.update(trajectories)
    assert len(calls) == 1
    assert value_loss() < loss_before
    assert stats["value_loss"] == pytest.approx(loss_before, rel=1e-5)
    for name, parameter in model.named_parameters():  # policy, log-std and value all learn from it
        assert not torch.equal(parameter, before[name]), name


def test_a_time_limit_bootstraps_from_the_final_observation(spec, params):
    model = make_model(spec, params)
    worker = rollouts.RolloutWorker(spec, params, seed=0)
    weights = actor_critic.policy_weights(model)
    trajectory = worker.rollout(weights)
    while not len(trajectory.truncated_steps):  # episodes are 40 steps; one ends within two unrolls
        trajectory = worker.rollout(weights)
    step = int(trajectory.truncated_steps[0])
    assert trajectory.discounts[step] == 0.0
    learner = al.VTraceLearner(model, params)
    rewards = learner.batch([trajectory])["rewards"][:, 0]
    with torch.no_grad():
        tail = params.gamma * model.value(torch.from_numpy(trajectory.truncated_observations[:1])).item()
    assert rewards[step].item() == pytest.approx(params.reward_scale * trajectory.rewards[step] + tail, rel=1e-5)
    others = np.setdiff1d(np.arange(len(rewards)), trajectory.truncated_steps)
    np.testing.assert_allclose(rewards[others].numpy(), params.reward_scale * trajectory.rewards[others], rtol=1e-6)


def test_parameters_are_validated_by_key():
    with pytest.raises(ValueError, match=r"vtrace\.unrol_length"):
        al.VTraceParams.from_mapping({"unrol_length": 10}, al.PARAMS_PREFIX)
    with pytest.raises(ValueError, match=r"vtrace\.clip_c_threshold"):
        al.VTraceParams.from_mapping({"clip_c_threshold": -1}, al.PARAMS_PREFIX)
    assert al.VTraceParams.from_mapping({"clip_rho_threshold": None}, al.PARAMS_PREFIX).clip_rho_threshold is None


def test_trained_agent_predicts_clipped_actions_through_the_rollout_api(spec):
    agent = al.train_vtrace_agent(spec, dataclasses.replace(SMALL, total_timesteps=128), seed=0, num_workers=1)
    rollout = run_episode(spec.make_env("validation", evaluation=True), policy_from_sb3(agent), seed=0)
    assert len(rollout) > 0 and rollout["action_raw"].abs().max() <= 1.0
    obs = np.asarray(spec.make_env("validation").reset(seed=0)[0])
    single, state = agent.predict(obs)
    batch, _ = agent.predict(np.stack([obs, obs]), deterministic=False)
    assert state is None and single.shape == (1,) and batch.shape == (2, 1)
    with torch.no_grad():
        mean = agent.model.mean(torch.from_numpy(obs[None]))[0].numpy()
    np.testing.assert_array_equal(single, np.clip(mean, -1, 1))


TRAJECTORY_FIELDS = (
    "observations",
    "actions",
    "rewards",
    "discounts",
    "behaviour_log_probs",
    "truncated_steps",
    "truncated_observations",
)


@pytest.mark.slow
def test_ray_and_in_process_actors_give_the_same_trajectories_and_training(spec, params, ray_session):
    model = make_model(spec, params)
    weights = actor_critic.policy_weights(model)
    remote = ray_session.remote(num_cpus=1)(rollouts.RolloutWorker).remote(spec, params, 11, 1)
    local = rollouts.RolloutWorker(spec, params, 11)
    for _ in range(2):  # the second rollout continues the env and noise stream of the first
        from_ray = ray_session.get(remote.rollout.remote(weights))
        in_process = local.rollout(weights)
        for field in TRAJECTORY_FIELDS:
            np.testing.assert_array_equal(getattr(from_ray, field), getattr(in_process, field), err_msg=field)
        assert from_ray.episode_returns == in_process.episode_returns
    ray_session.kill(remote)

    runs = {backend: al.train_vtrace(spec, SMALL, 5, num_workers=2, backend=backend) for backend in ("ray", "local")}
    (ray_model, ray_history), (local_model, local_history) = runs["ray"], runs["local"]
    strip = lambda history: [{k: v for k, v in row.items() if k not in al.TIMING_KEYS} for row in history]  # noqa: E731
    assert len(ray_history) == 256 // (2 * SMALL.unroll_length)
    np.testing.assert_equal(strip(ray_history), strip(local_history))
    for name, tensor in ray_model.state_dict().items():
        assert torch.equal(tensor, local_model.state_dict()[name]), name
    # batches after the first are one update behind the learner: V-trace has ratios to correct
    assert ray_history[0]["mean_rho"] == pytest.approx(1.0, abs=1e-5)
    assert any(row["clipped_rho_fraction"] > 0 for row in ray_history[1:])
