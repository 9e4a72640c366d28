"""Learning algorithms beyond SB3: V-trace targets (``vtrace``), the IMPALA-style actor-learner
(``actor_learner``) and the evolution-strategy baseline (``es``).

Import the submodules directly; the package imports nothing itself, so the ES pool workers (which
import ``es``) start without torch.
"""
