"""Which SB3 SAC models may train as one population: what they must share (``population_key``; for
their ICMs, ``_curiosity_key``) and the check that refuses members that cannot take one batched step
(``PopulationError`` names the setting). ``population_groups`` (``population_sac``) splits a list of
models into populations by these keys.
"""

from __future__ import annotations

from collections.abc import Sequence

from stable_baselines3 import SAC
from stable_baselines3.common.type_aliases import TrainFreq, TrainFrequencyUnit

from trading_rl.algorithms.sac_icm.sac_icm import SACWithICM


class PopulationError(ValueError):
    """The members cannot be trained as one population; the message names the setting."""


def _curiosity_key(member: SAC) -> tuple | None:
    """What the members' ICMs must share to run as one batched computation (``None``: no ICM)."""
    icm = getattr(member, "icm", None)
    if icm is None:
        return None
    assert isinstance(member, SACWithICM)
    train_freq = icm.config.train_freq
    shapes = tuple(tuple(p.shape) for p in icm.parameters())
    return shapes, train_freq, member.icm_batches % train_freq


# What every member of one population must share: they take their gradient steps in lockstep, on
# batches of one size, through networks of one shape.
_LOCKSTEP_SETTINGS = ("batch_size", "gradient_steps", "train_freq", "learning_starts", "num_timesteps", "device")


def _network_shapes(member: SAC, what: str) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(p.shape) for p in getattr(member, what).parameters())


def population_key(member: SAC) -> tuple:
    """What SAC members of one population share: the lockstep settings, whether the entropy
    coefficient is learned, and the network shapes (their ICMs, if any: ``population_groups``)."""
    return (
        tuple(str(getattr(member, name)) for name in _LOCKSTEP_SETTINGS),
        member.ent_coef_optimizer is not None,
        _network_shapes(member, "actor"),
        _network_shapes(member, "critic"),
    )


def _check_members(members: Sequence[SAC]) -> None:
    if not members:
        raise PopulationError("a population needs at least one member")
    for i, member in enumerate(members):
        if not isinstance(member, SAC):
            raise PopulationError(f"member {i} is a {type(member).__name__}, not an SB3 SAC")
        if member.use_sde:
            raise PopulationError(
                f"member {i} uses gSDE (use_sde=True), which the population update does not implement"
            )
        if getattr(member, "auxiliary", None) is not None:
            raise PopulationError(
                f"member {i} has auxiliary heads (sac_icm.agent.auxiliary.enabled: true), which the population "
                "does not train; switch them off or use runtime.engine: sequential or ray"
            )
        if list(member.critic.buffers()) or list(member.actor.buffers()):
            raise PopulationError(
                f"member {i}'s networks have buffers (batch norm), which the population does not track"
            )
        if not isinstance(member.train_freq, TrainFreq) or member.train_freq.unit != TrainFrequencyUnit.STEP:
            raise PopulationError(f"member {i} has an episode-based train_freq; the population steps in env steps")
    for name in _LOCKSTEP_SETTINGS:
        values = [getattr(member, name) for member in members]
        if any(value != values[0] for value in values):
            raise PopulationError(
                f"members differ in '{name}' ({values}); a population trains in lockstep and needs one value"
            )
    curiosity = {_curiosity_key(member) for member in members} - {None}
    if len(curiosity) > 1:
        raise PopulationError(
            "the members' ICMs differ in network shape (icm.feature_dim, icm.hidden_dim), icm.train_freq or "
            "their position in its cycle; their curiosity steps cannot run as one"
        )
    auto = [member.ent_coef_optimizer is not None for member in members]
    if any(flag != auto[0] for flag in auto):
        raise PopulationError(f"members mix a learned and a fixed ent_coef ({auto}); use one kind per population")
    for what in ("actor", "critic"):
        shapes = [_network_shapes(m, what) for m in members]
        if any(shape != shapes[0] for shape in shapes):
            raise PopulationError(
                f"members' {what} networks differ in shape (policy.net_arch); stack equal networks only"
            )
