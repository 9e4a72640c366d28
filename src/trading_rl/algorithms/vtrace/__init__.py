"""V-trace targets and the IMPALA-style actor-learner that uses them."""
