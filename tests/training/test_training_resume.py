import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch as th
from helpers.sac_icm_toy import ToyTradingEnv, run_training, toy_agent

from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM
from trading_rl.config import ConfigError
from trading_rl.envs import EnvConfig
from trading_rl.evaluation.metrics.metrics import compute_metrics
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
from trading_rl.training.loop import train_agent
from trading_rl.training.params import AgentParams, TrainingDivergedError
from trading_rl.training.resume_file import read_checkpoint

PROBE_OBS = np.random.default_rng(11).normal(size=(16, 4)).astype(np.float32)
TOY_SCRIPT = Path(__file__).resolve().parents[1] / "helpers" / "sac_icm_toy.py"
TOY = {"phase": "toy", "symbol": "TOY", "periods_per_year": 252.0}


def test_training_evaluates_keeps_the_best_model_and_cleans_up(tmp_path):
    model, params = toy_agent(seed=2, total_timesteps=300)
    calls = []
    outcome = train_agent(
        model,
        ToyTradingEnv,
        AgentParams.from_mapping(params, "sac_icm.agent"),
        tmp_path,
        metrics_callback=lambda m, s: calls.append((s, m)),
        **TOY,
    )

    assert [entry["timestep"] for entry in outcome.history] == [100, 200, 300]
    assert [step for step, _ in calls] == [100, 200, 300]
    assert calls[0][1] == {k: v for k, v in outcome.history[0].items() if k != "timestep"}
    first = outcome.history[0]
    for key in (
        "eval/sharpe",
        "eval/total_return",
        "eval/action_entropy",
        "collapse_det/trade_rate",
        "collapse_stoch/dominance",
        "icm/forward_loss",
        "icm/effective_share",
        "train/critic_loss",
    ):
        assert key in first and math.isfinite(first[key]), key
    assert outcome.model.num_timesteps == 300 and outcome.resumed_from is None
    assert not list(tmp_path.glob("*.ckpt"))

    sharpes = [entry["eval/sharpe"] for entry in outcome.history]
    assert outcome.best_timestep == outcome.history[int(np.argmax(sharpes))]["timestep"]
    assert isinstance(outcome.best_model, SACWithICM) and outcome.best_model.icm is not None
    # The returned best model reproduces the evaluation it was selected on.
    rerun = compute_metrics(run_episode(ToyTradingEnv(), policy_from_sb3(outcome.best_model), seed=0), 252, 0.1)
    assert rerun["sharpe"] == pytest.approx(max(sharpes), rel=1e-9)
    assert outcome.collapse_report["gates"][0]["value"] == outcome.history[-1]["collapse_det/dominance"]
    assert [entry["timestep"] for entry in outcome.collapse_history] == [50, 100, 150, 200, 250, 300]


def test_same_seed_gives_the_same_numbers(tmp_path):
    outcomes = [run_training(str(tmp_path / name), 150, seed=4) for name in ("a", "b")]
    actions = [o.model.predict(PROBE_OBS, deterministic=True)[0] for o in outcomes]
    np.testing.assert_array_equal(actions[0], actions[1])
    assert outcomes[0].history == outcomes[1].history


def test_divergence_keeps_the_last_good_resume_checkpoint(tmp_path):
    model, params = toy_agent(nan_reward_after=120, total_timesteps=300)
    with pytest.raises(TrainingDivergedError, match=r"non-finite .*critic_loss=nan.*resume checkpoint .* is kept"):
        train_agent(model, ToyTradingEnv, AgentParams.from_mapping(params, "sac_icm.agent"), tmp_path, **TOY)
    (path,) = tmp_path.glob("*.ckpt")
    checkpoint = read_checkpoint(path)
    assert checkpoint.run_state["checkpoint_step"] in (50, 100)
    assert all(th.isfinite(t).all() for t in checkpoint.model["tensors"].values())
    assert checkpoint.model["counters"]["num_timesteps"] == checkpoint.run_state["checkpoint_step"]


@pytest.mark.slow
def test_killed_run_resumes_from_its_checkpoint_and_finishes_the_budget(tmp_path):
    child = subprocess.Popen(
        [sys.executable, str(TOY_SCRIPT), str(tmp_path), "400"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("*.ckpt")):
            assert child.poll() is None, child.stderr.read().decode()
            assert time.monotonic() < deadline, "no resume checkpoint appeared"
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    (checkpoint,) = tmp_path.glob("*.ckpt")
    saved_step = read_checkpoint(checkpoint).run_state["checkpoint_step"]
    assert 0 < saved_step < 400

    outcome = run_training(str(tmp_path), 400)
    assert outcome.resumed_from == saved_step
    assert outcome.model.num_timesteps == 400
    assert [entry["timestep"] for entry in outcome.history] == [100, 200, 300, 400]
    assert not checkpoint.exists()


def test_bad_training_parameters_fail_by_name(tmp_path):
    model, params = toy_agent(total_timesteps=100)
    with pytest.raises(ValueError, match=r"sac_icm\.agent\.training\.total_timestep'"):
        train_agent(
            model,
            ToyTradingEnv,
            AgentParams.from_mapping({**params, "training": {"total_timestep": 100}}, "sac_icm.agent"),
            tmp_path,
            **TOY,
        )
    with pytest.raises(ValueError, match=r"sac_icm\.agent\.training\.eval_freq' must be in \[1, inf\)"):
        train_agent(
            model,
            ToyTradingEnv,
            AgentParams.from_mapping({**params, "training": {"eval_freq": 0}}, "sac_icm.agent"),
            tmp_path,
            **TOY,
        )
    # Refused when the section is parsed, before any training, under its real dotted key.
    with pytest.raises(ConfigError, match=r"'sac_icm\.agent\.training\.best_metric' must be one of \[.*'sharpe'"):
        AgentParams.from_mapping(
            {**params, "training": {"total_timesteps": 40, "best_metric": "sharp"}}, "sac_icm.agent"
        )


def test_the_collapse_monitor_and_evaluations_count_holds_by_the_envs_threshold(tmp_path):
    class NoHoldEnv(ToyTradingEnv):
        config = EnvConfig(hold_threshold=0.0)  # only an exact 0 holds (0.1 would count ~10% of random actions)

    model, params = toy_agent(seed=2, total_timesteps=100)
    outcome = train_agent(model, NoHoldEnv, AgentParams.from_mapping(params, "sac_icm.agent"), tmp_path, **TOY)
    last = outcome.history[-1]
    assert last["collapse_det/hold_share"] == 0.0 and last["collapse_stoch/hold_share"] == 0.0
    assert last["eval/hold_share"] == 0.0
