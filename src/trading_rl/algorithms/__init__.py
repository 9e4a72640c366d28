"""The learning algorithms, one package each (as stable-baselines3 lays them out): SAC with an
Intrinsic Curiosity Module (``sac_icm``), options with hindsight experience replay on top of it
(``options_her``), the IMPALA-style actor-learner with V-trace targets (``vtrace``), the
evolution-strategy baseline (``es``) and N SB3 SAC agents updated as one batched population
(``population``); ``saved`` is the one saved form of every agent. What they share (parameters,
training loop, resume, curriculum, device) is ``trading_rl.training``.

Import the submodules directly; the packages import nothing themselves, so the ES pool workers
(which import ``es.es``) start without torch.
"""
