"""A population of independent SB3 SAC agents updated in one batched computation per gradient step.

Walk-forward validation trains folds × seeds × configurations of small SAC agents. Each SB3 run is
bound by its gradient steps, and a step of a [64, 64] network on a batch of 64 is a few hundred tiny
kernels whose cost is Python and dispatch overhead, not arithmetic. Here N agents share those
kernels: their parameters are stacked along a leading member axis (``torch.func.stack_module_state``)
and every network call is one batched kernel per layer over the stacked weights (``batched_sac``:
SB3's actor and critics as ``baddbmm`` calls, differentiated by autograd); the SAC update is
written here.

What stays per member, exactly as in SB3: the env, its episodes and its replay buffer's contents
(each member's own transitions), the reward scale, the entropy coefficient and target entropy, ``learning_rate`` (and
its schedule), ``gamma``, ``tau``, ``target_update_interval`` and the three Adam states. Each member's
update is SB3's ``SAC.train`` step (same order: entropy-coefficient loss and step, then the critic,
then the actor on the updated critic, then Polyak) — ``tests/algorithms/test_population_sac.py``
checks parameters against ``SAC.train`` on fixed batches. The batched Adam is elementwise with a
per-member learning rate and step count, which is what N independent ``torch.optim.Adam`` are.

Curiosity (``SACWithICM``'s ICM) is batched too: the curious members' ICMs are stacked, one batched
forward and a hand-written backward (``batched_icm``: each layer one ``baddbmm``, contiguous
gradients) give every member's forward error, inverse loss and gradients, one clipped AdamW step (per-member
norm, learning rate and weight decay) updates them all, and the moving statistics behind the
intrinsic reward and its mixing (``normalised_surprise``, ``mix_curiosity``) are the members' own, one
entry per member; the test holds it to each member's own ``SACWithICM.train``.

The members *are* ordinary SB3 models: while a ``PopulationSAC`` lives, every member's parameter (and
ICM statistic) is a view into the stacked tensor, so ``predict``, rollouts and ``save`` see the
current weights; after ``release()`` each member owns its weights and optimiser states again and saves
as a normal SB3 zip.

The env loop is batched too (``collection.PopulationCollector``): one ``act`` (the stacked actors in
one batched forward; stochastic while collecting, ``deterministic=True`` for evaluation) picks every
member's action, the walk-forward's trading envs step as one ``BatchedTradingEnv``, and the members'
replay buffers are one set of stacked tensors on the learner's device (``replay.PopulationReplay``),
sampled for all members at once.

Each member draws its actor noise and replay indices from its own torch generator
(``member_stream``: seeded from the member's seed, or handed in to continue a stream), never from
torch's global one: what a member draws, and so what it learns, does not depend on which members
share its population or in which order (the engine may split chains over workers,
``phases.walk_forward.population``).

Not supported (refused with a message): gSDE, auxiliary heads, batch-norm buffers, episode-based
``train_freq``, replay buffers other than SB3's plain ``ReplayBuffer``, and members that differ in
batch size, gradient steps, train frequency, learning starts, step count, device, network shapes or
ICM shapes and ``icm.train_freq`` cycle (they cannot share one batched step; ``population_groups``
splits members into populations that can).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch as th
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from torch import nn
from torch.func import stack_module_state

from trading_rl.algorithms.population.batched_sac import BatchedActor, BatchedCritics, layer_views
from trading_rl.algorithms.population.collection import PopulationCollector
from trading_rl.algorithms.population.membership import _check_members, _curiosity_key, population_key
from trading_rl.algorithms.population.replay import PopulationReplay
from trading_rl.algorithms.population.stacking import _AdamGroup, _PopulationCuriosity
from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.seeding import SeedRole, trial_seed
from trading_rl.training.sb3_logging import quiet_logging_for_setup

# SB3's squashed Gaussian (stable_baselines3.common.distributions.SquashedDiagGaussianDistribution).
_SQUASH_EPSILON = 1e-6
_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


def squashed_gaussian_sample(mean: th.Tensor, log_std: th.Tensor, noise: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
    """``tanh(mean + noise·std)`` and its log-probability ``[..., 1]``: SB3's squashed Gaussian
    (``SquashedDiagGaussianDistribution``: torch's ``Normal`` log-density, then the tanh correction
    with SB3's epsilon) in fewer kernels. The Gaussian's standardised sample is ``noise`` itself, so
    its log-density is ``-noise²/2 - log_std - log √(2π)``, as torch's formula gives up to rounding."""
    gaussian = th.addcmul(mean, noise, log_std.exp())
    action = th.tanh(gaussian)
    neg_density = log_std - (-0.5 * noise.square() - _LOG_SQRT_2PI)
    squash = th.log(1 + _SQUASH_EPSILON - action.square())
    return action, -(neg_density + squash).sum(dim=-1, keepdim=True)


def member_stream(member: SAC) -> th.Generator:
    """A new random stream for ``member``'s population draws on its device: seeded from its seed's
    ``POPULATION_MEMBER`` role (not the seed itself, whose global stream drew the initial weights); an
    unseeded member's seed is drawn from torch's global generator."""
    seed = member.seed if member.seed is not None else int(th.randint(0, 2**31 - 1, ()).item())
    return th.Generator(device=member.device).manual_seed(trial_seed(seed, SeedRole.POPULATION_MEMBER))


def population_groups(members: Sequence[SAC]) -> list[list[int]]:
    """``members``' indices split into the fewest populations ``PopulationSAC`` accepts: one per
    ``population_key``, split further by ICM shape and ``icm.train_freq`` cycle; members without an
    ICM join their key's first curious group (the population trains mixed groups)."""
    by_key: dict[tuple, dict[tuple | None, list[int]]] = {}
    for i, member in enumerate(members):
        by_key.setdefault(population_key(member), {}).setdefault(_curiosity_key(member), []).append(i)
    groups = []
    for by_curiosity in by_key.values():
        plain = by_curiosity.pop(None, [])
        curious = list(by_curiosity.values()) or [[]]
        curious[0] = sorted(curious[0] + plain)
        groups += curious
    return groups


def _quiet_setup(member: SAC, total_timesteps: int, reset_num_timesteps: bool) -> tuple[int, BaseCallback]:
    """SB3's ``_setup_learn`` for one member with a ``quiet_logger`` (``training.sb3_logging``), as
    ``SACWithICM`` does for itself: plain SB3 members would each leave an empty tempdir/SB3-<time>
    folder per ``learn``."""
    with quiet_logging_for_setup(member):
        return member._setup_learn(total_timesteps, None, reset_num_timesteps, "run", False)


class PopulationSAC:
    """N SB3 SAC (or ``SACWithICM``) models trained together: ``learn`` steps every member's env once
    per env step and runs their gradient steps as one batched update. Call ``release()`` when done
    (before saving or training a member on its own). ``streams``: each member's random stream, to
    continue one from an earlier population (default: ``member_stream`` of each)."""

    def __init__(self, members: Sequence[SAC], streams: Sequence[th.Generator] | None = None) -> None:
        _check_members(members)
        self.members = list(members)
        self.streams = list(streams) if streams is not None else [member_stream(m) for m in self.members]
        if len(self.streams) != len(self.members):
            raise ValueError(f"{len(self.streams)} random streams for {len(self.members)} members")
        self.device = members[0].device
        self._actor_net = BatchedActor(self.members[0].actor)
        self._critic_net = BatchedCritics(self.members[0].critic)
        self.actor = self._stack_modules(
            [m.actor for m in self.members], [m.actor.optimizer for m in self.members], "actor"
        )
        self.critic = self._stack_modules(
            [m.critic for m in self.members], [m.critic.optimizer for m in self.members], "critic"
        )
        target_params, _ = stack_module_state([m.critic_target for m in self.members])
        self._target_names = list(target_params)
        self.critic_target = [target_params[name].detach() for name in self._target_names]
        for name, stacked in zip(self._target_names, self.critic_target):
            for i, member in enumerate(self.members):
                member.critic_target.get_parameter(name).data = stacked[i]
        self.entropy: _AdamGroup | None = None
        if self.members[0].ent_coef_optimizer is not None:
            member_log_ent_coefs = [m.log_ent_coef for m in self.members if m.log_ent_coef is not None]
            log_ent_coef = th.stack([t.detach() for t in member_log_ent_coefs]).requires_grad_(True)
            self.entropy = _AdamGroup.stack(
                [log_ent_coef],
                [member_log_ent_coefs],
                [m.ent_coef_optimizer for m in self.members],
                "entropy-coefficient",
            )
            self._fixed_ent_coef: th.Tensor | None = None
        else:
            self._fixed_ent_coef = th.stack([m.ent_coef_tensor.reshape(1) for m in self.members])
        self._target_entropy = th.tensor(
            [[float(m.target_entropy)] for m in self.members], device=self.device, dtype=th.float32
        )
        self._tau = np.array([m.tau for m in self.members], dtype=np.float64)
        self._gamma = th.tensor([[[m.gamma]] for m in self.members], device=self.device, dtype=th.float32)
        curious = [i for i, member in enumerate(self.members) if getattr(member, "icm", None) is not None]
        self._curious_rows = th.tensor(curious, device=self.device)
        self._curiosity = (
            _PopulationCuriosity([self.members[i] for i in curious], self.device)  # type: ignore[misc]
            if curious
            else None
        )
        self._reward_scale = th.tensor(
            [[[getattr(m, "reward_scale", 1.0)]] for m in self.members], device=self.device, dtype=th.float32
        )
        # Layer views of weights outside autograd, taken once (the optimiser's in-place steps show through
        # them): the actor's for acting, the critics' where the actor's loss reads them as constants,
        # the target critics'.
        self._actor_constants = layer_views({name: p.detach() for name, p in self._params(self.actor).items()})
        self._critic_constants = layer_views({name: p.detach() for name, p in self._params(self.critic).items()})
        self._target_views = layer_views(dict(zip(self._target_names, self.critic_target)))
        self.replay = PopulationReplay([m.replay_buffer for m in self.members], self.device)  # type: ignore[misc]
        self._released = False

    def _stack_modules(
        self, modules: Sequence[nn.Module], optimizers: list[th.optim.Optimizer], what: str
    ) -> _AdamGroup:
        stacked, _ = stack_module_state(modules)
        names = list(stacked)
        member_tensors = [[module.get_parameter(name) for module in modules] for name in names]
        group = _AdamGroup.stack([stacked[name] for name in names], member_tensors, optimizers, what)
        group.names = names
        return group

    # ------------------------------------------------------------------ batched network calls

    def _sample_actions(
        self, views: dict[str, th.Tensor], observations: th.Tensor, noise: th.Tensor
    ) -> tuple[th.Tensor, th.Tensor]:
        """Squashed Gaussian actions ``[N, B, A]`` of the members' actors (``views``: their layer views)
        and their log-probabilities ``[N, B, 1]``."""
        mean, log_std = self._actor_net(views, observations)
        return squashed_gaussian_sample(mean, log_std, noise)

    @th.no_grad()
    def act(self, observations: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Every member's action for its observation (row ``i`` of ``observations``, ``[N, obs]``) in
        one forward of the stacked actors: SB3's ``policy._predict`` output before ``unscale_action``
        (a squashed Gaussian sample, or ``tanh`` of its mean when ``deterministic``), ``[N, action]``."""
        obs = th.as_tensor(observations, device=self.device)[:, None]
        mean, log_std = self._actor_net(self._actor_constants, obs)
        if deterministic:
            actions = th.tanh(mean)
        else:
            actions, _ = squashed_gaussian_sample(mean, log_std, self._standard_normal(mean.shape))
        return actions[:, 0].cpu().numpy()

    def _params(self, group: _AdamGroup) -> dict[str, th.Tensor]:
        return dict(zip(group.names, group.params))

    def _standard_normal(self, shape: tuple[int, ...]) -> th.Tensor:
        """The reparameterisation noise ``shape`` (``[N, ...]``), each member's row from its own stream."""
        return th.stack([th.randn(shape[1:], generator=stream, device=self.device) for stream in self.streams])

    # ------------------------------------------------------------------ training

    def _replay_batch(self, batch_size: int) -> ReplayBufferSamples:
        """Every member's batch from its own transitions, stacked ``[N, batch, ...]``."""
        return self.replay.sample(batch_size, self.streams)

    def _sample(self, batch_size: int) -> ReplayBufferSamples:
        """One learner batch per member (what ``SACWithICM.learner_batch`` gives: reward scale, then
        curiosity), stacked along the member axis."""
        stacked = self._replay_batch(batch_size)
        # The reward scale per member (1 for plain SAC: x 1.0 is exact); curiosity for all at once.
        stacked = stacked._replace(rewards=stacked.rewards * self._reward_scale)
        if self._curiosity is None:
            return stacked
        if len(self._curious_rows) == len(self.members):
            return stacked._replace(rewards=self._curiosity.learner_rewards(stacked))
        rows = self._curious_rows
        curious = stacked._replace(
            observations=stacked.observations[rows],
            actions=stacked.actions[rows],
            next_observations=stacked.next_observations[rows],
            rewards=stacked.rewards[rows],
        )
        rewards = stacked.rewards.clone()
        rewards[rows] = self._curiosity.learner_rewards(curious)
        return stacked._replace(rewards=rewards)

    def _learning_rates(self) -> np.ndarray:
        return np.array([m.lr_schedule(m._current_progress_remaining) for m in self.members], dtype=np.float64)

    def gradient_step(self, batch: ReplayBufferSamples, learning_rates: np.ndarray, polyak: np.ndarray) -> th.Tensor:
        """Every member's SB3 SAC update on its row of ``batch``; returns losses ``[4, N]`` (actor,
        critic, entropy-coefficient loss or NaN, entropy coefficient). ``polyak[i]``: whether member
        ``i`` updates its target critic this step."""
        n = len(self.members)
        action_shape = batch.actions.shape
        actor_views = layer_views(self._params(self.actor))
        actions_pi, log_prob = self._sample_actions(
            actor_views, batch.observations, self._standard_normal(action_shape)
        )

        if self.entropy is not None:
            log_ent_coef = self.entropy.params[0]  # [N, 1]
            ent_coef = th.exp(log_ent_coef.detach())
            # SB3's loss -mean(log α · (log π + target)) has the gradient -mean(log π + target) in log α.
            surplus = (log_prob.detach() + self._target_entropy[:, None, :]).mean(dim=(1, 2))
            ent_coef_loss = -log_ent_coef.detach()[:, 0] * surplus
            self.entropy.step([-surplus[:, None]], learning_rates)
        else:
            assert self._fixed_ent_coef is not None
            ent_coef = self._fixed_ent_coef
            ent_coef_loss = th.full((n,), float("nan"), device=self.device)
        ent_coef = ent_coef[:, None, :]  # [N, 1, 1]

        with th.no_grad():
            next_actions, next_log_prob = self._sample_actions(
                self._actor_constants, batch.next_observations, self._standard_normal(action_shape)
            )
            next_q = self._critic_net(self._target_views, batch.next_observations, next_actions)
            next_q = th.min(next_q, dim=-1, keepdim=True)[0] - ent_coef * next_log_prob
            discounts = batch.discounts if batch.discounts is not None else self._gamma
            target_q = batch.rewards + (1 - batch.dones) * discounts * next_q

        critic_views = layer_views(self._params(self.critic))
        current_q = self._critic_net(critic_views, batch.observations, batch.actions)  # [N, B, n_critics]
        # SB3: 0.5 · Σ_critics mse(q_j, target), each mean over the batch.
        critic_loss = 0.5 * (current_q - target_q).square().mean(dim=1).sum(dim=1)
        grads = th.autograd.grad(critic_loss.sum(), self.critic.params)
        self.critic.step(grads, learning_rates)

        # The actor's loss differentiates the critics' inputs only: their weights enter as constants.
        q_pi = self._critic_net(self._critic_constants, batch.observations, actions_pi)
        min_q_pi = th.min(q_pi, dim=-1, keepdim=True)[0]
        actor_loss = (ent_coef * log_prob - min_q_pi).mean(dim=(1, 2))
        grads = th.autograd.grad(actor_loss.sum(), self.actor.params)
        self.actor.step(grads, learning_rates)

        if polyak.any():
            self._polyak(polyak)
        return th.stack([actor_loss.detach(), critic_loss.detach(), ent_coef_loss, ent_coef.reshape(n)])

    @th.no_grad()
    def _polyak(self, polyak: np.ndarray) -> None:
        """SB3's ``polyak_update`` of the target critics (``target·(1 − τ) + τ·critic``), one pass over
        all stacked tensors when every member updates with one τ, else with each member's τ (0: none)."""
        critics = [param.detach() for param in self.critic.params]
        if polyak.all() and (self._tau == self._tau[0]).all():
            tau = float(self._tau[0])
            th._foreach_mul_(self.critic_target, 1 - tau)
            th._foreach_add_(self.critic_target, critics, alpha=tau)
            return
        taus = th.as_tensor(np.where(polyak, self._tau, 0.0), device=self.device, dtype=th.float32)
        for critic, target in zip(critics, self.critic_target):
            shape = (-1,) + (1,) * (critic.dim() - 1)
            target.mul_(1 - taus.view(shape))
            target.add_(critic * taus.view(shape))

    def train(self, gradient_steps: int, batch_size: int) -> None:
        """SB3's ``SAC.train(gradient_steps, batch_size)`` for every member at once."""
        if self._released:
            raise RuntimeError("this population was released; build a new PopulationSAC to train its members again")
        learning_rates = self._learning_rates()
        intervals = np.array([m.target_update_interval for m in self.members])
        losses = []
        for gradient_step in range(gradient_steps):
            batch = self._sample(batch_size)
            losses.append(self.gradient_step(batch, learning_rates, polyak=gradient_step % intervals == 0))
        # SB3's train/ records per member; the loss rows as gradient_step returns them.
        rows = {"actor_loss": 0, "critic_loss": 1, "ent_coef": 3} | (
            {"ent_coef_loss": 2} if self.entropy is not None else {}
        )
        means = th.stack(losses).mean(dim=0)[list(rows.values())]
        keys = [f"train/{name}" for name in rows]
        columns = means.tolist()  # [stat][member]
        diverged = not th.isfinite(means).all()
        for i, member in enumerate(self.members):
            member._n_updates += gradient_steps
            stats = {key: column[i] for key, column in zip(keys, columns)}
            for key, value in stats.items():
                member.logger.record(key, value)
            if isinstance(member, SACWithICM):  # its divergence guard and training statistics
                if diverged:
                    member._raise_if_diverged({key.removeprefix("train/"): value for key, value in stats.items()})
                member._accumulate(stats)

    def learn(self, total_timesteps: int, reset_num_timesteps: bool = True, log_interval: int = 4) -> PopulationSAC:
        """SB3's ``learn`` for every member in lockstep: ``train_freq`` env steps of all members
        (``PopulationCollector``), then one batched ``train`` once past ``learning_starts``."""
        lead = self.members[0]
        setups = [_quiet_setup(m, total_timesteps, reset_num_timesteps) for m in self.members]
        total = setups[0][0]
        callbacks = [callback for _, callback in setups]
        for callback in callbacks:
            callback.on_training_start(locals(), globals())
        collector = PopulationCollector(self, callbacks, log_interval)
        steps = lead.train_freq.frequency  # type: ignore[union-attr]
        while lead.num_timesteps < total:
            if not collector.collect(steps):
                break
            if lead.num_timesteps > 0 and lead.num_timesteps > lead.learning_starts:
                gradient_steps = lead.gradient_steps if lead.gradient_steps >= 0 else steps
                if gradient_steps > 0:
                    self.train(gradient_steps, lead.batch_size)
        collector.finish()
        for callback in callbacks:
            callback.on_training_end()
        return self

    def release(self) -> list[SAC]:
        """Hand the members back as independent SB3 models (own weights and Adam states)."""
        if not self._released:
            groups = [self.actor, self.critic] + ([self.entropy] if self.entropy is not None else [])
            for group in groups:
                group.release()
            if self._curiosity is not None:
                self._curiosity.release()
            self.replay.release()
            for name in self._target_names:
                for member in self.members:
                    tensor = member.critic_target.get_parameter(name)
                    tensor.data = tensor.data.clone()
            self._released = True
        return self.members
