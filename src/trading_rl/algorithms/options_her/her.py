"""Hindsight Experience Replay on SB3's ``HerReplayBuffer``, its settings and goal-achievement statistics.

SB3's buffer serves this project: the goal-conditioned view (``algorithms.options_her.goal``) gives it the Dict
observation and the vectorised ``compute_reward`` it needs, the option wrapper only extends the
``observation`` entry (goals untouched), and relabelling keeps every other part of a transition.
Storage, episode bookkeeping and goal selection (``future`` / ``episode``) stay SB3's.

Only ``sample`` is replaced (:class:`FastHerReplayBuffer`), for two reasons. The view's reward has a
P&L part beside the goal part, and relabelling must swap only the goal part (SB3 replaces the whole
reward with ``compute_reward``). And speed: SB3 scans the whole
episode-length table to list the valid transitions on every batch (O(buffer size), ~0.1 ms at 100k)
and gathers the Dict observation twice (real and relabelled halves, then ``torch.cat``). Here valid
transitions are drawn by rejection from the written rows (O(batch)) and gathered once; the batch
has the same distribution (i.i.d. uniform over transitions of completed episodes, ``k / (k + 1)``
of them relabelled).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from stable_baselines3 import HerReplayBuffer
from stable_baselines3.common.type_aliases import DictReplayBufferSamples

from trading_rl.algorithms.options_her.goal import GoalConditionedView
from trading_rl.config import Section, setting

GOAL_SELECTION_STRATEGIES = ("future", "episode")
_GOAL_KEYS = ("goal_low", "goal_high", "tolerance", "reward_distance", "goal_unit", "pnl_weight", "goal_weight")


@dataclass(frozen=True, kw_only=True)
class HerParams(Section):
    """``options_her.her``: SB3's relabelling and the goal view's reward."""

    enabled: bool = True
    # Relabelled fraction 4 / (4 + 1) = 0.8; 0 keeps the goals and their reward but relabels nothing:
    # HER's own ablation at equal steps (benchmarks/her_control.py).
    n_sampled_goal: int = setting(4, interval="[0, inf)")
    goal_selection_strategy: str = setting("future", choices=GOAL_SELECTION_STRATEGIES)
    # The target return drawn per episode from [goal_low, goal_high].
    goal_low: float = 0.0
    goal_high: float = 0.05
    # One day's P&L noise of a position at the 15% cap is ~0.18% (daily index volatility ~1.2% x
    # 0.15), so a 0.1% tolerance made success a coin toss on the last day even for an agent that
    # steered perfectly. 0.5% is ~3 such days: a policy that approaches the target and then reduces
    # its position can land inside it, while the ~4% spread of 500-bar episode returns leaves a
    # goal-agnostic policy a small chance (the control in ``evaluate_from_spec`` measures it).
    tolerance: float = setting(0.005, interval="[0, inf)")
    reward_distance: float = setting(0.05, interval="(0, inf)")
    goal_unit: float = 0.01  # goals enter the network as return / 0.01 (5% -> 5)
    # Step reward: pnl_weight x P&L at the warm-start source's reward scale + goal_weight x goal
    # reward, so agents with and without HER optimise comparable objectives.
    pnl_weight: float = 1.0
    goal_weight: float = 0.1


def relabelled_fraction(n_sampled_goal: int) -> float:
    """Share of a sampled batch that carries a relabelled goal: ``k / (k + 1)`` (0.8 for k = 4)."""
    return n_sampled_goal / (n_sampled_goal + 1.0)


class FastHerReplayBuffer(HerReplayBuffer):
    """SB3's ``HerReplayBuffer`` with an O(batch) ``sample`` that gathers each array once."""

    _REJECTION_ROUNDS = 4

    def _sample_flat_indices(self, batch_size: int) -> np.ndarray:
        """Flat ``(row, env)`` indices drawn i.i.d. uniformly from transitions of completed episodes.

        Candidates are uniform over the written rows; keeping the accepted ones in draw order is
        uniform over the valid ones. When few rows are valid (early in training) the rounds run out
        and the exact list of valid indices is built, as SB3 does.
        """
        written = (self.buffer_size if self.full else self.pos) * self.n_envs
        ep_length = self.ep_length.reshape(-1)
        accepted: list[np.ndarray] = []
        count = 0
        for _ in range(self._REJECTION_ROUNDS if written else 0):
            candidates = np.random.randint(0, written, size=batch_size + batch_size // 2)
            kept = candidates[ep_length[candidates] > 0]
            accepted.append(kept)
            count += kept.size
            if count >= batch_size:
                return np.concatenate(accepted)[:batch_size]
        valid = np.flatnonzero(ep_length > 0)
        if valid.size == 0:
            raise RuntimeError(
                "Unable to sample before the end of the first episode: choose learning_starts greater "
                "than the number of steps of one episode."
            )
        return np.random.choice(valid, size=batch_size, replace=True)

    # SB3's own HerReplayBuffer.sample returns dict samples too: its DictReplayBuffer base narrows
    # ReplayBuffer.sample's return type, which mypy reports as an incompatible override.
    def sample(self, batch_size: int, env=None) -> DictReplayBufferSamples:  # type: ignore[override]
        rows, envs = np.divmod(self._sample_flat_indices(batch_size), self.n_envs)
        observations = {key: values[rows, envs] for key, values in self.observations.items()}
        next_observations = {key: values[rows, envs] for key, values in self.next_observations.items()}
        rewards = self.rewards[rows, envs].astype(np.float32)
        relabelled = int(self.her_ratio * batch_size)
        if relabelled:
            goals = self._sample_goals(rows[:relabelled], envs[:relabelled])
            stored_goals = next_observations["desired_goal"][:relabelled].copy()
            observations["desired_goal"][:relabelled] = goals
            next_observations["desired_goal"][:relabelled] = goals
            if self.env is None:
                raise RuntimeError("FastHerReplayBuffer needs its VecEnv to recompute relabelled rewards")
            # The stored reward is P&L part + goal part(stored goal); relabelling swaps the goal part
            # for reward(achieved goal of s_{t+1}, new goal), as SB3 does for a pure goal reward.
            achieved = next_observations["achieved_goal"][:relabelled]
            # (The goal view's reward reads no ``info``, so none is copied out of the buffer.)
            old_part, new_part = self.env.env_method(
                "compute_reward",
                np.concatenate([achieved, achieved]),
                np.concatenate([stored_goals, goals]),
                [{}] * (2 * relabelled),
                indices=[0],
            )[0].reshape(2, relabelled)
            rewards[:relabelled] += new_part - old_part
        dones = self.dones[rows, envs] * (1 - self.timeouts[rows, envs])
        # Dict observations normalise to dicts.
        observations = cast(dict[str, np.ndarray], self._normalize_obs(observations, env))
        next_observations = cast(dict[str, np.ndarray], self._normalize_obs(next_observations, env))

        # every array here is a fresh gather, so torch may share its memory instead of copying it
        def tensor(array: np.ndarray):
            return self.to_torch(array, copy=False)

        return DictReplayBufferSamples(
            observations={key: tensor(value) for key, value in observations.items()},
            actions=tensor(self.actions[rows, envs]),
            next_observations={key: tensor(value) for key, value in next_observations.items()},
            dones=tensor(dones).reshape(-1, 1),
            rewards=tensor(self._normalize_reward(rewards.reshape(-1, 1), env)),
        )


def replay_buffer_kwargs(her: HerParams) -> dict[str, Any]:
    """``replay_buffer_kwargs`` for an SB3 off-policy model using ``HerReplayBuffer``."""
    return {"n_sampled_goal": int(her.n_sampled_goal), "goal_selection_strategy": her.goal_selection_strategy}


def goal_view(env, her: HerParams, pnl_scale: float = 1.0) -> GoalConditionedView:
    """``env`` seen through HER's goal view; ``pnl_scale`` is the learner's P&L reward scale."""
    return GoalConditionedView(env, **{key: getattr(her, key) for key in _GOAL_KEYS}, pnl_scale=pnl_scale)


def goal_achievement(achieved: np.ndarray, desired: np.ndarray, tolerance: float) -> dict[str, float]:
    """Per-episode final return vs its target: share within ``tolerance`` (HER's success), share
    at or above the target, and the mean absolute miss (return units)."""
    achieved = np.asarray(achieved, dtype=np.float64)
    desired = np.asarray(desired, dtype=np.float64)
    if achieved.size == 0:
        raise ValueError("goal_achievement needs at least one episode")
    miss = np.abs(achieved - desired)
    return {
        "episodes": int(achieved.size),
        "goal_achievement_rate": float(np.mean(miss <= tolerance)),
        "target_reached_rate": float(np.mean(achieved >= desired)),
        "mean_abs_goal_miss": float(miss.mean()),
        "mean_final_return": float(achieved.mean()),
        "mean_target_return": float(desired.mean()),
    }


GOAL_LEVELS = 3  # the goal range in thirds: success per level of the commanded target


def goal_responsiveness(achieved, desired, tolerance: float, level: float = 0.9) -> dict[str, Any]:
    """Does the achieved return follow the commanded goal? Spearman's rank correlation of target and
    final return over episodes, with a paired bootstrap interval, and the success rate per third
    of the targets' range (an agent that ignores its goal hits only the targets near its usual
    return)."""
    from scipy.stats import spearmanr

    from trading_rl.evaluation.metrics.bootstrap import bootstrap_ci

    achieved, desired = np.asarray(achieved, dtype=np.float64), np.asarray(desired, dtype=np.float64)

    def rank_correlation(episodes: np.ndarray) -> float:
        chosen = episodes.astype(int)
        if np.ptp(achieved[chosen]) == 0 or np.ptp(desired[chosen]) == 0:
            return 0.0  # nothing to rank (one episode drawn over and over)
        return float(spearmanr(desired[chosen], achieved[chosen]).statistic)

    correlation, low, high = bootstrap_ci(np.arange(achieved.size), rank_correlation, level)
    edges = np.linspace(desired.min(), desired.max(), GOAL_LEVELS + 1)
    levels = np.clip(np.searchsorted(edges, desired, side="right") - 1, 0, GOAL_LEVELS - 1)
    hits = np.abs(achieved - desired) <= tolerance
    return {
        "goal_rank_correlation": correlation,
        "goal_rank_correlation_ci": [low, high],
        "goal_level_edges": edges.tolist(),
        "achievement_rate_by_level": [
            float(hits[levels == k].mean()) if np.any(levels == k) else None for k in range(GOAL_LEVELS)
        ],
    }


def goal_achievement_against_control(
    achieved: np.ndarray, control: np.ndarray, desired: np.ndarray, tolerance: float, level: float = 0.9
) -> dict[str, Any]:
    """Goal achievement of the agent next to a goal-agnostic control on the same episodes.

    ``control`` holds the final returns of the same agent from the same starts when it was shown a
    shuffled target: whatever it achieves against the true ``desired`` is what ignoring the goal
    gives. The difference in success rates comes with a paired bootstrap interval at ``level``;
    HER "works" only when that interval excludes zero.
    """
    from trading_rl.evaluation.metrics.bootstrap import bootstrap_ci

    agent = goal_achievement(achieved, desired, tolerance)
    reference = goal_achievement(control, desired, tolerance)
    hits = np.abs(np.asarray(achieved, dtype=np.float64) - desired) <= tolerance
    control_hits = np.abs(np.asarray(control, dtype=np.float64) - desired) <= tolerance
    difference, low, high = bootstrap_ci(hits.astype(float) - control_hits.astype(float), np.mean, level)
    miss_gap = np.abs(np.asarray(control) - desired) - np.abs(np.asarray(achieved) - desired)
    return {
        **agent,
        "control": {key: value for key, value in reference.items() if key != "episodes"},
        "control_method": "same agent, same episode starts, targets shuffled across episodes",
        "achievement_difference": difference,
        "achievement_difference_ci": [low, high],
        "ci_level": level,
        "beats_control": bool(low > 0.0),
        "mean_miss_reduction": float(miss_gap.mean()),
        **goal_responsiveness(achieved, desired, tolerance, level),
        "control_responsiveness": goal_responsiveness(control, desired, tolerance, level),
        # per episode, so runs can be pooled (seeds) with the same paired bootstrap
        "episode_hits": hits.astype(int).tolist(),
        "control_episode_hits": control_hits.astype(int).tolist(),
        "episode_targets": np.asarray(desired, dtype=np.float64).tolist(),
        "episode_final_returns": np.asarray(achieved, dtype=np.float64).tolist(),
    }
