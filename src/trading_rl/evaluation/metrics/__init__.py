"""Scoring one policy on one split: rollouts, metrics, return attribution, baselines, bootstrap
intervals and the evaluation report.
"""
