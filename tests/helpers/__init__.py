"""What several test folders share, imported as ``helpers.<module>`` (``tests`` is on pytest's
``pythonpath``): tiny parameters (``tiny``), synthetic prices (``synthetic_prices``), the toy SB3
env and agent (``sac_icm_toy``, ``options_her_env``), typed walk-forward arguments from plain
mappings (``walk_forward_calls``), and the setups of the export, forward, fault and validation tests."""
