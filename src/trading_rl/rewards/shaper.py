"""The full shaper — objectives, state-conditioned weights, potential term — and its gym wrapper.

``RewardShaper`` scores ``n`` envs at once (arrays, frozen numpy networks), so a vectorised
collector pays its Python overhead once per batch. Two front ends: ``ShapedRewardVecEnv`` (an SB3
``VecEnvWrapper``: one shaper call per step of all envs — how the phase trains) and
``ShapedRewardWrapper`` (the gymnasium ``Wrapper`` API for one env, so any agent can train on it).

Per step, for the transition ``(s, a, s')``:

    r' = Σ_i w_i(s) · c_i / scale_i  +  β · (γ·Φ(s') − Φ(s))        (Φ(s') = 0 when terminated)

with ``c_i`` the five objectives (``objectives.py``), ``w`` the weight network (or the prior),
``scale_i`` their fitted RMS, Φ the potential (or 0) and β the adaptive shaping weight. The env's own
reward travels on in ``info["base_reward"]``.

The networks read a compact *context* of the observation by field name: the portfolio state block
and the latest bar of every feature. The exploration objective's ICM term uses a frozen copy of the
agent's ICM (encoder + forward model, normalised with its running statistics, clipped).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper

from trading_rl.config import Section, setting
from trading_rl.envs.layout import STATE_FIELDS, ObservationLayout
from trading_rl.rewards.frozen import FrozenMLP
from trading_rl.rewards.objectives import (
    OBJECTIVES,
    ObjectiveParams,
    ObjectiveTracker,
    Transitions,
    n_novelty_cells,
    novelty_cells,
)
from trading_rl.rewards.potential import AdaptiveShapingWeight, potential_shaping
from trading_rl.rewards.weights import InitialWeights


@dataclass(frozen=True, kw_only=True)
class ShapingParams(Section):
    """``reward_shaper.shaping``: the shaping weight β and how it adapts (``AdaptiveShapingWeight``)."""

    initial_weight: float = 0.1
    adaptation_rate: float = 0.01
    entropy_low: float = 0.3  # beta up when the recent action entropy is below this
    sharpe_high: float = 1.0  # beta down when the recent Sharpe is above this
    adapt_every: int = setting(500, interval="[1, inf)")
    window: int = setting(500, interval="[1, inf)")


def context_indices(layout: ObservationLayout) -> np.ndarray:
    """Observation positions of the networks' context: state fields, then the latest features."""
    names = [*STATE_FIELDS, *(f"feature:{column}" for column in layout.feature_columns)]
    return np.array([layout.index(name) for name in names], dtype=np.int64)


class _FrozenICM:
    """Raw ICM reward ``η·0.5·||f(φ(s), a) − φ(s')||²`` normalised like the live ICM's
    (``log(1 + raw / median) / spread``, clipped) with its statistics as they were when frozen."""

    def __init__(self, icm) -> None:
        self.encoder = FrozenMLP(icm.encoder)
        self.forward_model = FrozenMLP(icm.forward_model)
        self.eta = float(icm.config.eta)
        self.clip = float(icm.config.reward_clip)
        self.median = float(icm.intrinsic_median.value) + 1e-12
        self.spread = float(icm.intrinsic_spread.value) + 1e-8

    def reward(self, features: np.ndarray, actions: np.ndarray, next_features: np.ndarray) -> np.ndarray:
        predicted = self.forward_model(np.concatenate([features, actions.astype(np.float32)], axis=1))
        raw = self.eta * 0.5 * np.square(predicted - next_features).sum(axis=1)
        return np.minimum(np.log1p(raw / self.median) / self.spread, self.clip)


