"""Train an SB3 off-policy agent with periodic evaluation, collapse monitoring and a resume checkpoint.

Outputs are objects, not files: the final model and the best-on-evaluation model go back to the
caller (the Kedro layer saves them as catalog datasets). The only file is one rolling resume
checkpoint in ``work_dir`` (``trading_rl.training.resume``: tensors, replay buffer and the run's
history, replaced atomically, tied to the run's identity and read without unpickling), so a killed
run restarts where it stopped; it is deleted once training completes. No tracking library is
imported here: ``metrics_callback`` receives each evaluation's numbers.
"""

from __future__ import annotations

import importlib.util
import io
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback

from trading_rl.evaluation.metrics.metrics import compute_metrics
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
from trading_rl.monitoring.collapse import CollapseMonitorCallback, CollapseThresholds, action_stats, collapse_report
from trading_rl.training.curriculum import curriculum_entry, curriculum_states, load_curriculum_states
from trading_rl.training.params import AgentParams, TrainingDivergedError
from trading_rl.training.resume import ResumeSlot
from trading_rl.training.resume_file import RunIdentity
from trading_rl.training.resume_state import apply_snapshot, snapshot, weights_digest
from trading_rl.training.streaming import MetricsCallback

logger = logging.getLogger(__name__)


@dataclass
class TrainingOutcome:
    """Result of ``train_agent``. ``history`` has one flat dict per evaluation (``timestep``,
    ``eval/*`` deterministic metrics, ``collapse_det/*`` and ``collapse_stoch/*`` statistics,
    ``train/*`` SAC losses, ``icm/*`` diagnostics and ``aux/*`` auxiliary-head losses averaged since
    the previous evaluation, ``curriculum/*`` stage and stage changes when a curriculum runs);
    ``collapse_report`` gates the final evaluation's deterministic actions."""

    model: BaseAlgorithm
    best_model: BaseAlgorithm
    history: list[dict]
    collapse_history: list[dict]
    collapse_report: dict
    best_timestep: int
    resumed_from: int | None


@dataclass
class _RunState:
    """Everything besides the model and replay buffer that a resumed run must get back."""

    history: list[dict] = field(default_factory=list)
    collapse_history: list[dict] = field(default_factory=list)
    best_score: float = -math.inf
    best_timestep: int = -1
    last_eval_step: int = 0
    curriculum: dict = field(default_factory=dict)
    checkpoint_step: int | None = None


def _copy_of(model: BaseAlgorithm, weights: Mapping[str, Any]) -> BaseAlgorithm:
    """A new ``model`` of the same class and settings carrying ``weights`` (a ``snapshot``); the SB3
    zip it goes through is made by this process, never read from disk."""
    buffer = io.BytesIO()
    model.save(buffer)
    buffer.seek(0)
    copy = type(model).load(buffer, device=model.device)
    apply_snapshot(copy, weights, "best model")
    return copy


def _score(value: Any) -> float:
    """Evaluation score for best-model selection; undefined counts as worst."""
    value = math.nan if value is None else float(value)
    return value if math.isfinite(value) else -math.inf


def _mean_metrics(per_episode: list[dict]) -> dict[str, float]:
    """Per-key mean over episodes; ``None`` (undefined) is skipped, all-undefined gives ``nan``."""
    keys = per_episode[0].keys()
    out = {}
    for key in keys:
        values = [float(m[key]) for m in per_episode if m.get(key) is not None]
        out[key] = float(np.mean(values)) if values else math.nan
    return out


def _progress_bar_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("tqdm", "rich"))


