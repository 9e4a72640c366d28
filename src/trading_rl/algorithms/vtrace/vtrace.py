"""V-trace off-policy targets (Espeholt et al. 2018, "IMPALA", section 4).

Everything is time-major: ``[T, B, ...]`` with ``T`` steps of ``B`` trajectories. Episode ends
inside a trajectory are encoded by ``discounts[t] = 0`` (the value after the end is not
bootstrapped), so one recursion serves trajectories that cross episode boundaries.

The targets are constants for the learner's losses: the value loss regresses ``V(x_s)`` onto
``vs`` and the policy gradient weighs ``log π(a_s|x_s)`` by ``pg_advantages``; neither carries a
gradient (as in the paper's reference implementation).
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class VTraceReturns(NamedTuple):
    """``vs``: value targets ``v_s``; ``pg_advantages``: ``ρ_pg,s (r_s + γ_s v_{s+1} − V(x_s))``."""

    vs: torch.Tensor
    pg_advantages: torch.Tensor


def _clipped(ratios: torch.Tensor, threshold: float | None) -> torch.Tensor:
    return ratios if threshold is None else torch.clamp(ratios, max=float(threshold))


def vtrace_from_importance_weights(
    log_rhos: torch.Tensor,
    discounts: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
    clip_c_threshold: float | None = 1.0,
) -> VTraceReturns:
    """V-trace value targets and policy-gradient advantages from log importance weights.

    ``log_rhos[t] = log π(a_t|x_t) − log μ(a_t|x_t)`` (target over behaviour policy, for the action
    actually taken), ``discounts[t]`` is ``γ`` times "episode not over after step t", ``values[t] =
    V(x_t)`` and ``bootstrap_value = V(x_T)``. With ``ρ_t = min(ρ̄, π/μ)``, ``c_t = min(c̄, π/μ)``
    (a threshold of ``None`` leaves the ratio unclipped) and ``δ_t = ρ_t (r_t + γ_t V(x_{t+1}) −
    V(x_t))`` the targets follow the backward recursion

        v_s − V(x_s) = δ_s + γ_s c_s (v_{s+1} − V(x_{s+1})),   v_T = V(x_T),

    which equals the paper's sum ``v_s = V(x_s) + Σ_{t≥s} (Π_{i=s}^{t−1} γ_i c_i) δ_t``.
    """
    if log_rhos.dim() < 1:
        raise ValueError("log_rhos must be time-major with at least one dimension [T, ...]")
    for name, tensor in (("discounts", discounts), ("rewards", rewards), ("values", values)):
        if tensor.shape != log_rhos.shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, log_rhos {tuple(log_rhos.shape)}")
    if bootstrap_value.shape != values.shape[1:]:
        raise ValueError(
            f"bootstrap_value has shape {tuple(bootstrap_value.shape)}, expected {tuple(values.shape[1:])}"
        )
    thresholds = {
        "clip_rho_threshold": clip_rho_threshold,
        "clip_pg_rho_threshold": clip_pg_rho_threshold,
        "clip_c_threshold": clip_c_threshold,
    }
    for name, threshold in thresholds.items():
        if threshold is not None and not threshold > 0:
            raise ValueError(f"{name} must be positive or None, got {threshold!r}")

    with torch.no_grad():
        rhos = torch.exp(log_rhos)
        clipped_rhos = _clipped(rhos, clip_rho_threshold)
        cs = _clipped(rhos, clip_c_threshold)
        next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
        deltas = clipped_rhos * (rewards + discounts * next_values - values)
        traces = discounts * cs

        vs_minus_values = torch.empty_like(values)
        correction = torch.zeros_like(bootstrap_value)
        for t in range(values.shape[0] - 1, -1, -1):
            correction = deltas[t] + traces[t] * correction
            vs_minus_values[t] = correction
        vs = vs_minus_values + values

        next_vs = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
        pg_rhos = _clipped(rhos, clip_pg_rho_threshold)
        pg_advantages = pg_rhos * (rewards + discounts * next_vs - values)
    return VTraceReturns(vs=vs.detach(), pg_advantages=pg_advantages.detach())
