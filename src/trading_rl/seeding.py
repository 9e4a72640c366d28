"""Seeds derived from the run's one ``seed``: one derivation, one named role per random stream.

Every stream that is not the agent's own training seed takes its seed from ``trial_seed(seed, role,
*indices)`` (or its generator from ``seed_sequence(seed, role)``), so two streams never share a seed
by accident (``seed + 1`` for one and ``seed + index`` for another would) and a stream's seed does
not move when another stream is added. The role values are the salts the streams used before they
had names, kept so that the same seed gives the same numbers.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

# SB3 and NumPy take seeds below 2**31 - 1.
_SEED_BOUND = 2**31 - 1


class SeedRole(IntEnum):
    """What a derived seed is for."""

    WALK_FORWARD_FOLD = 0  # one fold's baseline rollouts (indices: fold)
    WALK_FORWARD_AGENT = 1  # one walk-forward agent chain (indices: stream, 0 for every agent; seed index)
    GOAL_EPISODES = 2  # options_her's goal-achievement episodes (indices: episode)
    VTRACE_ACTORS = 7  # the V-trace actors' env seeds
    EVOLUTION_STRATEGY = 11  # ES: initial parameters, perturbation noise, episode starts
    POPULATION_MEMBER = 13  # a population member's own draws: actor noise, replay indices


def seed_sequence(seed: int, role: SeedRole) -> np.random.SeedSequence:
    """NumPy's ``SeedSequence`` of ``role``'s stream (spawn or draw several seeds from it)."""
    return np.random.SeedSequence([int(seed), int(role)])


def trial_seed(seed: int, role: SeedRole, *indices: int) -> int:
    """An independent, reproducible seed for ``role`` and non-negative integer ``indices``."""
    return int(np.random.SeedSequence([int(seed), int(role), *map(int, indices)]).generate_state(1)[0] % _SEED_BOUND)


def seeds(seed: int, role: SeedRole, count: int) -> list[int]:
    """``count`` independent seeds of ``role``'s stream (one per actor or worker)."""
    return [int(value) for value in seed_sequence(seed, role).generate_state(count) % _SEED_BOUND]