class RewardShaper:
    """Shaped rewards for ``n_envs`` envs sharing one ``layout``; see the module docstring."""

    def __init__(
        self,
        layout: ObservationLayout,
        n_envs: int,
        objectives: ObjectiveParams,
        weight_network=None,
        potential=None,
        icm=None,
        gamma: float = 0.99,
        initial_weights: InitialWeights | None = None,
        *,
        adaptation: ShapingParams,
        periods_per_year: float,
        hold_threshold: float,
    ) -> None:
        """``initial_weights``: the prior weights used without a weight network (default: the
        section's)."""
        self.n_envs = int(n_envs)
        self.gamma = float(gamma)
        self.periods_per_year = float(periods_per_year)
        bins = objectives.exploration.novelty_bins
        self._novelty_index = np.array([layout.index(name) for name in bins], dtype=np.int64)
        self._novelty_edges = [np.asarray(edges, dtype=np.float64) for edges in bins.values()]
        self.tracker = ObjectiveTracker(self.n_envs, objectives, n_novelty_cells(self._novelty_edges))
        self._context = context_indices(layout)
        if weight_network is not None:
            self._weights: FrozenMLP | None = FrozenMLP(weight_network.body)
            self._scale = weight_network.component_scale.detach().cpu().double().numpy()
            self._prior: np.ndarray | None = None
        else:
            self._weights = None
            self._scale = np.ones(len(OBJECTIVES))
            self._prior = (initial_weights or InitialWeights()).vector()
        self._potential: FrozenMLP | None = None
        if potential is not None:
            self._potential = FrozenMLP(potential.body)
            self._phi_mean = float(potential.target_mean)
            self._phi_std = float(potential.target_std)
        self._icm = _FrozenICM(icm) if icm is not None else None
        a = adaptation
        self.adaptive = AdaptiveShapingWeight(
            a.initial_weight, a.adaptation_rate, a.entropy_low, a.sharpe_high, hold_threshold=hold_threshold
        )
        self._adapt_every = int(a.adapt_every)
        self._recent_actions: deque = deque(maxlen=int(a.window))
        self._recent_returns: deque = deque(maxlen=int(a.window))
        self.adaptation_history: list[dict[str, float]] = []
        self.steps = 0
        n = self.n_envs
        self._ctx = np.zeros((n, len(self._context)), dtype=np.float32)  # the networks run in float32
        self._phi = np.zeros(n)
        self._icm_features = np.zeros((n, 0))
        self._reset_stats()

    # ---- networks ------------------------------------------------------------------------------
    def weights(self, contexts: np.ndarray) -> np.ndarray:
        if self._weights is None:
            assert self._prior is not None, "__init__ sets the prior exactly when there is no weight network"
            return np.broadcast_to(self._prior, (len(contexts), len(OBJECTIVES)))
        logits = self._weights(contexts)
        logits -= logits.max(axis=1, keepdims=True)
        weights = np.exp(logits)
        return weights / weights.sum(axis=1, keepdims=True)

    def potential(self, contexts: np.ndarray) -> np.ndarray:
        if self._potential is None:
            return np.zeros(len(contexts))
        return self._phi_mean + self._phi_std * self._potential(contexts)[:, 0]

    # ---- episode flow --------------------------------------------------------------------------
    def reset(self, rows, observations: np.ndarray, equity) -> None:
        """Start episodes for envs ``rows`` from their first observations ``(len(rows), dim)``."""
        rows = np.asarray(rows, dtype=np.int64)
        observations = np.asarray(observations).reshape(len(rows), -1)
        self.tracker.reset(rows, equity)
        contexts = observations[:, self._context]
        self._ctx[rows] = contexts
        self._phi[rows] = self.potential(contexts)
        if self._icm is not None:
            features = self._icm.encoder(observations)
            if self._icm_features.shape[1] != features.shape[1]:
                self._icm_features = np.zeros((self.n_envs, features.shape[1]))
            self._icm_features[rows] = features

    def step(self, next_observations: np.ndarray, actions, infos: list[dict], terminated) -> dict[str, np.ndarray]:
        """Shaped rewards of one step of every env; returns ``reward``, ``components`` (raw),
        ``weights`` and ``shaping`` (the potential term before β), one row per env."""
        next_observations = np.asarray(next_observations).reshape(self.n_envs, -1)  # float32 from the env
        actions = np.asarray(actions, dtype=np.float64).reshape(self.n_envs, -1)
        intrinsic = None
        if self._icm is not None:
            next_features = self._icm.encoder(next_observations)
            intrinsic = self._icm.reward(self._icm_features, actions, next_features)
            self._icm_features = next_features
        cells = novelty_cells(next_observations[:, self._novelty_index], self._novelty_edges)
        equity_before = self.tracker.equity
        components = self.tracker.step(Transitions.from_infos(infos, actions[:, 0], intrinsic, cells))
        weights = self.weights(self._ctx)
        scaled = components / self._scale
        contexts = next_observations[:, self._context]
        phi_next = self.potential(contexts)
        shaping = potential_shaping(self._phi, phi_next, self.gamma, terminated)
        weighted = weights * scaled
        reward = weighted.sum(axis=1) + self.adaptive.value * shaping
        self._ctx, self._phi = contexts, phi_next
        self._accumulate(scaled, weighted, weights, shaping, reward)
        self._adapt(actions[:, 0], np.log(self.tracker.equity / equity_before))
        return {"reward": reward, "components": components, "weights": weights, "shaping": shaping}

    def _adapt(self, actions: np.ndarray, log_returns: np.ndarray) -> None:
        self._recent_actions.extend(actions.tolist())
        self._recent_returns.extend(log_returns.tolist())
        self.steps += 1
        if self.steps % self._adapt_every == 0:
            seen = self.adaptive.update(
                np.asarray(self._recent_actions), np.asarray(self._recent_returns), self.periods_per_year
            )
            self.adaptation_history.append({"step": float(self.steps), **seen})

    # ---- statistics for logging ----------------------------------------------------------------
    def _reset_stats(self) -> None:
        k = len(OBJECTIVES)
        self._sum_scaled = np.zeros(k)
        self._sum_abs_weighted = np.zeros(k)
        self._sum_weights = np.zeros(k)
        self._sum_shaping = 0.0
        self._sum_reward = 0.0
        self._count = 0

    def _accumulate(self, scaled, weighted, weights, shaping, reward) -> None:
        self._sum_scaled += scaled.sum(axis=0)
        self._sum_abs_weighted += np.abs(weighted).sum(axis=0)
        self._sum_weights += weights.sum(axis=0)
        self._sum_shaping += float(np.sum(shaping))
        self._sum_reward += float(np.sum(reward))
        self._count += len(reward)

    def pop_stats(self) -> dict[str, float]:
        """Means since the last call: every scaled component, its share of the total absolute weighted
        reward, every weight, the potential term, the shaping weight β and the shaped reward."""
        count = max(self._count, 1)
        total = self._sum_abs_weighted.sum()
        stats: dict[str, float] = {}
        for i, name in enumerate(OBJECTIVES):
            stats[f"reward/{name}_component"] = float(self._sum_scaled[i] / count)
            stats[f"reward/{name}_share"] = float(self._sum_abs_weighted[i] / total) if total > 0 else 0.0
            stats[f"reward/weight_{name}"] = float(self._sum_weights[i] / count)
        stats["reward/shaping_term"] = self._sum_shaping / count
        stats["reward/shaping_weight"] = self.adaptive.value
        stats["reward/shaped_reward"] = self._sum_reward / count
        self._reset_stats()
        return stats


