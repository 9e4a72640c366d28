"""Derived seeds: named roles, the same integers as the salts they replace, independent streams."""

import numpy as np

from trading_rl.seeding import SeedRole, seed_sequence, seeds, trial_seed


def test_roles_keep_the_salts_they_replace():
    """Same seed, same numbers as before the roles had names (walk-forward, V-trace, ES)."""
    bound = 2**31 - 1
    assert trial_seed(42, SeedRole.WALK_FORWARD_FOLD, 3) == int(
        np.random.SeedSequence([42, 0, 3]).generate_state(1)[0] % bound
    )
    assert trial_seed(42, SeedRole.WALK_FORWARD_AGENT, 1, 2) == int(
        np.random.SeedSequence([42, 1, 1, 2]).generate_state(1)[0] % bound
    )
    assert seeds(42, SeedRole.VTRACE_ACTORS, 4) == [
        int(s) for s in np.random.SeedSequence([42, 7]).generate_state(4) % bound
    ]
    spawned = [child.generate_state(2).tolist() for child in seed_sequence(42, SeedRole.EVOLUTION_STRATEGY).spawn(3)]
    assert spawned == [child.generate_state(2).tolist() for child in np.random.SeedSequence([42, 11]).spawn(3)]


def test_roles_are_distinct_and_give_distinct_seeds():
    assert len({int(role) for role in SeedRole}) == len(SeedRole)
    derived = {trial_seed(7, role, 0) for role in SeedRole}
    assert len(derived) == len(SeedRole)
    assert all(0 <= value < 2**31 - 1 for value in derived)
    assert trial_seed(7, SeedRole.GOAL_EPISODES, 0) != trial_seed(7, SeedRole.GOAL_EPISODES, 1)
