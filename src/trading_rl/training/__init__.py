"""What the algorithms share: the agent parameter sections, the training loop with evaluation and
collapse monitoring, resume checkpoints, the curriculum, device selection, SB3 logging and a trained
agent's identity.
"""
