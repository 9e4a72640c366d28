"""Learning algorithms beyond SB3: V-trace targets (``vtrace``), the IMPALA-style actor-learner
(``actor_learner``), the evolution-strategy baseline (``es``) and N SB3 SAC agents updated as one
batched population (``population_sac``).

Import the submodules directly; the package imports nothing itself, so the ES pool workers (which
import ``es``) start without torch.
"""