def progress_bar_enabled(requested: bool | str | None = "auto") -> bool:
    """SB3's ``progress_bar`` for a training run: ``"auto"`` (or ``None``) shows it only when stdout is
    a terminal, so logs of scheduled or CI runs get no bar; ``True`` always; ``False`` never.
    Without tqdm and rich it is off (with a warning when it was asked for)."""
    if requested in ("auto", None):
        return sys.stdout.isatty() and _progress_bar_available()
    if not isinstance(requested, bool):
        raise ValueError(f"parameter 'progress_bar' must be true, false or auto, got {requested!r}")
    if requested and not _progress_bar_available():
        logger.warning("progress bar requested but tqdm/rich are not installed; training without it")
        return False
    return requested


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class _EvaluationCallback(BaseCallback):
    """Every ``eval_freq`` steps: deterministic evaluation, best-model bookkeeping and
    ``metrics_callback``; every ``resume_every`` steps: the resume checkpoint."""

    def __init__(self, trainer: _Trainer) -> None:
        super().__init__()
        self.trainer = trainer

    def _on_step(self) -> bool:
        self.trainer.on_step(self.model)
        return True


class _Trainer:
    def __init__(
        self,
        make_eval_env: Callable[[], Any],
        params: AgentParams,
        slot: ResumeSlot,
        periods_per_year: float,
        metrics_callback: MetricsCallback | None,
    ) -> None:
        self.training = params.training
        self.collapse = params.collapse
        self.thresholds = CollapseThresholds(
            **{k: getattr(self.collapse, k) for k in ("dominance_max", "entropy_min", "trade_rate_min")}
        )
        self.eval_env = make_eval_env()
        # The env's own trade rule: the monitor, the evaluations and the reports count holds alike.
        self.hold_threshold = float(self.eval_env.unwrapped.config.hold_threshold)
        self.slot = slot
        self.best: dict[str, Any] | None = None
        self.periods_per_year = periods_per_year
        self.metrics_callback = metrics_callback
        self.state = _RunState()
        self.started: tuple[float, int] | None = None  # (monotonic time, timestep) when learn() began
        self.monitor = CollapseMonitorCallback(
            window=self.collapse.window,
            check_freq=self.collapse.check_freq,
            hold_threshold=self.hold_threshold,
            thresholds=self.thresholds,
        )
        self.monitor.history = self.state.collapse_history

    def restore(self, model: BaseAlgorithm) -> int | None:
        """Load this run's resume checkpoint into ``model`` (weights, optimisers, counters, replay
        buffer) and the run state; the timestep resumed from, or ``None`` for a fresh start."""
        checkpoint = self.slot.load(model, {f.name for f in fields(_RunState)})
        if checkpoint is None:
            return None
        # The env's internal state is not checkpointed: start a fresh episode instead of pairing the
        # saved last observation with an env that was just created.
        model._last_obs = None
        self.state = _RunState(**checkpoint.run_state)
        self.best = checkpoint.best
        self.monitor.history = self.state.collapse_history
        load_curriculum_states(model.get_env(), self.state.curriculum)
        logger.info("resuming training from %s at timestep %d", checkpoint.path, model.num_timesteps)
        return model.num_timesteps

    def save_checkpoint(self, model: BaseAlgorithm) -> None:
        self.state.checkpoint_step = model.num_timesteps
        self.state.curriculum = curriculum_states(model.get_env())
        self.slot.save(model, asdict(self.state), self.best)

    def evaluate(self, model: BaseAlgorithm) -> None:
        hold = self.hold_threshold
        policy = policy_from_sb3(model, deterministic=True)
        frames = [run_episode(self.eval_env, policy, seed=episode) for episode in range(self.training.eval_episodes)]
        metrics = _mean_metrics([compute_metrics(frame, self.periods_per_year, hold) for frame in frames])
        rollout = pd.concat(frames, ignore_index=True)
        deterministic = action_stats(
            rollout["action_raw"].to_numpy(),
            rollout["trade_value"].to_numpy(dtype=np.float64) != 0.0,
            hold_threshold=hold,
        )
        stochastic = self.monitor.current_stats()
        entry: dict[str, Any] = {"timestep": model.num_timesteps}
        entry.update({f"eval/{key}": value for key, value in metrics.items()})
        for prefix, stats in (("collapse_det", deterministic), ("collapse_stoch", stochastic)):
            entry.update({f"{prefix}/{key}": value for key, value in stats.items()})
            entry[f"{prefix}/collapsed"] = float(collapse_report(stats, self.thresholds)["collapsed"])
        if hasattr(model, "pop_train_stats"):
            entry.update(model.pop_train_stats())
        episode_rewards = [info["r"] for info in (model.ep_info_buffer or []) if "r" in info]
        if episode_rewards:  # SB3's Monitor: the env's own reward per finished training episode
            entry["train/episode_reward"] = float(np.mean(episode_rewards))
        curriculum = curriculum_entry(model.get_env())
        if curriculum:
            logger.info(
                "curriculum at step %d: stage %d (%s), %s",
                model.num_timesteps,
                curriculum["curriculum/stage"],
                curriculum["curriculum/stage_name"],
                curriculum["curriculum/held_back_by"],
            )
        entry.update(curriculum)
        self.state.history.append(entry)
        self.log_evaluation(entry)
        self.state.last_eval_step = model.num_timesteps

        # A metric key: checked when ``sac_icm.agent.training`` was parsed (TrainingParams).
        score = _score(metrics[self.training.best_metric])
        if self.best is None or score > self.state.best_score:
            self.state.best_score = score
            self.state.best_timestep = model.num_timesteps
            self.best = snapshot(model)
        if self.metrics_callback is not None:
            self.metrics_callback({k: v for k, v in entry.items() if k != "timestep"}, model.num_timesteps)

    def log_evaluation(self, entry: dict[str, Any]) -> None:
        """One INFO line per evaluation: what it scored, whether it collapsed, time spent and left."""
        step, total = entry["timestep"], self.training.total_timesteps
        elapsed = eta = "-"
        if self.started is not None:
            start_time, start_step = self.started
            seconds = time.monotonic() - start_time
            elapsed = _duration(seconds)
            if step > start_step:
                eta = _duration(seconds / (step - start_step) * max(total - step, 0))
        fmt = lambda key, spec: "n/a" if not math.isfinite(entry.get(key, math.nan)) else format(entry[key], spec)  # noqa: E731
        logger.info(
            "evaluation at step %d/%d: sharpe %s, return %s, entropy %s, dominance %s, collapsed %s, "
            "elapsed %s, ETA %s",
            step,
            total,
            fmt("eval/sharpe", ".2f"),
            fmt("eval/total_return", ".2%"),
            fmt("collapse_det/entropy", ".2f"),
            fmt("collapse_det/dominance", ".2f"),
            "yes" if entry.get("collapse_det/collapsed") else "no",
            elapsed,
            eta,
        )

    def on_step(self, model: BaseAlgorithm) -> None:
        step = model.num_timesteps
        if step // self.training.eval_freq > self.state.last_eval_step // self.training.eval_freq:
            self.evaluate(model)
        last_checkpoint = self.state.checkpoint_step or 0
        if step // self.training.resume_every > last_checkpoint // self.training.resume_every:
            self.save_checkpoint(model)


