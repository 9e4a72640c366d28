"""SAC with an Intrinsic Curiosity Module: the agent, the ICM, the auxiliary heads, the training env
wrappers and the shared encoder of many-symbol training.
"""
