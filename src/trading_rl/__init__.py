"""trading_rl: continuous-action RL trading agents trained and validated as Kedro pipelines."""

__version__ = "0.1.0"
