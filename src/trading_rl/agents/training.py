"""Train an SB3 off-policy agent with periodic evaluation, collapse monitoring and a resume checkpoint.

Outputs are objects, not files: the final model and the best-on-evaluation model go back to the
caller (the Kedro layer saves them as catalog datasets). The only file is one rolling resume
checkpoint in ``work_dir`` — model, replay buffer and the run's history in a single pickle, replaced
atomically — so a killed run restarts where it stopped; it is deleted once training completes. No
tracking library is imported here: ``metrics_callback`` receives each evaluation's numbers.
"""

from __future__ import annotations

import importlib.util
import io
import logging
import math
import os
import pickle
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback

from trading_rl.agents.sac_icm import TrainingDivergedError, resolve_params
from trading_rl.envs.curriculum import curriculum_entry, curriculum_states, load_curriculum_states
from trading_rl.evaluation.metrics import compute_metrics
from trading_rl.evaluation.rollout import policy_from_sb3, run_episode
from trading_rl.monitoring.collapse import CollapseMonitorCallback, action_stats, collapse_report

logger = logging.getLogger(__name__)

RESUME_CHECKPOINT = "resume_checkpoint.pkl"

MetricsCallback = Callable[[dict, int], None]


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
    best_model: bytes = b""
    last_eval_step: int = 0
    curriculum: dict = field(default_factory=dict)
    checkpoint_step: int | None = None


def _to_bytes(save: Callable[[io.BytesIO], None]) -> bytes:
    buffer = io.BytesIO()
    save(buffer)
    return buffer.getvalue()


def _write_atomically(path: Path, payload: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        pickle.dump(payload, handle, protocol=pickle.HIGHEST_PROTOCOL)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


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
        params: dict,
        checkpoint_path: Path,
        periods_per_year: float,
        metrics_callback: MetricsCallback | None,
    ) -> None:
        self.training = params["training"]
        self.collapse = params["collapse"]
        self.thresholds = {k: self.collapse[k] for k in ("dominance_max", "entropy_min", "trade_rate_min")}
        self.eval_env = make_eval_env()
        self.checkpoint_path = checkpoint_path
        self.periods_per_year = periods_per_year
        self.metrics_callback = metrics_callback
        self.state = _RunState()
        self.monitor = CollapseMonitorCallback(
            window=self.collapse["window"],
            check_freq=self.collapse["check_freq"],
            hold_threshold=self.collapse["hold_threshold"],
            thresholds=self.thresholds,
        )
        self.monitor.history = self.state.collapse_history

    def restore(self, model: BaseAlgorithm) -> tuple[BaseAlgorithm, int | None]:
        """The model (with replay buffer) and run state from the resume checkpoint, if there is one."""
        if not self.checkpoint_path.exists():
            return model, None
        with open(self.checkpoint_path, "rb") as handle:
            bundle = pickle.load(handle)
        restored = type(model).load(io.BytesIO(bundle["model"]), env=model.get_env(), device=model.device)
        restored.load_replay_buffer(io.BytesIO(bundle["replay_buffer"]))
        # The env's internal state is not checkpointed: start a fresh episode instead of pairing the
        # saved last observation with an env that was just created.
        restored._last_obs = None
        self.state = _RunState(**bundle["state"])
        self.monitor.history = self.state.collapse_history
        load_curriculum_states(restored.get_env(), self.state.curriculum)
        logger.info("resuming training from %s at timestep %d", self.checkpoint_path, restored.num_timesteps)
        return restored, restored.num_timesteps

    def save_checkpoint(self, model: BaseAlgorithm) -> None:
        self.state.checkpoint_step = model.num_timesteps
        self.state.curriculum = curriculum_states(model.get_env())
        _write_atomically(
            self.checkpoint_path,
            {
                "model": _to_bytes(model.save),
                "replay_buffer": _to_bytes(model.save_replay_buffer),
                "state": asdict(self.state),
            },
        )

    def evaluate(self, model: BaseAlgorithm) -> None:
        hold = self.collapse["hold_threshold"]
        policy = policy_from_sb3(model, deterministic=True)
        frames = [
            run_episode(self.eval_env, policy, seed=episode) for episode in range(self.training["eval_episodes"])
        ]
        metrics = _mean_metrics([compute_metrics(frame, self.periods_per_year, hold) for frame in frames])
        rollout = pd.concat(frames, ignore_index=True)
        deterministic = action_stats(
            rollout["action_raw"].to_numpy(), rollout["trade_value"].to_numpy(dtype=np.float64) != 0.0, hold
        )
        stochastic = self.monitor.current_stats()
        entry: dict[str, Any] = {"timestep": model.num_timesteps}
        entry.update({f"eval/{key}": value for key, value in metrics.items()})
        for prefix, stats in (("collapse_det", deterministic), ("collapse_stoch", stochastic)):
            entry.update({f"{prefix}/{key}": value for key, value in stats.items()})
            entry[f"{prefix}/collapsed"] = float(collapse_report(stats, self.thresholds)["collapsed"])
        if hasattr(model, "pop_train_stats"):
            entry.update(model.pop_train_stats())
        curriculum = curriculum_entry(model.get_env())
        if curriculum:
            logger.info(
                "curriculum at step %d: stage %d (%s), %s", model.num_timesteps, curriculum["curriculum/stage"],
                curriculum["curriculum/stage_name"], curriculum["curriculum/held_back_by"],
            )
        entry.update(curriculum)
        self.state.history.append(entry)
        self.state.last_eval_step = model.num_timesteps

        best_metric = self.training["best_metric"]
        if best_metric not in metrics:
            raise ValueError(
                f"parameter 'sac_icm.training.best_metric' is {best_metric!r}, not an evaluation metric; "
                f"choose one of {sorted(metrics)}"
            )
        score = _score(metrics[best_metric])
        if not self.state.best_model or score > self.state.best_score:
            self.state.best_score = score
            self.state.best_timestep = model.num_timesteps
            self.state.best_model = _to_bytes(model.save)
        if self.metrics_callback is not None:
            self.metrics_callback({k: v for k, v in entry.items() if k != "timestep"}, model.num_timesteps)

    def on_step(self, model: BaseAlgorithm) -> None:
        step = model.num_timesteps
        if step // self.training["eval_freq"] > self.state.last_eval_step // self.training["eval_freq"]:
            self.evaluate(model)
        last_checkpoint = self.state.checkpoint_step or 0
        if step // self.training["resume_every"] > last_checkpoint // self.training["resume_every"]:
            self.save_checkpoint(model)