def _identity_parameters(params: AgentParams, model: BaseAlgorithm, run_parameters: Mapping[str, Any]) -> dict:
    """What defines a training run besides phase and symbol: the caller's (seed, data, phase
    settings), the agent's parameters except those that do not change what is learned, the model's
    class and spaces, and a digest of the weights it starts from."""
    agent = params.to_dict()  # as recorded in the resume checkpoint's identity
    for key in ("resume", "log_interval"):
        agent["training"].pop(key)
    return {
        "run": dict(run_parameters),
        "agent": agent,
        "model": {
            "class": f"{type(model).__module__}.{type(model).__qualname__}",
            "observation_space": str(model.observation_space),
            "action_space": str(model.action_space),
            "n_envs": int(model.n_envs),
            "initial_weights": weights_digest(model),
        },
    }


def train_agent(
    model: BaseAlgorithm,
    make_eval_env: Callable[[], Any],
    params: AgentParams,
    work_dir: str | os.PathLike,
    periods_per_year: float,
    metrics_callback: MetricsCallback | None = None,
    progress_bar: bool | str | None = "auto",
    *,
    phase: str,
    symbol: str,
    run_parameters: Mapping[str, Any] | None = None,
) -> TrainingOutcome:
    """Train ``model`` to ``training.total_timesteps`` env steps in all, resuming from the checkpoint
    in ``work_dir`` that a killed run with the same identity left (``trading_rl.training.resume``:
    ``phase``, ``symbol``, ``run_parameters`` such as seed and data digest, the agent parameters and
    the starting weights; ``training.resume: force`` continues one written with other parameters).

    ``make_eval_env()`` builds the evaluation env (deterministic pass over the evaluation split);
    ``metrics_callback(metrics, step)`` gets each evaluation's flat metrics (streamed to a tracker
    while training runs); each evaluation is also logged as one INFO line. ``progress_bar``: see
    ``progress_bar_enabled``. The best model maximises
    ``training.best_metric`` (a ``compute_metrics`` key, higher is better; undefined counts as worst).
    The checkpoint is taken inside the env step that reaches a multiple of ``resume_every``, so a
    resumed run lacks that one transition and starts a fresh episode. A diverged loss raises
    ``TrainingDivergedError``; the last resume checkpoint (written before the divergence) is kept.
    """
    identity = RunIdentity(phase, str(symbol), _identity_parameters(params, model, run_parameters or {}))
    slot = ResumeSlot(Path(work_dir), identity, params.training.resume)
    slot.open()
    try:
        return _train(model, make_eval_env, params, slot, periods_per_year, metrics_callback, progress_bar)
    finally:
        slot.close()


