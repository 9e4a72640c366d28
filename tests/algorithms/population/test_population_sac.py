"""The population learner is SB3's SAC update, batched: parameters after k updates on fixed batches
and fixed reparameterisation noise equal SB3 ``SAC.train``'s, member by member; its members export
as ordinary SB3 zips; and every member of a population learns Pendulum as well as SB3 SAC does."""

from __future__ import annotations

import tempfile

import gymnasium as gym
import numpy as np
import population_pendulum as pendulum
import pytest
import torch as th
from stable_baselines3 import SAC
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from torch import nn

from trading_rl.algorithms.population.membership import PopulationError, population_key
from trading_rl.algorithms.population.population_sac import PopulationSAC, population_groups
from trading_rl.algorithms.sac_icm.critics import RegularisedCriticPolicy
from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.runtime.engine import single_threaded
from trading_rl.training.params import ICMConfig
from trading_rl.training.sb3_logging import quiet_logger

BATCH = 8
STEPS = 5
FIELDS = ("observations", "actions", "next_observations", "dones", "rewards")

# benchmarks/population_pendulum.py --seeds 0 1 2 3 4 5 --steps 5000 (2026-11-26, one torch thread):
# SB3 SAC [-124.2, -124.3, -125.8, -125.3, -396.9, -755.7]; the population of 4 (seeds 100-103, this
# test's) [-99.5, -124.7, -125.9, -125.0]. At 3,000 steps SB3's seeds still spread from -132 to -1,102
# (not yet learned), hence 5,000.
PENDULUM_STEPS = 5000
SB3_LOWEST = -755.7

# (class, kwargs) per member: different learning rates, gammas, a fixed reward scale (applied in
# SACWithICM.learner_batch) and a target-update interval of 2, so every per-member setting is checked.
MEMBERS = [
    (SAC, {"learning_rate": 3e-4, "seed": 1}),
    (SAC, {"learning_rate": 3e-3, "gamma": 0.9, "seed": 2}),
    (SACWithICM, {"learning_rate": 1e-3, "reward_scale": 10.0, "seed": 3}),
]
# DroQ's layer-normalised critics (three of them) with tanh layers: the batched networks' other layers.
DROQ = {"critic_layer_norm": True, "n_critics": 3, "activation_fn": nn.Tanh}
DROQ_MEMBERS = [(SAC, {"seed": seed, "policy": RegularisedCriticPolicy, "policy_kwargs": DROQ}) for seed in (5, 6)]


def _agent(cls, kwargs, logger: bool = True):
    """A member; with a logger of its own (what ``train`` records into outside ``learn``) unless
    ``logger`` is false, as SB3 builds it."""
    kwargs = dict(kwargs)
    policy = kwargs.pop("policy", "MlpPolicy")
    policy_kwargs = {"net_arch": [16, 16], **kwargs.pop("policy_kwargs", {})}
    common = {"policy_kwargs": policy_kwargs, "tau": 0.05, "target_update_interval": 2, "verbose": 0}
    model = cls(policy, gym.make("Pendulum-v1"), **common, **kwargs)
    if logger:
        model.set_logger(quiet_logger(0))
    return model


def _fixed_batches(seed: int) -> list[ReplayBufferSamples]:
    rng = np.random.default_rng(seed)

    def tensor(*shape, low=-1.0, high=1.0):
        return th.as_tensor(rng.uniform(low, high, size=shape), dtype=th.float32)

    return [
        ReplayBufferSamples(
            observations=tensor(BATCH, 3),
            actions=tensor(BATCH, 1),
            next_observations=tensor(BATCH, 3),
            dones=th.as_tensor(rng.integers(0, 2, size=(BATCH, 1)), dtype=th.float32),
            rewards=tensor(BATCH, 1, low=-2.0, high=0.0),
        )
        for _ in range(STEPS)
    ]


def _replay(model, batches) -> None:
    queue = iter(batches)
    model.replay_buffer.sample = lambda batch_size, env=None: next(queue)


def _state(model) -> dict[str, th.Tensor]:
    state = {f"policy.{name}": value.clone() for name, value in model.policy.state_dict().items()}
    state["log_ent_coef"] = model.log_ent_coef.detach().clone()
    for what, optimizer in (("actor", model.actor.optimizer), ("critic", model.critic.optimizer)):
        for index, moments in enumerate(optimizer.state.values()):
            state[f"{what}.adam.{index}.exp_avg_sq"] = moments["exp_avg_sq"].clone()
    return state


