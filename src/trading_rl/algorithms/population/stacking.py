"""The population's stacked state: each member's tensors as one row of a leading member axis.

``_AdamGroup`` holds one SB3 optimiser per member as stacked leaves with their Adam moments and
per-member step counts (N independent ``torch.optim.Adam`` / ``AdamW``, elementwise); while bound,
every member's tensor is a view of its row. ``_PopulationCuriosity`` is the curious members' ICMs as
one computation (``SACWithICM.curious_batch`` for all of them at once). ``PopulationSAC``
(``population_sac``) builds both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch as th
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from torch.func import stack_module_state

from trading_rl.algorithms.population.batched_icm import (
    CuriosityPass,
    check_parameter_names,
    curiosity_forward,
    curiosity_gradients,
)
from trading_rl.algorithms.population.membership import PopulationError
from trading_rl.algorithms.sac_icm.icm import (
    IntrinsicCuriosityModule,
    MovingAverage,
    curiosity_loss,
    normalised_surprise,
)
from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM, mix_curiosity

# Float32 elements in 64 bytes, torch's widest CPU vector (AVX-512): the fused Adam kernel's vector
# loop takes whole multiples of it and leaves the rest of a tensor to a scalar loop that rounds
# differently (no fused multiply-add).
_VECTOR_ELEMENTS = 16


@dataclass
class _PaddedRows:
    """A stacked leaf whose member rows are not whole vectors, kept in rows padded to whole vectors
    (the leaf itself, its Adam moments and its gradient for the fused step are views of them): every
    element then takes the fused Adam kernel's vector loop, as in any other population. Over the
    unpadded stack, the kernel's scalar tail would fall on the last member's last elements for some
    population sizes and not others, so a member's numbers would depend on how many members share
    its population."""

    param: th.Tensor  # [N, padded row]
    grad: th.Tensor
    exp_avg: th.Tensor
    exp_avg_sq: th.Tensor

    @classmethod
    def around(cls, param: th.Tensor, exp_avg: th.Tensor, exp_avg_sq: th.Tensor) -> _PaddedRows:
        n, row = param.shape[0], param[0].numel()
        padded = -(-row // _VECTOR_ELEMENTS) * _VECTOR_ELEMENTS
        buffers = [th.zeros(n, padded, dtype=param.dtype, device=param.device) for _ in range(4)]
        for buffer, values in zip((buffers[0], buffers[2], buffers[3]), (param, exp_avg, exp_avg_sq)):
            buffer[:, :row] = values.detach().reshape(n, row)
        return cls(*buffers)

    def views(self, shape: th.Size, requires_grad: bool) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        """The leaf (a view that autograd treats as a leaf) and its moments as ``shape`` tensors."""
        row = shape[1:].numel()
        leaf = self.param[:, :row].view(shape).requires_grad_(requires_grad)
        return leaf, self.exp_avg[:, :row].view(shape), self.exp_avg_sq[:, :row].view(shape)

    def load_grad(self, grad: th.Tensor) -> th.Tensor:
        self.grad[:, : grad[0].numel()] = grad.reshape(len(grad), -1)
        return self.grad


@dataclass
class _AdamGroup:
    """Stacked leaves ``[N, ...]`` of one SB3 optimiser per member, their Adam moments and per-member
    step counts, and the members' own tensors (views into the stack while bound)."""

    params: list[th.Tensor]
    member_tensors: Sequence[Sequence[th.Tensor]]  # [parameter][member]
    optimizers: list[th.optim.Optimizer]
    betas: tuple[float, float]
    eps: float
    weight_decay: np.ndarray  # per member, decoupled (AdamW); zeros for SB3's Adam
    exp_avg: list[th.Tensor] = field(default_factory=list)
    exp_avg_sq: list[th.Tensor] = field(default_factory=list)
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    names: list[str] = field(default_factory=list)
    padded: list[_PaddedRows | None] = field(default_factory=list)  # per leaf, rows not whole vectors

    @classmethod
    def stack(cls, stacked: list[th.Tensor], member_tensors: Sequence[Sequence[th.Tensor]], optimizers, what: str):
        group = optimizers[0].param_groups[0]
        for i, optimizer in enumerate(optimizers):
            settings = optimizer.param_groups[0]
            if not isinstance(optimizer, th.optim.Adam) or settings.get("amsgrad") or settings.get("maximize"):
                raise PopulationError(f"member {i}'s {what} optimiser must be Adam or AdamW (no amsgrad or maximize)")
            decoupled = settings.get("decoupled_weight_decay", False)
            if settings["weight_decay"] and not decoupled:
                raise PopulationError(f"member {i}'s {what} Adam has coupled weight decay (population: none)")
            if (settings["betas"], settings["eps"], decoupled) != (
                group["betas"],
                group["eps"],
                group.get("decoupled_weight_decay", False),
            ):
                raise PopulationError(
                    f"member {i}'s {what} optimiser differs from member 0's (betas, eps, Adam/AdamW); "
                    "the population needs one Adam configuration"
                )
        weight_decay = np.array([float(o.param_groups[0]["weight_decay"]) for o in optimizers], dtype=np.float64)
        adam = cls(stacked, member_tensors, list(optimizers), tuple(group["betas"]), float(group["eps"]), weight_decay)
        steps = []
        for i, optimizer in enumerate(optimizers):
            states = [optimizer.state.get(tensors[i], {}) for tensors in member_tensors]
            steps.append(int(states[0]["step"]) if states[0] else 0)
        for index, param in enumerate(stacked):
            moments = [optimizers[i].state.get(member_tensors[index][i], {}) for i in range(len(optimizers))]
            exp_avg = th.stack([m["exp_avg"] if m else th.zeros_like(param[0]) for m in moments])
            exp_avg_sq = th.stack([m["exp_avg_sq"] if m else th.zeros_like(param[0]) for m in moments])
            padded = _PaddedRows.around(param, exp_avg, exp_avg_sq) if param[0].numel() % _VECTOR_ELEMENTS else None
            if padded is not None:
                adam.params[index], exp_avg, exp_avg_sq = padded.views(param.shape, param.requires_grad)
            adam.exp_avg.append(exp_avg)
            adam.exp_avg_sq.append(exp_avg_sq)
            adam.padded.append(padded)
        adam.steps = np.asarray(steps, dtype=np.int64)
        adam.bind()
        return adam

    def bind(self) -> None:
        """Make every member tensor a view of its row of the stack (in-place updates reach it)."""
        for stacked, tensors in zip(self.params, self.member_tensors):
            for i, tensor in enumerate(tensors):
                tensor.data = stacked.detach()[i]

    def release(self) -> None:
        """Members own their weights again, with their Adam moments and step in their optimisers."""
        for index, tensors in enumerate(self.member_tensors):
            for i, tensor in enumerate(tensors):
                tensor.data = tensor.data.clone()
                settings = self.optimizers[i].param_groups[0]
                # torch keeps the step on the parameter's device for fused/capturable Adam, else on CPU.
                on_device = settings.get("fused") or settings.get("capturable")
                self.optimizers[i].state[tensor] = {
                    "step": th.tensor(float(self.steps[i]), device=tensor.device if on_device else None),
                    "exp_avg": self.exp_avg[index][i].clone(),
                    "exp_avg_sq": self.exp_avg_sq[index][i].clone(),
                }

    @th.no_grad()
    def step(self, grads: Sequence[th.Tensor], learning_rates: np.ndarray) -> None:
        """One ``torch.optim.Adam`` (or ``AdamW``) step per member, member ``i`` with
        ``learning_rates[i]``. Members in lockstep (one learning rate, step count and weight decay:
        a walk-forward population) take torch's fused Adam kernel over the stacked tensors, one pass
        per tensor; it differs from the single-tensor algorithm by float rounding only. Others take
        the single-tensor algorithm with per-member scalars."""
        self.steps += 1
        if (
            (learning_rates == learning_rates[0]).all()
            and (self.steps == self.steps[0]).all()
            and (self.weight_decay == self.weight_decay[0]).all()
        ):
            self._fused_step(grads, float(learning_rates[0]))
            return
        self._per_member_step(grads, learning_rates)

    def _fused_step(self, grads: Sequence[th.Tensor], learning_rate: float) -> None:
        step = th.tensor(float(self.steps[0]), device=self.params[0].device)
        # The kernel walks memory in order: autograd's weight gradients can come transposed.
        contiguous = [
            grad.contiguous() if padded is None else padded.load_grad(grad) for grad, padded in zip(grads, self.padded)
        ]
        leaves, exp_avg, exp_avg_sq = self._fused_state
        fused = th._fused_adamw_ if self.weight_decay[0] else th._fused_adam_
        fused(
            leaves,
            contiguous,
            exp_avg,
            exp_avg_sq,
            [],
            [step] * len(self.params),
            lr=learning_rate,
            beta1=self.betas[0],
            beta2=self.betas[1],
            weight_decay=float(self.weight_decay[0]),
            eps=self.eps,
            amsgrad=False,
            maximize=False,
        )

    @cached_property
    def _fused_state(self) -> tuple[list[th.Tensor], list[th.Tensor], list[th.Tensor]]:
        """The tensors the fused kernel updates: each leaf and its moments, padded rows where padded."""
        state: tuple[list[th.Tensor], list[th.Tensor], list[th.Tensor]] = ([], [], [])
        for index, padded in enumerate(self.padded):
            tensors = (
                (self.params[index], self.exp_avg[index], self.exp_avg_sq[index])
                if padded is None
                else (padded.param, padded.exp_avg, padded.exp_avg_sq)
            )
            for into, tensor in zip(state, tensors):
                into.append(tensor)
        return state

    def _per_member_step(self, grads: Sequence[th.Tensor], learning_rates: np.ndarray) -> None:
        beta1, beta2 = self.betas
        bias_correction1 = 1 - beta1 ** self.steps.astype(np.float64)
        bias_correction2_sqrt = np.sqrt(1 - beta2 ** self.steps.astype(np.float64))
        device, dtype = self.params[0].device, self.params[0].dtype
        step_size = th.as_tensor(learning_rates / bias_correction1, device=device, dtype=dtype)
        denom_scale = th.as_tensor(bias_correction2_sqrt, device=device, dtype=dtype)
        decay = th.as_tensor(1 - learning_rates * self.weight_decay, device=device, dtype=dtype)
        for param, grad, exp_avg, exp_avg_sq in zip(self.params, grads, self.exp_avg, self.exp_avg_sq):
            shape = (-1,) + (1,) * (param.dim() - 1)
            if self.weight_decay.any():
                param.mul_(decay.view(shape))
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (exp_avg_sq.sqrt() / denom_scale.view(shape)).add_(self.eps)
            param.sub_(step_size.view(shape) * (exp_avg / denom))