class ShapedRewardWrapper(gym.Wrapper):
    """Replaces the env's reward with ``shaper``'s (built for one env); the env's reward goes to
    ``info["base_reward"]``, the raw objectives to ``info["reward_components"]`` (``OBJECTIVES``
    order), the weights to ``info["objective_weights"]`` and the potential term to
    ``info["shaping_term"]``."""

    def __init__(self, env: gym.Env, shaper: RewardShaper) -> None:
        if shaper.n_envs != 1:
            raise ValueError(f"ShapedRewardWrapper needs a shaper for one env, got n_envs={shaper.n_envs}")
        super().__init__(env)
        self.shaper = shaper

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.shaper.reset([0], obs[None], info["equity"])
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        out = self.shaper.step(obs[None], np.asarray(action, dtype=np.float64).reshape(1, -1), [info], [terminated])
        info["base_reward"] = reward
        info["reward_components"] = out["components"][0]
        info["objective_weights"] = out["weights"][0]
        info["shaping_term"] = float(out["shaping"][0])
        return obs, float(out["reward"][0]), terminated, truncated, info


class ShapedRewardVecEnv(VecEnvWrapper):
    """Replaces the rewards of an SB3 ``VecEnv`` with ``shaper``'s (built for ``venv.num_envs`` envs),
    scoring every env's step in one batched call. The env's reward goes to ``info["base_reward"]``;
    the components, weights and potential term are in ``shaper.pop_stats()``.

    SB3 vector envs reset an env as soon as its episode ends: the transition is scored on
    ``info["terminal_observation"]`` (terminal Φ = 0 unless the end is a time limit), then the
    shaper restarts that env from the new first observation and its reset ``info["equity"]``.
    """

    def __init__(self, venv: VecEnv, shaper: RewardShaper) -> None:
        if shaper.n_envs != venv.num_envs:
            raise ValueError(f"ShapedRewardVecEnv needs a shaper for {venv.num_envs} envs, got n_envs={shaper.n_envs}")
        super().__init__(venv)
        self.shaper = shaper
        self._actions = np.zeros((venv.num_envs, 1))

    def reset(self):
        obs = self.venv.reset()
        self.shaper.reset(np.arange(self.num_envs), obs, self._reset_equity(range(self.num_envs)))
        return obs

    def _reset_equity(self, rows) -> list[float]:
        """Equity at the last reset of envs ``rows``, from the innermost vector env's reset infos
        (vector-env wrappers in between, e.g. ``VecMonitor``, keep empty ones of their own)."""
        venv = self.venv
        while isinstance(venv, VecEnvWrapper):
            venv = venv.venv
        infos = venv.reset_infos
        missing = [int(row) for row in rows if "equity" not in infos[row]]
        if missing:
            raise ValueError(
                f"ShapedRewardVecEnv: the reset info of env(s) {missing} has no 'equity' (not a trading env?)"
            )
        return [infos[row]["equity"] for row in rows]

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions
        self.venv.step_async(actions)

    def step_wait(self):
        obs, rewards, dones, infos = self.venv.step_wait()
        ended = np.flatnonzero(dones)
        next_obs = obs
        terminated = dones
        if ended.size:
            next_obs = obs.copy()
            terminated = dones.copy()
            for row in ended:
                next_obs[row] = infos[row]["terminal_observation"]
                terminated[row] = not infos[row].get("TimeLimit.truncated", False)
        out = self.shaper.step(next_obs, self._actions, infos, terminated)
        for info, reward in zip(infos, rewards.tolist()):
            info["base_reward"] = reward
        if ended.size:
            self.shaper.reset(ended, obs[ended], self._reset_equity(ended))
        return obs, out["reward"].astype(np.float32), dones, infos