def _noise(n_members: int, seed: int) -> list[list[th.Tensor]]:
    """Each member's reparameterisation noise, two draws (actor, next actions) per update."""
    return [
        [th.randn(BATCH, 1, generator=th.Generator().manual_seed(seed * (i + 1) + k)) for k in range(2 * STEPS)]
        for i in range(n_members)
    ]


def _train_alone(monkeypatch, model, batches, noise) -> None:
    """SB3: the agent's own ``train``, with its batches and its noise in SB3's draw order."""
    _replay(model, batches)
    draws = iter(noise)
    with monkeypatch.context() as patch:
        patch.setattr(
            th.distributions.Normal,
            "rsample",
            lambda self, sample_shape=None: self.loc + next(draws) * self.scale,
        )
        model.train(gradient_steps=STEPS, batch_size=BATCH)


def _train_together(members, batches, noise) -> None:
    """The same batches and noise, every member in one ``PopulationSAC.train`` (each step's batches
    stacked along the member axis, where the population's replay would sample them)."""
    population = PopulationSAC(members)
    stacked_batches = iter(
        [
            ReplayBufferSamples(*(th.stack([getattr(b[k], name) for b in batches]) for name in FIELDS))
            for k in range(STEPS)
        ]
    )
    population._replay_batch = lambda batch_size: next(stacked_batches)
    stacked_noise = iter([th.stack([draws[k] for draws in noise]) for k in range(2 * STEPS)])
    population._standard_normal = lambda shape: next(stacked_noise)
    population.train(gradient_steps=STEPS, batch_size=BATCH)
    population.release()


@pytest.mark.parametrize("specs", [MEMBERS[:1], MEMBERS, DROQ_MEMBERS], ids=["one", "three", "droq"])
def test_population_update_equals_sb3_sac_train(monkeypatch, specs):
    n_members = len(specs)
    batches = [_fixed_batches(100 + i) for i in range(n_members)]
    noise = _noise(n_members, seed=1000)
    reference = []
    for spec, member_batches, member_noise in zip(specs, batches, noise):
        model = _agent(*spec)
        _train_alone(monkeypatch, model, member_batches, member_noise)
        reference.append(_state(model))

    members = [_agent(*spec) for spec in specs]
    initial = [_state(member) for member in members]
    _train_together(members, batches, noise)

    for i, member in enumerate(members):
        state = _state(member)
        assert state.keys() == reference[i].keys()
        for name, value in state.items():
            th.testing.assert_close(value, reference[i][name], atol=1e-6, rtol=0, msg=f"member {i} {name}")
        moved = [name for name in initial[i] if name in state and not th.allclose(initial[i][name], state[name])]
        assert any("actor" in name for name in moved) and any("critic_target" in name for name in moved)
        assert member._n_updates == STEPS
        assert member.actor.optimizer.state[next(iter(member.actor.parameters()))]["step"].item() == STEPS


# Curious members whose every ICM and mixing setting differs (train_freq aside: one cycle per
# population); tiny grad_clip values make the per-member clipping bite. The last member stays in its
# warm-up (curiosity trains, the reward is not mixed). "plain" puts a member without an ICM among them.
CURIOUS = [
    {"eta": 0.01, "beta": 0.2, "lr": 1e-3, "weight_decay": 1e-4, "grad_clip": 1.0},
    {"eta": 0.5, "beta": 0.7, "lr": 3e-3, "weight_decay": 0.0, "grad_clip": 0.01, "reward_clip": 0.5},
    {"eta": 0.05, "beta": 0.0, "lr": 5e-4, "weight_decay": 1e-2, "scale_decay": 0.5, "match_extrinsic_scale": False},
]
MIXING = [
    {"intrinsic_weight": 0.1, "icm_warmup_steps": 0, "reward_scale": 10.0},
    {"intrinsic_weight": 0.4, "extrinsic_weight": 0.6, "icm_warmup_steps": 0},
    {"intrinsic_weight": 0.2, "icm_warmup_steps": 10**6},
]


def _curious_agent(i: int) -> SACWithICM:
    icm = ICMConfig(feature_dim=8, hidden_dim=16, **CURIOUS[i])
    return _agent(SACWithICM, {"seed": 10 + i, "icm": icm, **MIXING[i]})


