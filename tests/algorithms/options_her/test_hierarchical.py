"""Hierarchical agent: warm start from SAC+ICM, the option VecEnv, save/load."""

import numpy as np
import pytest
import torch
from helpers.options_her_env import random_observations, small_source_model, small_spec
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.vec_env import DummyVecEnv

from trading_rl.algorithms.options_her.controller import ControllerConfig, OptionLearner
from trading_rl.algorithms.options_her.from_spec import OptionsHerParams, train_from_spec
from trading_rl.algorithms.options_her.her import FastHerReplayBuffer, HerParams
from trading_rl.algorithms.options_her.hierarchical import HierarchicalAgent, build_hierarchical_agent, rollout_agent
from trading_rl.algorithms.options_her.option_env import OptionVecEnv
from trading_rl.algorithms.options_her.options import OPTION_NAMES, OptionParams, TradingOptions
from trading_rl.algorithms.options_her.widening import WidenedLinear
from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.training.params import SacParams

torch.set_num_threads(1)
N_OPTIONS = len(OPTION_NAMES)
SMALL_CONTROLLER = {"hidden_dim": 16, "warmup_steps": 20, "batch_size": 8, "buffer_size": 500}
SMALL_SAC = {"learning_starts": 70, "batch_size": 16, "buffer_size": 2000}
CONTROLLER = ControllerConfig(**SMALL_CONTROLLER)
SAC = SacParams(**SMALL_SAC)


def _one_hot(n, option):
    one_hot = np.zeros((n, N_OPTIONS), dtype=np.float32)
    one_hot[:, option] = 1.0
    return one_hot


@pytest.mark.parametrize("with_her", [True, False])
def test_warm_start_reproduces_the_sac_icm_action(with_her):
    """Before training the low-level action and Q-values equal the SAC+ICM model's bit for bit, for
    every option and any goals; every source tensor is copied unchanged and the new columns are zero."""
    spec = small_spec()
    source = small_source_model(spec)
    her = HerParams() if with_her else None
    agent, _ = build_hierarchical_agent(
        source, lambda: spec.make_env("train"), OptionParams(), CONTROLLER, her, SAC, seed=1
    )
    assert isinstance(agent.low_level.replay_buffer, FastHerReplayBuffer) == with_her
    obs = random_observations(spec, 64)
    expected, _ = source.predict(obs, deterministic=True)
    action = torch.as_tensor(expected)
    expected_q = [q.detach() for q in source.critic(torch.as_tensor(obs), action)]
    for option in range(N_OPTIONS):
        augmented = np.concatenate([obs, _one_hot(len(obs), option)], axis=1)
        if with_her:
            goals = np.random.default_rng(option).normal(0, 2.0, (len(obs), 3)).astype(np.float32)
            augmented = {
                "observation": augmented,
                "achieved_goal": goals[:, :1],
                "desired_goal": goals[:, 1:2],
                "time_to_go": np.abs(goals[:, 2:]) % 1.0,
            }
        got, _ = agent.low_level.predict(augmented, deterministic=True)
        np.testing.assert_array_equal(got, expected)
        tensor_obs, _ = agent.low_level.policy.obs_to_tensor(augmented)
        for critic in (agent.low_level.critic, agent.low_level.critic_target):
            for q, q_source in zip(critic(tensor_obs, action), expected_q):
                assert torch.equal(q.detach(), q_source)
    # the widened first layers: the source columns where SB3 now puts them (Dict entries flattened
    # in key order: goals, then observation, then time_to_go), then zeros for the new ones
    source_state = source.policy.state_dict()
    obs_dim = obs.shape[1]
    offset = 2 if with_her else 0
    widened = {
        name: module for name, module in agent.low_level.policy.named_modules() if isinstance(module, WidenedLinear)
    }
    assert sorted(widened) == sorted(
        ["actor.latent_pi.0"] + [f"{net}.{q}.0" for net in ("critic", "critic_target") for q in ("qf0", "qf1")]
    )
    for name, layer in widened.items():
        assert torch.equal(layer.carried.weight, source_state[f"{name}.weight"]), name
        assert torch.equal(layer.carried.bias, source_state[f"{name}.bias"]), name
        assert torch.count_nonzero(layer.fresh.weight) == 0, name
        carried = layer.carried_index.tolist()
        assert carried[:obs_dim] == list(range(offset, offset + obs_dim)), name
        assert carried[obs_dim:] == list(range(layer.in_features - len(carried) + obs_dim, layer.in_features)), name
    for key, value in agent.low_level.policy.state_dict().items():
        if ".carried." not in key and ".fresh." not in key:
            assert torch.equal(value, source_state[key]), key


