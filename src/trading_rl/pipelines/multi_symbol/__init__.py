"""One SAC+ICM agent per symbol, each in its own Kedro namespace (``<symbol>.env_spec``,
``<symbol>.sac_icm_model``, ...), optionally on a frozen encoder shared by all symbols. Not part of
``__default__``: run it with ``kedro run --pipelines multi_symbol``."""

from trading_rl.pipelines.multi_symbol.pipeline import create_pipeline

__all__ = ["create_pipeline"]