def _curiosity_state(model: SACWithICM) -> dict[str, th.Tensor]:
    state = {f"icm.{name}": value.clone() for name, value in model.icm.state_dict().items()}
    for index, moments in enumerate(model.icm.optimizer.state.values()):
        state[f"icm.adamw.{index}.exp_avg_sq"] = moments["exp_avg_sq"].clone()
        state[f"icm.adamw.{index}.step"] = moments["step"].clone()
    return {**_state(model), **state}


@pytest.mark.parametrize("plain", [False, True])
def test_population_curiosity_equals_each_members_sacwithicm_train(monkeypatch, plain):
    """The batched ICM (one vmapped forward, one clipped AdamW step, per-member moving statistics and
    mixing) against every member's own ``SACWithICM.train``: weights, reward statistics, optimiser
    moments and the logged curiosity diagnostics."""
    builders = [lambda i=i: _curious_agent(i) for i in range(len(CURIOUS))]
    if plain:
        builders.insert(1, lambda: _agent(SAC, {"seed": 4}))
    n = len(builders)
    batches = [_fixed_batches(200 + i) for i in range(n)]
    noise = _noise(n, seed=77)
    reference, reference_stats = [], []
    for build, member_batches, member_noise in zip(builders, batches, noise):
        model = build()
        _train_alone(monkeypatch, model, member_batches, member_noise)
        curious = isinstance(model, SACWithICM)
        reference.append(_curiosity_state(model) if curious else _state(model))
        reference_stats.append(model.pop_train_stats() if curious else {})

    members = [build() for build in builders]
    _train_together(members, batches, noise)

    for i, member in enumerate(members):
        curious = isinstance(member, SACWithICM)
        state = _curiosity_state(member) if curious else _state(member)
        assert state.keys() == reference[i].keys()
        for name, value in state.items():
            th.testing.assert_close(value, reference[i][name], atol=2e-6, rtol=1e-5, msg=f"member {i} {name}")
        if curious:
            assert member.icm_batches == STEPS
            stats = member.pop_train_stats()
            assert stats.keys() == reference_stats[i].keys()
            assert ("icm/effective_share" in stats) == (member.icm_warmup_steps == 0)
            for key, value in stats.items():
                assert value == pytest.approx(reference_stats[i][key], rel=1e-5, abs=1e-7), f"member {i} {key}"
            # Each member owns its statistics again (not a view of the population's stack).
            assert member.icm.intrinsic_median.average.untyped_storage().nbytes() == 8


def test_population_refuses_icms_it_cannot_batch():
    wide = _agent(SACWithICM, {"icm": ICMConfig(feature_dim=8, hidden_dim=32)})
    with pytest.raises(PopulationError, match="icm.hidden_dim"):
        PopulationSAC([_curious_agent(0), wide])
    shifted = _curious_agent(1)
    shifted.icm_batches = 1
    every_second = _agent(SACWithICM, {"icm": ICMConfig(feature_dim=8, hidden_dim=16, train_freq=2)})
    with pytest.raises(PopulationError, match="train_freq"):
        PopulationSAC(
            [_agent(SACWithICM, {"icm": ICMConfig(feature_dim=8, hidden_dim=16, train_freq=2)}), every_second, shifted]
        )
    # Populations that PopulationSAC accepts: curious members split by ICM shape, plain members join
    # the first curious group of their key, another batch size is its own population.
    members = [_curious_agent(0), wide, _agent(SAC, {"seed": 5}), _curious_agent(2), _agent(SAC, {"batch_size": 16})]
    assert population_groups(members) == [[0, 2, 3], [1], [4]]
    for group in population_groups(members):
        PopulationSAC([members[i] for i in group]).release()


def test_members_see_the_population_weights_and_export_as_sb3_zips(tmp_path):
    members = [_agent(SAC, {"seed": seed, "learning_starts": 50}) for seed in (1, 2)]
    population = PopulationSAC(members)
    obs = np.zeros(3, dtype=np.float32)
    before = members[0].predict(obs, deterministic=True)[0]
    population.learn(total_timesteps=80)
    during = members[0].predict(obs, deterministic=True)[0]
    assert not np.allclose(before, during), "the member's predict must read the population's updated weights"
    population.release()
    assert members[0].num_timesteps == 80 and members[0]._n_updates == 80 - 50
    for i, member in enumerate(members):
        member.save(tmp_path / f"member_{i}.zip")
        loaded = SAC.load(tmp_path / f"member_{i}.zip", device="cpu")
        np.testing.assert_allclose(
            loaded.predict(obs, deterministic=True)[0], member.predict(obs, deterministic=True)[0]
        )
        assert loaded.actor.optimizer.state_dict()["state"], "the Adam state is saved with the member"
    # The exported zip holds its own weights only, not a view of the whole population's stack.
    assert members[0].actor.mu.weight.untyped_storage().nbytes() == members[0].actor.mu.weight.numel() * 4
    with pytest.raises(RuntimeError, match="released"):
        population.train(1, BATCH)