def test_warm_start_without_new_inputs_copies_the_source_policy():
    """No options and no HER: the input does not grow, the first layers stay plain ``Linear``s and
    the whole policy is the source's."""
    spec = small_spec()
    source = small_source_model(spec)
    agent, _ = build_hierarchical_agent(
        source, lambda: spec.make_env("train"), None, ControllerConfig(), None, SAC, seed=1
    )
    policy = agent.low_level.policy
    assert not any(isinstance(module, WidenedLinear) for module in policy.modules())
    source_state = source.policy.state_dict()
    assert all(torch.equal(value, source_state[key]) for key, value in policy.state_dict().items())
    obs = random_observations(spec, 32)
    np.testing.assert_array_equal(
        agent.low_level.predict(obs, deterministic=True)[0], source.predict(obs, deterministic=True)[0]
    )


@pytest.mark.parametrize("with_her", [True, False])
def test_low_level_learns_pnl_at_the_source_reward_scale_and_goals_unscaled(with_her):
    spec = small_spec()
    source = small_source_model(spec)
    source.reward_scale = 100.0
    her = HerParams() if with_her else None
    agent, _ = build_hierarchical_agent(
        source, lambda: spec.make_env("train"), OptionParams(), CONTROLLER, her, SAC, seed=1
    )
    low_level = agent.low_level
    # One mechanism: the learner's reward_scale (HER's goal view scales the P&L part itself).
    assert isinstance(low_level, SACWithICM) and low_level.icm is None
    assert low_level.reward_scale == (1.0 if with_her else 100.0)
    assert isinstance(low_level.replay_buffer, FastHerReplayBuffer if with_her else ReplayBuffer)
    if with_her:
        return
    low_level.learn(80)  # learning_starts 70: fills the buffer, a few updates
    np.random.seed(0)
    stored = low_level.replay_buffer.sample(64)
    batch = low_level.learner_batch(stored)
    torch.testing.assert_close(batch.rewards, 100.0 * stored.rewards)
    assert torch.equal(batch.observations, stored.observations)


def test_widened_linear_is_one_linear_over_the_whole_input():
    torch.manual_seed(0)
    layer = WidenedLinear(7, 3, carried_columns=[4, 1, 5])
    torch.nn.init.normal_(layer.fresh.weight)
    weight = torch.zeros(3, 7)
    weight[:, [4, 1, 5]] = layer.carried.weight.detach()
    weight[:, [0, 2, 3, 6]] = layer.fresh.weight.detach()
    x = torch.randn(11, 7)
    torch.testing.assert_close(layer(x), x @ weight.T + layer.carried.bias.detach())
    with pytest.raises(ValueError, match="distinct"):
        WidenedLinear(4, 2, carried_columns=[1, 1])
    with pytest.raises(ValueError, match="new input"):
        WidenedLinear(2, 2, carried_columns=[0, 1])


def test_option_vec_env_keeps_state_per_env_and_enforces_min_duration():
    spec = small_spec()
    make = lambda: spec.make_env("train")  # noqa: E731
    venv = DummyVecEnv([make, make, make])
    env = venv.envs[0].unwrapped
    options = TradingOptions(env.layout, OptionParams(), allow_short=True)
    learner = OptionLearner(env.layout.dim, N_OPTIONS, ControllerConfig(**SMALL_CONTROLLER), seed=0)
    option_env = OptionVecEnv(venv, options, learner, seed=0)
    option_env.seed(0)
    obs = option_env.reset()
    assert obs.shape == (3, env.layout.dim + N_OPTIONS)
    prev_obs = obs[:, :-N_OPTIONS]
    rng = np.random.default_rng(0)
    runs = {i: [] for i in range(3)}
    for _ in range(150):
        before = option_env.active.copy()
        obs, _, dones, infos = option_env.step(rng.uniform(-1, 1, (3, 1)).astype(np.float32))
        for i, info in enumerate(infos):
            assert info["option"] == OPTION_NAMES[before[i]]
            if info["option_step"] == 1:
                runs[i].append([before[i], 0, False])
            runs[i][-1][1] = info["option_step"]
            runs[i][-1][2] = bool(dones[i])
            # the env executed the option's transform of the policy's action
            executed = options.transform_actions([before[i]], np.array([[info["action_policy"]]]), prev_obs[i : i + 1])
            assert info["action_raw"] == pytest.approx(float(executed[0, 0]), abs=1e-6)
            assert np.array_equal(obs[i, -N_OPTIONS:], np.eye(N_OPTIONS)[option_env.active[i]])
        prev_obs = obs[:, :-N_OPTIONS]
    for i in range(3):
        for option, length, ended_by_episode in runs[i][:-1]:
            if not ended_by_episode:
                assert length >= options.min_durations[option]
                assert length <= options.hard_timeouts[option]
    assert len(learner) > 0
    stats = option_env.stats()["options"]
    assert np.isclose(sum(o["usage"] for o in stats.values()), 1.0)
    # Runs cut by the episode's end are counted apart, so the terminated runs' minimum duration
    # respects the configured one (mixing them in showed minimums of 2-3 against a configured 5).
    # (an env's last run is finished when a new option has just started: its step counter is 0)
    finished = [run for i in range(3) for run in (runs[i] if option_env.steps[i] == 0 else runs[i][:-1])]
    for index, name in enumerate(OPTION_NAMES):
        terminated = [length for option, length, cut in finished if option == index and not cut]
        truncated = [length for option, length, cut in finished if option == index and cut]
        assert stats[name]["runs"] == len(terminated) and stats[name]["truncated_runs"] == len(truncated)
        if terminated:
            assert stats[name]["min_duration"] == min(terminated) >= stats[name]["min_duration_config"]
    assert sum(o["truncated_runs"] for o in stats.values()) > 0  # 60-bar episodes cut some runs


