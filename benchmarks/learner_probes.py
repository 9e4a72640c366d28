"""What a learner-controls run's policy and mechanisms did (``benchmarks/learner_controls.py``): the
phase's collapse gates on each scored policy, the collapse rate paired across variants, and what
the auxiliary heads and the curriculum did between checkpoints (issue 43's controls)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch as th
from scipy.stats import binomtest

from trading_rl.monitoring.collapse import CollapseThresholds, action_stats, collapse_report


class MechanismProbe:
    """What the auxiliary heads and the curriculum did between two ``read`` calls.

    The shared market encoder moves under two optimisers only (SB3 leaves a shared extractor out of
    the critic's): the actor's and the heads' own. The heads' updates are summed as they happen, the
    rest of the encoder's movement is the actor's, so ``aux_update_share`` = |heads' movement| /
    (|heads'| + |actor's|): 0 means the heads moved nothing, near 1 that they set the representation.
    Adam scales each optimiser's steps, so movement says more than the raw gradients would."""

    def __init__(self, model) -> None:
        from trading_rl.algorithms.sac_icm.auxiliary import policy_encoder

        self.model = model
        self.auxiliary = getattr(model, "auxiliary", None)
        if self.auxiliary is None:
            return
        self.encoder = policy_encoder(model.policy)
        self.since = self._encoder_vector()
        self.heads_moved = th.zeros_like(self.since)
        train_on = self.auxiliary.train_on

        def counted(*args, **kwargs):
            before = self._encoder_vector()
            losses = train_on(*args, **kwargs)
            self.heads_moved += self._encoder_vector() - before
            return losses

        self.auxiliary.train_on = counted

    def _encoder_vector(self) -> th.Tensor:
        return th.cat([parameter.detach().flatten() for parameter in self.encoder.parameters()])

    def read(self) -> dict:
        """``aux_update_share`` and the mean ``aux_<head>_loss`` since the last read (with the heads
        on); ``curriculum_stage`` and ``curriculum_episodes`` (with the curriculum on)."""
        from trading_rl.training.curriculum import curriculum_entry

        out: dict = {}
        if self.auxiliary is not None:
            now = self._encoder_vector()
            heads = float(self.heads_moved.norm())
            actor = float((now - self.since - self.heads_moved).norm())
            out["aux_update_share"] = heads / (heads + actor) if heads + actor > 0 else float("nan")
            stats = self.model.pop_train_stats()
            out.update({key.replace("/", "_"): value for key, value in stats.items() if key.startswith("aux/")})
            self.since, self.heads_moved = now, th.zeros_like(now)
        curriculum = curriculum_entry(self.model.get_env())
        if curriculum:
            out["curriculum_stage"] = curriculum["curriculum/stage"]
            out["curriculum_episodes"] = curriculum["curriculum/episodes"]
        return out


def collapse_columns(rollout: pd.DataFrame, hold_threshold: float, thresholds: CollapseThresholds) -> dict:
    """The scored policy's actions as the phase's collapse gates count them (``action_stats`` over
    the env's ``action_raw`` and ``action_type``): curiosity's claim is about collapse, not capture."""
    stats = action_stats(
        rollout["action_raw"].to_numpy(), rollout["action_type"].to_numpy(), hold_threshold=hold_threshold
    )
    return {
        "action_entropy": stats["entropy"],
        "action_dominance": stats["dominance"],
        "trade_rate": stats["trade_rate"],
        "hold_share": stats["hold_share"],
        "collapsed": collapse_report(stats, thresholds)["collapsed"],
    }


def collapse_table(final: pd.DataFrame, reference: str) -> str:
    """Per family x variant at the final checkpoint: collapsed runs with the rate's exact (Clopper-
    Pearson) 90% interval, median action entropy and trade rate, and, paired with ``reference`` on
    the same market and seed, the collapse rate's difference with a bootstrap 90% interval."""
    from trading_rl.evaluation.metrics.bootstrap import bootstrap_ci

    if "collapsed" not in final:
        return "(no collapse columns: rows from before they were recorded)"
    lines = [
        "| family | variant | runs | collapsed [90% CI] | action entropy (median) | trade rate (median) "
        f"| paired collapse rate − {reference} [90% CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    keys = ["market", "realisation", "seed"]
    for family, group in final.groupby("family", sort=False):
        flags = group.assign(collapsed=group["collapsed"].astype(str).str.lower().eq("true").astype(float))
        base = flags[flags["variant"] == reference].set_index(keys)["collapsed"]
        for variant, mine in flags.groupby("variant", sort=False):
            count, runs = int(mine["collapsed"].sum()), len(mine)
            interval = binomtest(count, runs).proportion_ci(confidence_level=0.9, method="exact")
            paired = "—"
            both = mine.set_index(keys)["collapsed"].to_frame("mine").join(base.rename("base"), how="inner")
            if variant != reference and len(both):
                delta, low, high = bootstrap_ci(both["mine"] - both["base"], np.mean)
                paired = f"{delta:+.2f} [{low:+.2f}, {high:+.2f}] ({len(both)} pairs)"
            lines.append(
                f"| {family} | {variant} | {runs} | {count}/{runs} [{interval.low:.2f}, {interval.high:.2f}] "
                f"| {mine['action_entropy'].median():.2f} | {mine['trade_rate'].median():.2f} | {paired} |"
            )
    return "\n".join(lines)
