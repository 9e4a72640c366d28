"""The walk-forward's agents: the ``Agent`` a chain trains and scores, and one trainer per agent name
(``AGENT_TRAINERS``).

A trainer builds (or, given the previous fold's agent, fine-tunes) an agent on a fold's training
window and returns it as an ``Agent``: what the chain loop needs of it, whatever it is inside: its
test rollout, its saved form and the rewards of its last training episodes. An SB3 model is one
through ``SB3Agent``; V-trace's and ES's policies (SB3's ``predict``, no saved form) through
``PolicyAgent``; the hierarchical agent is one itself (its option layer must wrap the env).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from trading_rl.algorithms.es.es import train_es_agent
from trading_rl.algorithms.options_her.from_spec import OptionsHerParams, continue_on_spec, train_from_spec
from trading_rl.algorithms.sac_icm.sac_icm import build_agent
from trading_rl.algorithms.sac_icm.training_env import wrap_training_env
from trading_rl.algorithms.saved import sb3_zip_bytes
from trading_rl.algorithms.vtrace.actor_learner import VTraceAgent, train_vtrace
from trading_rl.config import plain
from trading_rl.envs import EnvSpec
from trading_rl.evaluation.metrics.rollout import policy_from_sb3, run_episode
from trading_rl.rewards.shaped_training import RewardShaperParams, train_shaped
from trading_rl.training.device import resolve_device
from trading_rl.training.params import AgentParams


@runtime_checkable
class Agent(Protocol):
    """What a walk-forward chain needs of a trained agent."""

    def rollout(self, spec: EnvSpec, split: str, seed: int) -> pd.DataFrame:
        """One deterministic episode on ``split`` of ``spec`` (the fold's test window)."""
        ...

    def save(self) -> bytes | None:
        """The saved form (``algorithms.saved.load_agent`` reads it), ``None`` for agents without one."""
        ...

    def episode_rewards(self) -> list[float]:
        """Rewards of the last (up to 100) finished training episodes; empty when none are kept."""
        ...


@dataclass
class PolicyAgent:
    """An agent behind SB3's ``predict`` that has no saved form and keeps no training episodes
    (V-trace's and ES's policies, a test's constant model)."""

    model: Any

    def rollout(self, spec: EnvSpec, split: str, seed: int) -> pd.DataFrame:
        return run_episode(spec.make_env(split, evaluation=True), policy_from_sb3(self.model), seed=seed)

    def save(self) -> bytes | None:
        return None

    def episode_rewards(self) -> list[float]:
        return []


@dataclass
class SB3Agent(PolicyAgent):
    """An SB3 model (``SACWithICM``) as an ``Agent``: SB3's zip, SB3's episode buffer."""

    def save(self) -> bytes | None:
        return sb3_zip_bytes(self.model)

    def episode_rewards(self) -> list[float]:
        return [info["r"] for info in self.model.ep_info_buffer or [] if "r" in info]


class Trainer(Protocol):
    """``(spec, params, seed, timesteps, previous agent or None, device) -> Agent``: a new agent on
    the fold's training window, or ``previous`` fine-tuned on it for ``timesteps`` env steps."""

    def __call__(self, spec: EnvSpec, params: Any, seed: int, timesteps: int, previous: Any, device: str) -> Agent: ...


def train_sac(
    spec: EnvSpec,
    params: AgentParams,
    seed: int,
    timesteps: int,
    model: Any = None,
    device: str = "auto",
    icm: bool = True,
) -> Any:
    """Train SAC(+ICM) on the fold's training window; with ``model`` given, fine-tune it instead
    (continue training on the new window, keeping its replay buffer and step count). The training
    env gets the curriculum and auxiliary-target wrappers that ``params`` switch on, for a
    fine-tune too (a fresh curriculum over the new window's bars)."""
    fresh = model is None
    model = sac_on_fold(spec, params, seed, model, device, icm)
    model.learn(total_timesteps=timesteps, reset_num_timesteps=fresh)
    return model


def sac_on_fold(spec: EnvSpec, params: AgentParams, seed: int, model: Any, device: str, icm: bool) -> Any:
    """``train_sac``'s agent before ``learn``: a new SAC(+ICM) on the fold's training env, or
    ``model`` moved onto it (the population engine trains many of these together)."""
    env = spec.make_env("train", seed=seed)
    if model is None:
        params = dataclasses.replace(params, icm=dataclasses.replace(params.icm, enabled=icm))
        return build_agent(env, params, seed=seed, device=device)
    model.set_env(wrap_training_env(env, params.curriculum, params.auxiliary.config()))
    return model


def _train_sac_icm(spec, params, seed, timesteps, previous=None, device="auto") -> Agent:
    return SB3Agent(train_sac(spec, params, seed, timesteps, previous and previous.model, device, icm=True))


def _train_plain_sac(spec, params, seed, timesteps, previous=None, device="auto") -> Agent:
    return SB3Agent(train_sac(spec, params, seed, timesteps, previous and previous.model, device, icm=False))


def _train_vtrace(spec, params, seed, timesteps, previous=None, device="auto") -> Agent:
    """IMPALA-style V-trace actor-learner with ``timesteps`` env steps over all its actors. The
    actors run inside this process (the same numbers as Ray actors): a walk-forward task is already
    one unit of parallelism, and Ray actors started from inside a task could wait forever for CPUs
    that the other tasks hold."""
    init_model = previous.model.model if previous is not None else None
    policy, _ = train_vtrace(
        spec,
        params.with_budget(timesteps),
        seed,
        backend="local",
        device=resolve_device(device),
        init_model=init_model,
    )
    return PolicyAgent(VTraceAgent(policy, seed))


def _train_es(spec, params, seed, timesteps, previous=None, device="auto") -> Agent:
    """Evolution strategy; its budget is ``es.generations`` (a population per generation, not env
    steps), for a fresh run and for fine-tuning from the previous window's parameters alike. The
    population is scored in this process (same numbers as a process pool; see ``_train_vtrace``)."""
    return PolicyAgent(train_es_agent(spec, params, seed, previous and previous.model, num_workers=1))


def train_hierarchical(spec, params, seed, timesteps, previous=None, device="auto", her=False) -> Agent:
    """The options_her phase's hierarchical agent (options, with or without HER) on the fold's
    training window. ``params``: ``{"source": sac_icm.agent as ``AgentParams``, "phase":
    options_her section}``; the source is a fresh SAC+ICM model that gives the networks and the P&L reward scale
    (untrained: the walk-forward compares mechanisms from scratch). With ``previous`` given, it is
    fine-tuned on the new window instead."""
    phase = params.get("phase") or OptionsHerParams()
    phase = dataclasses.replace(phase, her=dataclasses.replace(phase.her, enabled=her))
    device = resolve_device(device)
    if previous is None:
        source_params = params.get("source") or AgentParams()
        source = build_agent(spec.make_env("train", seed=seed), source_params, seed, device)
        agent, _, _ = train_from_spec(spec, source, phase, seed, device, timesteps)
        return agent
    continue_on_spec(previous, spec, phase, seed, timesteps)
    return previous


def _train_options(spec, params, seed, timesteps, previous=None, device="auto") -> Agent:
    return train_hierarchical(spec, params, seed, timesteps, previous, device, her=False)


def _train_options_her(spec, params, seed, timesteps, previous=None, device="auto") -> Agent:
    return train_hierarchical(spec, params, seed, timesteps, previous, device, her=True)


def _train_shaped(spec, params, seed, timesteps, previous=None, device="auto") -> Agent:
    """SAC+ICM on the reward_shaper phase's shaped reward (prior objective weights). ``params``:
    ``{"source": sac_icm.agent as ``AgentParams``, "phase": reward_shaper section}``."""
    model = train_shaped(
        spec,
        params.get("source") or AgentParams(),
        params.get("phase") or RewardShaperParams(),
        seed,
        timesteps,
        previous and previous.model,
        resolve_device(device),
    )
    return SB3Agent(model)


# name -> trainer. Another phase's agent joins walk-forward by registering its trainer here and
# listing its name in ``walk_forward.agents``; its parameters arrive under the same name in the job's
# ``agent_params``.
AGENT_TRAINERS: dict[str, Trainer] = {
    "sac_icm": _train_sac_icm,
    "sac": _train_plain_sac,
    "vtrace": _train_vtrace,
    "es": _train_es,
    "options": _train_options,
    "options_her": _train_options_her,
    "shaped": _train_shaped,
}

# Agents that share another agent's parameter section ("sac" is SAC+ICM with the ICM switched off).
AGENT_PARAMS_SOURCE: dict[str, str] = {"sac": "sac_icm", "options_her": "options"}

# Parameter sections that ``walk_forward.agent_overrides`` (sections of the sac_icm schema: ``sac``,
# ``icm``, ...) applies to; other agents (vtrace, es) have parameters of their own.
OVERRIDDEN_AGENT_PARAMS = {"sac_icm"}


def agent_section(agent: str, agent_params: Mapping[str, Any], overrides: Mapping[str, Any]) -> Any:
    """The parameters ``agent`` trains with in walk-forward: its (or its source agent's) section of
    ``agent_params``, with ``walk_forward.agent_overrides`` laid over it where they apply (the SAC
    family: an ``AgentParams``, its defaults when ``agent_params`` has none)."""
    source = AGENT_PARAMS_SOURCE.get(agent, agent)
    if source in OVERRIDDEN_AGENT_PARAMS:
        section = agent_params.get(source) or AgentParams()
        return section.overlay(overrides, "walk_forward.agent_overrides")
    return agent_params.get(source, {})


def identity_params(agent: str, section: Any) -> dict[str, Any]:
    """An agent's parameters as they act: for the SAC family (an ``AgentParams``) the run-time keys
    and switched-off sections dropped (``AgentParams.identity_view``), and for ``sac`` the ICM
    switched off as its trainer does (its ICM settings cannot act); other agents' as plain data."""
    if AGENT_PARAMS_SOURCE.get(agent, agent) not in OVERRIDDEN_AGENT_PARAMS:
        return dict(plain(section))
    if agent == "sac":
        section = dataclasses.replace(section, icm=dataclasses.replace(section.icm, enabled=False))
    return AgentParams.identity_view(section.to_dict())