@pytest.mark.slow
def test_train_save_load_gives_identical_actions():
    spec = small_spec()
    source = small_source_model(spec)
    params = {
        "controller": SMALL_CONTROLLER,
        "sac": SMALL_SAC,
        "training": {"total_timesteps": 160, "log_freq": 40},
        "env_overrides": {},
    }
    agent, history, stats = train_from_spec(spec, source, OptionsHerParams.from_mapping(params, "options_her"), seed=0)
    assert [row["step"] for row in history] == [40, 80, 120, 160]
    assert "controller_entropy" in history[-1] and "usage_wait" in history[-1]
    assert stats["episodes"] >= 1
    restored = HierarchicalAgent.from_bytes(agent.to_bytes())
    first, _ = rollout_agent(agent, lambda: spec.make_env("validation"), seed=5, desired_goal=0.02)
    second, _ = rollout_agent(restored, lambda: spec.make_env("validation"), seed=5, desired_goal=0.02)
    assert np.array_equal(first["action_policy"].to_numpy(), second["action_policy"].to_numpy())
    assert first["option"].tolist() == second["option"].tolist()
    assert restored.learner.temperature == agent.learner.temperature


def test_the_options_her_training_env_runs_inside_the_curriculum_when_it_is_enabled():
    """options_her takes sac_icm's curriculum (same keys): its training episodes start in the
    stage's windows with the stage's costs, and the curriculum counts them; off, no wrapper."""
    from trading_rl.training.curriculum import Curriculum, curriculum_entry

    spec = small_spec()
    source = small_source_model(spec)
    params = {
        "controller": SMALL_CONTROLLER,
        "sac": SMALL_SAC,
        "training": {"total_timesteps": 120, "log_freq": 40},
        "curriculum": {"enabled": True, "episode_length": 30, "min_start_windows": 2},
    }
    agent, _, _ = train_from_spec(spec, source, OptionsHerParams.from_mapping(params, "options_her"), seed=0)
    venv = agent.low_level.get_env()
    assert venv.env_is_wrapped(Curriculum)[0]
    report = curriculum_entry(venv)
    assert report["curriculum/episodes"] >= 2 and report["curriculum/stage"] == 0
    off = OptionsHerParams.from_mapping({**params, "curriculum": {"enabled": False}}, "options_her")
    agent, _, _ = train_from_spec(spec, source, off, seed=0)
    assert not agent.low_level.get_env().env_is_wrapped(Curriculum)[0]


@pytest.mark.parametrize("margin", [3.0, 0.0])
def test_the_warm_started_controller_runs_the_pass_through_option_so_the_agent_trades_as_its_source(margin):
    """Untrained, the hierarchy with the controller's warm start (``scalp`` preferred by 3 logits)
    trades its validation episode exactly as the source SAC+ICM model; the seeds' uniform start
    (margin 0) picks constraining options and trades otherwise."""
    from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode

    spec = small_spec()
    source = small_source_model(spec)
    controller = ControllerConfig(**SMALL_CONTROLLER, warm_start_margin=margin)
    agent, _ = build_hierarchical_agent(
        source, lambda: spec.make_env("train"), OptionParams(), controller, None, SAC, 1
    )

    def make_env():
        return spec.make_env("validation", evaluation=True)

    hierarchy, _ = rollout_agent(agent, make_env, seed=0)
    flat = run_episode(make_env(), policy_from_sb3(source), seed=0)
    same = np.array_equal(hierarchy["equity"].to_numpy(), flat["equity"].to_numpy())
    assert same == (margin > 0)
    if margin > 0:
        assert set(hierarchy["option"]) == {"scalp"}
        states = random_observations(spec, 256)
        scalp_share = agent.learner.probabilities(states, np.ones((256, N_OPTIONS), dtype=bool))[:, 4]
        assert 0.6 < scalp_share.mean() < 0.95  # preferred, the others still explored