def _train(
    model: BaseAlgorithm,
    make_eval_env: Callable[[], Any],
    params: AgentParams,
    slot: ResumeSlot,
    periods_per_year: float,
    metrics_callback: MetricsCallback | None,
    progress_bar: bool | str | None,
) -> TrainingOutcome:
    training = params.training
    trainer = _Trainer(make_eval_env, params, slot, periods_per_year, metrics_callback)
    resumed_from = trainer.restore(model)
    progress_bar = progress_bar_enabled(progress_bar)

    remaining = training.total_timesteps - model.num_timesteps
    try:
        trainer.started = (time.monotonic(), model.num_timesteps)
        if remaining > 0:
            model.learn(
                total_timesteps=remaining,
                callback=[trainer.monitor, _EvaluationCallback(trainer)],
                log_interval=training.log_interval,
                reset_num_timesteps=False,
                progress_bar=progress_bar,
            )
        if trainer.state.last_eval_step != model.num_timesteps or not trainer.state.history:
            trainer.evaluate(model)
    except TrainingDivergedError as error:
        kept = (
            f"resume checkpoint {slot.path} (timestep {trainer.state.checkpoint_step}) is kept"
            if slot.path.exists()
            else "no resume checkpoint had been written yet"
        )
        raise TrainingDivergedError(f"{error}; {kept}") from error
    finally:
        trainer.eval_env.close()
    final_entry = trainer.state.history[-1]
    final_stats = {
        key.removeprefix("collapse_det/"): value
        for key, value in final_entry.items()
        if key.startswith("collapse_det/") and key != "collapse_det/collapsed"
    }
    assert trainer.best is not None, "evaluate() always records a best model"
    best_model = _copy_of(model, trainer.best)
    slot.discard()
    return TrainingOutcome(
        model=model,
        best_model=best_model,
        history=trainer.state.history,
        collapse_history=trainer.state.collapse_history,
        collapse_report=collapse_report(final_stats, trainer.thresholds),
        best_timestep=trainer.state.best_timestep,
        resumed_from=resumed_from,
    )
