import numpy as np
import pytest
import torch as th
from helpers.sac_icm_toy import ToyTradingEnv, toy_params

from trading_rl.algorithms.sac_icm.critics import RegularisedCriticPolicy
from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM, build_agent
from trading_rl.training.params import AgentParams

PROBE_OBS = np.random.default_rng(3).normal(size=(8, 4)).astype(np.float32)


def _agent(seed: int = 0, **policy):
    params = toy_params(icm=False)
    params["policy"] = {**params["policy"], **policy}
    return build_agent(ToyTradingEnv(), AgentParams.from_mapping(params, "sac_icm.agent"), seed=seed, device="cpu")


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        ({"n_critics": 0}, "sac_icm.agent.policy.n_critics"),
        ({"critic_dropout": 1.0}, "sac_icm.agent.policy.critic_dropout"),
        ({"critic_dropout": -0.1}, "sac_icm.agent.policy.critic_dropout"),
        ({"critic_layer_norm": "yes"}, "sac_icm.agent.policy.critic_layer_norm"),
    ],
)
def test_critic_options_out_of_range_are_rejected_by_name(policy, named):
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        AgentParams.from_mapping({"policy": policy}, "sac_icm.agent")


def test_the_default_critics_are_sb3s_two_plain_q_networks():
    model = _agent()
    assert not isinstance(model.policy, RegularisedCriticPolicy)
    assert model.critic.n_critics == 2 and "n_critics" not in model.policy_kwargs


def test_n_critics_reaches_sb3s_critic_and_its_target():
    model = _agent(n_critics=5)
    assert len(model.critic.q_networks) == len(model.critic_target.q_networks) == 5
    assert not isinstance(model.policy, RegularisedCriticPolicy)


def test_dropout_and_layer_norm_build_droq_q_networks_active_only_while_training():
    model = _agent(n_critics=3, critic_dropout=0.2, critic_layer_norm=True)
    assert isinstance(model.policy, RegularisedCriticPolicy) and len(model.critic.q_networks) == 3
    kinds = [type(layer).__name__ for layer in model.critic.q_networks[0]]
    assert kinds == ["Linear", "Dropout", "LayerNorm", "ReLU", "Linear", "Dropout", "LayerNorm", "ReLU", "Linear"]
    obs, action = th.as_tensor(PROBE_OBS), th.zeros((len(PROBE_OBS), 1))
    model.policy.set_training_mode(True)
    assert not th.equal(model.critic(obs, action)[0], model.critic(obs, action)[0])  # dropout samples
    assert th.equal(model.critic_target(obs, action)[0], model.critic_target(obs, action)[0])  # target: no dropout
    model.policy.set_training_mode(False)
    assert th.equal(model.critic(obs, action)[0], model.critic(obs, action)[0])


def test_regularised_critics_train_and_come_back_from_a_checkpoint(tmp_path):
    model = _agent(seed=2, critic_dropout=0.1, critic_layer_norm=True).learn(80)
    model.save(tmp_path / "agent.zip")
    loaded = SACWithICM.load(tmp_path / "agent.zip", device="cpu")
    assert isinstance(loaded.policy, RegularisedCriticPolicy)
    assert (loaded.policy.critic_dropout, loaded.policy.critic_layer_norm) == (0.1, True)
    np.testing.assert_array_equal(
        loaded.predict(PROBE_OBS, deterministic=True)[0], model.predict(PROBE_OBS, deterministic=True)[0]
    )


def test_the_update_to_data_ratio_reaches_sb3():
    params = toy_params(icm=False)
    params["sac"] = {**params["sac"], "gradient_steps": 4}
    model = build_agent(ToyTradingEnv(), AgentParams.from_mapping(params, "sac_icm.agent"), seed=0, device="cpu")
    model.learn(40)  # 8 steps past learning_starts (32), 4 updates each
    assert model.gradient_steps == 4 and model._n_updates == 4 * (40 - 32)