def _stacked_average(averages: Sequence[MovingAverage], device: th.device) -> MovingAverage:
    """One moving average per member, stacked; each member's buffers become views of its entry."""
    stacked = MovingAverage(th.tensor([a.decay for a in averages], dtype=th.float64, device=device))
    for name in ("average", "weight"):
        rows = th.stack([getattr(a, name).detach() for a in averages])
        setattr(stacked, name, rows)
        for i, average in enumerate(averages):
            getattr(average, name).data = rows[i]
    return stacked


class _PopulationCuriosity:
    """The members' ICMs as one computation: ``SACWithICM.curious_batch`` for every curious member
    at once (their stacked weights through ``batched_icm``'s hand-written forward and backward, one
    AdamW step for all, per-member moving statistics and settings). ``members``: the population's
    members that have an ICM."""

    def __init__(self, members: Sequence[SACWithICM], device: th.device) -> None:
        self.members = list(members)
        icms: list[IntrinsicCuriosityModule] = []
        for member in self.members:
            assert member.icm is not None, "only members with an ICM are curious"
            icms.append(member.icm)
        self._icms = icms
        stacked, _ = stack_module_state(icms)
        names = list(stacked)
        check_parameter_names(names)
        member_tensors = [[icm.get_parameter(name) for icm in icms] for name in names]
        self.weights = _AdamGroup.stack(
            [stacked[name] for name in names], member_tensors, [icm.optimizer for icm in icms], "ICM"
        )
        self.weights.names = names
        self.median = _stacked_average([icm.intrinsic_median for icm in icms], device)
        self.spread = _stacked_average([icm.intrinsic_spread for icm in icms], device)
        self.extrinsic_scale = _stacked_average([icm.extrinsic_scale for icm in icms], device)

        def column(values: Sequence[float], dtype=th.float32) -> th.Tensor:
            return th.tensor(values, dtype=dtype, device=device)

        configs = [icm.config for icm in icms]
        self._eta = column([c.eta for c in configs])[:, None]
        self._beta = column([c.beta for c in configs])
        self._grad_clip = column([c.grad_clip for c in configs])
        self._reward_clip = column([c.reward_clip for c in configs], th.float64)[:, None]
        self._match = th.tensor([c.match_extrinsic_scale for c in configs], device=device)
        self._train_freq = configs[0].train_freq
        self._learning_rates = np.array([icm.optimizer.param_groups[0]["lr"] for icm in icms], dtype=np.float64)
        self._extrinsic_weight = column([m.extrinsic_weight for m in self.members])[:, None, None]
        self._intrinsic_weight = column([m.intrinsic_weight for m in self.members])[:, None, None]
        self._warmup = np.array([m.icm_warmup_steps for m in self.members])

    def learner_rewards(self, batch: ReplayBufferSamples) -> th.Tensor:
        """The members' learner rewards ``[M, batch, 1]`` from their stacked batches (rewards already
        scaled), after one ICM update each when ``icm.train_freq`` says so, as ``curious_batch``."""
        update = self.members[0].icm_batches % self._train_freq == 0
        forward = curiosity_forward(
            self._weights(), batch.observations, batch.actions, batch.next_observations, train=update
        )
        if update:
            self._optimise(forward)
        raw = self._eta * forward.error
        intrinsic = normalised_surprise(raw, self.median, self.spread, self._reward_clip, True)
        mixed, stats = mix_curiosity(
            batch.rewards,
            intrinsic,
            self.extrinsic_scale,
            self._match,
            self._extrinsic_weight,
            self._intrinsic_weight,
        )
        warm = np.array([m.num_timesteps for m in self.members]) >= self._warmup
        values = dict(zip(stats, th.stack(list(stats.values())).tolist()))
        for i, member in enumerate(self.members):
            member.icm_batches += 1
            member._accumulate(
                {name: column[i] for name, column in values.items() if warm[i] or name != "icm/effective_share"}
            )
        warm_rows = th.as_tensor(warm, device=mixed.device)[:, None, None]
        return th.where(warm_rows, mixed, batch.rewards)

    def _weights(self) -> dict[str, th.Tensor]:
        return dict(zip(self.weights.names, self.weights.params))

    def _optimise(self, forward: CuriosityPass) -> None:
        """``IntrinsicCuriosityModule._optimise`` per member: a non-finite loss stops training (the
        member's divergence guard names it), else one step of clipped AdamW."""
        assert forward.inverse_loss is not None, "a training pass has the inverse loss"
        forward_loss = forward.error.mean(dim=1)
        total = curiosity_loss(forward_loss, forward.inverse_loss, self._beta)
        losses = {"forward_loss": forward_loss, "inverse_loss": forward.inverse_loss, "total_loss": total}
        values = th.stack(list(losses.values())).tolist()  # [3][M]
        for i, member in enumerate(self.members):
            member_losses = {name: column[i] for name, column in zip(losses, values)}
            member._raise_if_diverged({f"icm_{name}": value for name, value in member_losses.items()})
            member._accumulate({f"icm/{name}": value for name, value in member_losses.items()})
        by_name = curiosity_gradients(self._weights(), forward, self._beta)
        grads = [by_name[name] for name in self.weights.names]
        # clip_grad_norm_ per member: the 2-norm over all of its ICM gradients.
        norms = th.stack([th.linalg.vector_norm(grad.flatten(1), dim=1) for grad in grads]).norm(dim=0)
        clip = (self._grad_clip / (norms + 1e-6)).clamp(max=1.0)
        for grad in grads:
            grad.mul_(clip.view((-1,) + (1,) * (grad.dim() - 1)))
        self.weights.step(grads, self._learning_rates)

    def release(self) -> None:
        self.weights.release()
        for icm in self._icms:
            for average in (icm.intrinsic_median, icm.intrinsic_spread, icm.extrinsic_scale):
                for buffer in (average.average, average.weight):
                    buffer.data = buffer.data.clone()