def train_agent(
    model: BaseAlgorithm,
    make_eval_env: Callable[[], Any],
    params: dict,
    work_dir: str | os.PathLike,
    periods_per_year: float = 252,
    metrics_callback: MetricsCallback | None = None,
    progress_bar: bool = False,
) -> TrainingOutcome:
    """Train ``model`` to ``training.total_timesteps`` env steps in all, resuming from the checkpoint
    in ``work_dir`` when a previous run left one.

    ``make_eval_env()`` builds the evaluation env (deterministic pass over the evaluation split);
    ``metrics_callback(metrics, step)`` gets each evaluation's flat metrics. The best model maximises
    ``training.best_metric`` (a ``compute_metrics`` key, higher is better; undefined counts as worst).
    The checkpoint is taken inside the env step that reaches a multiple of ``resume_every``, so a
    resumed run lacks that one transition and starts a fresh episode. A diverged loss raises
    ``TrainingDivergedError``; the last resume checkpoint (written before the divergence) is kept.
    """
    resolved = resolve_params(params)
    training = resolved["training"]
    for key in ("total_timesteps", "eval_freq", "eval_episodes", "resume_every", "log_interval"):
        if int(training[key]) < 1:
            raise ValueError(f"parameter 'sac_icm.training.{key}' must be >= 1, got {training[key]}")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    checkpoint_path = work_dir / RESUME_CHECKPOINT

    trainer = _Trainer(make_eval_env, resolved, checkpoint_path, periods_per_year, metrics_callback)
    model, resumed_from = trainer.restore(model)
    if progress_bar and not _progress_bar_available():
        logger.warning("progress bar requested but tqdm/rich are not installed; training without it")
        progress_bar = False

    remaining = int(training["total_timesteps"]) - model.num_timesteps
    try:
        if remaining > 0:
            model.learn(
                total_timesteps=remaining,
                callback=[trainer.monitor, _EvaluationCallback(trainer)],
                log_interval=int(training["log_interval"]),
                reset_num_timesteps=False,
                progress_bar=progress_bar,
            )
        if trainer.state.last_eval_step != model.num_timesteps or not trainer.state.history:
            trainer.evaluate(model)
    except TrainingDivergedError as error:
        kept = (
            f"resume checkpoint {checkpoint_path} (timestep {trainer.state.checkpoint_step}) is kept"
            if checkpoint_path.exists()
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
    best_model = type(model).load(io.BytesIO(trainer.state.best_model), device=model.device)
    checkpoint_path.unlink(missing_ok=True)
    return TrainingOutcome(
        model=model,
        best_model=best_model,
        history=trainer.state.history,
        collapse_history=trainer.state.collapse_history,
        collapse_report=collapse_report(final_stats, trainer.thresholds),
        best_timestep=trainer.state.best_timestep,
        resumed_from=resumed_from,
    )
