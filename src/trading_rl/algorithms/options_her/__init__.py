"""Options with hindsight experience replay: the options, the option env and controller, the
goal-conditioned view, HER and the hierarchical agent built on a SAC+ICM low level.
"""
