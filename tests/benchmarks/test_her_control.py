"""benchmarks/her_control: the two HER arms paired run by run (same market, source, seed), and the
scripted references that say how many goals are reachable. No training."""

from __future__ import annotations

import pandas as pd
import pytest
from her_control import ARMS, goal_sensitivity, scripted_success, summarise


def _row(realisation: int, seed: int, arm: str, success: float) -> dict:
    return {
        "family": "fast",
        "market": "fast:0.25",
        "realisation": realisation,
        "seed": seed,
        "arm": arm,
        "success": success,
        "success_vs_control": success - 0.1,
        "rank_correlation": 0.5,
        "success_low_third": success,
        "success_middle_third": success,
        "success_high_third": success,
        "sharpe": 1.0 + success,
        "goal_sensitivity": 0.5,
        "steer_success": 0.9,
        "flat_success": 0.1,
    }


def test_the_arms_are_paired_run_by_run():
    assert ARMS == {"relabel": None, "no_relabel": 0}  # relabelling as configured against none
    rows = [
        _row(realisation, seed, arm, success + (0.2 if arm == "relabel" else 0.0))
        for realisation, seed, success in ((1, 0, 0.1), (1, 1, 0.3), (2, 0, 0.2), (2, 1, 0.5))
        for arm in ARMS
    ]
    table = summarise(pd.DataFrame(rows))
    # every run is 0.2 better with relabelling, whatever its level: the paired delta is exactly 0.2,
    # and the mean's relative gain is 0.2 / mean(0.1, 0.3, 0.2, 0.5) = +73%
    assert "| fast | 4 | +0.20 [+0.20, +0.20] | +73% | +0.20 [+0.20, +0.20] |" in table
    assert "| fast | relabel | 4 |" in table and "| fast | no_relabel | 4 |" in table
    assert "| 0.90 / 0.10 | 0.50 [0.50, 0.50] |" in table  # scripted references' success, goal sensitivity


def _goal_params():
    """Targets 0–0.4% with a 0.1% tolerance, 12 goal episodes: sized for ``tiny_env_spec``'s split."""
    import dataclasses

    from trading_rl.algorithms.options_her.from_spec import OptionsHerParams

    params = OptionsHerParams()
    return dataclasses.replace(
        params,
        her=dataclasses.replace(params.her, goal_low=0.0, goal_high=0.004, tolerance=0.001),
        evaluation=dataclasses.replace(params.evaluation, goal_episodes=12),
    )


class _Policy:
    """An agent stand-in: ``low_level.predict`` maps a (batched) goal observation to actions."""

    def __init__(self, act):
        self.low_level = self
        self.act = act

    def predict(self, observation, deterministic=True):
        return self.act(observation), None


def test_goal_sensitivity_reads_how_far_the_commanded_goal_moves_the_action():
    """A policy that ignores its goal moves 0; one whose action is the goal (in goal units) over 10
    moves by (0.4 - 0) / 10 = 0.04 between the range's ends (0.4% = 0.4 goal units)."""
    import numpy as np
    from helpers.synthetic_prices import tiny_env_spec

    spec, params = tiny_env_spec(), _goal_params()
    ignores = _Policy(lambda observation: np.ones_like(observation["desired_goal"], dtype=np.float32))
    follows = _Policy(lambda observation: (observation["desired_goal"] / 10.0).astype(np.float32))
    assert goal_sensitivity(ignores, spec, params, seed=3) == 0.0
    assert goal_sensitivity(follows, spec, params, seed=3) == pytest.approx(0.04, rel=1e-6)


def test_the_scripted_references_steer_to_every_target_on_a_rising_market_and_flat_hits_only_the_zero_ones():
    """On a market that rises every bar, holding the cap until the return is within half the tolerance
    of the target, then nothing, lands every target of the range (each bar adds ~0.03% at the 15% cap,
    under the tolerance); never trading ends at 0, inside the tolerance only of targets below it."""
    import numpy as np
    from helpers.synthetic_prices import tiny_env_spec

    from trading_rl.algorithms.options_her.from_spec import goal_episode_targets

    params = _goal_params()
    found = scripted_success(tiny_env_spec(), params, seed=3)
    targets, _ = goal_episode_targets(params, seed=3)
    assert found["steer"] == 1.0
    assert found["flat"] == np.mean(targets <= 0.001) < 0.5
