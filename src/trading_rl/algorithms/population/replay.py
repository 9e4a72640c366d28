"""The population members' replay buffers as one set of pre-allocated tensors on the learner's device.

Each member's SB3 ``ReplayBuffer`` becomes one row of stacked tensors ``[N, capacity, ...]``; a
population step adds every member's transition with one indexed write, and a gradient step samples
every member's batch with one gather, its indices one ``randint`` per member from the member's own
random stream, and no copy back to the host. Each member keeps its own capacity, write position and
fill state, and its batch is drawn uniformly from its own stored transitions, as SB3's
``ReplayBuffer.sample`` draws it (from a torch generator, not NumPy's). On the CPU the members' own
buffer arrays are views of the rows while the population lives (no second copy); ``release`` hands
every member its buffer back, contents, write position and fill state as SB3 would have left them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples

from trading_rl.algorithms.population.membership import PopulationError

# SB3 ReplayBuffer arrays: name -> trailing shape kept per transition (n_envs axis dropped).
_FIELDS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")


class PopulationReplay:
    """``buffers`` (plain SB3 ``ReplayBuffer``, one env each) stacked on ``device``."""

    def __init__(self, buffers: Sequence[ReplayBuffer], device: th.device) -> None:
        for i, buffer in enumerate(buffers):
            if type(buffer) is not ReplayBuffer:
                raise PopulationError(
                    f"member {i}'s replay buffer is a {type(buffer).__name__}; the population stacks plain SB3 "
                    "ReplayBuffer only (replay_buffer_class: null)"
                )
            if buffer.n_envs != 1 or buffer.optimize_memory_usage:
                raise PopulationError(
                    f"member {i}'s replay buffer has n_envs={buffer.n_envs}, "
                    f"optimize_memory_usage="
                    f"{buffer.optimize_memory_usage}; the population stacks one-env buffers that keep next observations"
                )
            if buffer.observations.shape[2:] != buffers[0].observations.shape[2:]:
                raise PopulationError(f"member {i}'s observations differ in shape from member 0's")
        self.buffers = list(buffers)
        self.device = device
        self.capacity = np.array([b.buffer_size for b in buffers], dtype=np.int64)
        self.pos = np.array([b.pos for b in buffers], dtype=np.int64)
        self.full = np.array([b.full for b in buffers], dtype=bool)
        self._row_starts = th.arange(len(buffers), device=device)[:, None] * int(self.capacity.max())
        self._on_cpu = th.device(device).type == "cpu"
        self.tensors: dict[str, th.Tensor] = {}
        for name in _FIELDS:
            self.tensors[name] = self._stack(name)

    def _stack(self, name: str) -> th.Tensor:
        """Field ``name`` of every buffer as ``[N, max capacity, ...]`` (stored transitions copied, the
        rest left unwritten); on the CPU each buffer's array becomes a view of its row at once, so
        memory stays that of one copy."""
        first = getattr(self.buffers[0], name)
        shape = (len(self.buffers), int(self.capacity.max()), *first.shape[2:])
        stacked = th.empty(shape, dtype=th.from_numpy(first[:0]).dtype, device=self.device)
        for i, buffer in enumerate(self.buffers):
            values = getattr(buffer, name)
            stored = self._stored(i)
            stacked[i, :stored] = th.from_numpy(values[:stored].reshape(stored, *first.shape[2:]))
            if self._on_cpu:
                view = stacked[i, : len(values)].numpy()
                setattr(buffer, name, view.reshape(values.shape))
        return stacked

    def _stored(self, i: int) -> int:
        return int(self.capacity[i] if self.full[i] else self.pos[i])

    def add(self, obs, next_obs, actions, rewards, dones, timeouts) -> None:
        """One transition per member (arrays with the member axis first), at each member's write position."""
        flat = self._row_starts[:, 0] + th.as_tensor(self.pos, device=self.device)
        for name, values in zip(_FIELDS, (obs, next_obs, actions, rewards, dones, timeouts)):
            target = self.tensors[name]
            rows = th.as_tensor(values, device=self.device).to(target.dtype).view(len(flat), *target.shape[2:])
            target.flatten(0, 1).index_copy_(0, flat, rows)
        self.pos += 1
        wrapped = self.pos == self.capacity
        self.full |= wrapped
        self.pos[wrapped] = 0

    def sample(self, batch_size: int, streams: Sequence[th.Generator]) -> ReplayBufferSamples:
        """``batch_size`` transitions per member, uniformly from its stored ones, drawn from its own
        random stream (``streams[i]``): ``[N, batch, ...]`` (dones without the timeouts, as SB3's
        ``ReplayBuffer.sample``)."""
        upper = np.where(self.full, self.capacity, self.pos)
        if (upper == 0).any():
            raise PopulationError("a member's replay buffer is empty; collect transitions before sampling")
        bounds = th.as_tensor(upper, device=self.device)[:, None]
        draws = [th.randint(0, 2**62, (batch_size,), generator=stream, device=self.device) for stream in streams]
        # Row-major positions in the [N · capacity] flattened fields: one index_select per field.
        flat = (th.stack(draws) % bounds).add_(self._row_starts).view(-1)
        picked = {
            name: tensor.flatten(0, 1).index_select(0, flat).view(len(upper), batch_size, *tensor.shape[2:])
            for name, tensor in self.tensors.items()
        }
        return ReplayBufferSamples(
            observations=picked["observations"].float(),
            actions=picked["actions"].float(),
            next_observations=picked["next_observations"].float(),
            dones=(picked["dones"] * (1 - picked["timeouts"]))[..., None].float(),
            rewards=picked["rewards"][..., None].float(),
        )

    def release(self) -> None:
        """Every member's buffer owns its arrays again, with its write position and fill state."""
        for i, buffer in enumerate(self.buffers):
            stored = self._stored(i)
            for name in _FIELDS:
                values = getattr(buffer, name)
                owned = np.zeros(values.shape, dtype=values.dtype)
                owned[:stored] = self.tensors[name][i, :stored].cpu().numpy().reshape(owned[:stored].shape)
                setattr(buffer, name, owned)
            buffer.pos = int(self.pos[i])
            buffer.full = bool(self.full[i])
        self.tensors = {}
