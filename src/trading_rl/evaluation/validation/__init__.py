"""Validation across folds and market regimes, and the gates a run must pass."""