def test_each_member_steps_its_own_env_as_sb3_learn_does(tmp_path, monkeypatch):
    """Before ``learning_starts`` a member's transitions come from its own env and action space only,
    so each member's replay buffer equals that of the same agent run alone by SB3's ``learn``. A
    population that stepped one member's env for all (``member.env`` → ``lead.env``) fails here: the
    sampled ``_replay`` batches of the update tests never see the env. Unlike SB3's own ``learn``,
    the population leaves no empty ``tempdir/SB3-<time>`` folder per member."""
    steps = 60
    alone = [_agent(SAC, {"seed": seed, "learning_starts": 1000}) for seed in (1, 2, 3)]
    for model in alone:
        model.learn(total_timesteps=steps)
    together = [_agent(SAC, {"seed": seed, "learning_starts": 1000}, logger=False) for seed in (1, 2, 3)]
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    PopulationSAC(together).learn(total_timesteps=steps).release()
    assert sorted(path.name for path in tmp_path.glob("SB3-*")) == []
    for i, (solo, member) in enumerate(zip(alone, together)):
        assert member.num_timesteps == steps and member.replay_buffer.pos == steps
        for field in ("observations", "actions", "rewards", "next_observations"):
            np.testing.assert_array_equal(
                getattr(member.replay_buffer, field)[:steps],
                getattr(solo.replay_buffer, field)[:steps],
                err_msg=f"member {i}'s {field} differ from its agent run alone",
            )
    assert not np.array_equal(
        together[0].replay_buffer.observations[:steps], together[1].replay_buffer.observations[:steps]
    )


def test_population_refuses_members_it_cannot_batch_and_population_key_tells_them_apart():
    small, large = _agent(SAC, {"batch_size": 8}), _agent(SAC, {"batch_size": 16})
    with pytest.raises(PopulationError, match="batch_size"):
        PopulationSAC([small, large])
    wide = SAC("MlpPolicy", gym.make("Pendulum-v1"), policy_kwargs={"net_arch": [8]})
    with pytest.raises(PopulationError, match="net_arch"):
        PopulationSAC([_agent(SAC, {}), wide])
    fixed = _agent(SAC, {"ent_coef": 0.1})
    with pytest.raises(PopulationError, match="ent_coef"):
        PopulationSAC([_agent(SAC, {}), fixed])
    # What may differ (learning rate, gamma, seed) does not split a group; each refusal above does.
    batchable = _agent(SAC, {"learning_rate": 1e-2, "gamma": 0.5, "seed": 9})
    assert population_key(_agent(SAC, {})) == population_key(batchable)
    assert len({population_key(m) for m in (_agent(SAC, {}), large, wide, fixed)}) == 4


@pytest.mark.slow
@pytest.mark.study  # ~50 s of CPU; the update and env-stepping equalities above pin the mechanism
def test_population_learns_pendulum():
    """Every member of a population of 4 reaches SB3 SAC's return band on the same budget.

    ``benchmarks/population_pendulum.py`` measured SB3 SAC alone (same nets, batch, learning rate,
    budget and evaluation) and the population; ``SB3_LOWEST`` is the worst of SB3's seeds there, and
    an untrained policy scores -1,100 or less on the same evaluation episodes."""
    with single_threaded():  # two torch threads on a loaded 2-core machine ran ~30x slower
        members = [pendulum.pendulum_agent(seed) for seed in range(100, 104)]
        untrained = [pendulum.mean_return(member) for member in members]
        PopulationSAC(members).learn(PENDULUM_STEPS).release()
        returns = [pendulum.mean_return(member) for member in members]
    assert max(untrained) < SB3_LOWEST - 300, "the band must be well above an untrained policy's return"
    assert min(returns) >= SB3_LOWEST, f"population returns {returns}, below SB3's lowest {SB3_LOWEST}"
