"""SB3's logger without SB3's temporary folder.

Before each ``learn``, SB3 gives a model that has no logger of its own a new one
(``BaseAlgorithm._setup_learn`` → ``utils.configure_logger``), and SB3's ``logger.configure``
creates ``tempfile.gettempdir()/SB3-<date-time>`` for it even when nothing is written there
(``verbose=0`` and no ``tensorboard_log``, as every model of the project): one empty folder per
training call, thousands after a tuning run or the test suite. ``quiet_logger`` is the logger SB3
would make, with no folder: the same outputs (stdout with ``verbose >= 1``, otherwise none) and
the same recording, so callbacks and ``SACWithICM.train`` read ``logger.name_to_value`` as before.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import HumanOutputFormat, KVWriter, Logger


def quiet_logger(verbose: int) -> Logger:
    """``utils.configure_logger(verbose)``'s logger (no ``tensorboard_log``) without its folder."""
    outputs: list[KVWriter] = [HumanOutputFormat(sys.stdout)] if verbose >= 1 else []
    return Logger(folder=None, output_formats=outputs)


def use_quiet_logger(model: BaseAlgorithm) -> bool:
    """Give ``model`` a ``quiet_logger`` for its next ``learn``, unless it has a logger of its own
    (``set_logger``) or a ``tensorboard_log`` (SB3 writes that into a folder of its choosing);
    whether it did. SB3 keeps a logger set this way across ``learn`` calls but not across
    ``save`` / ``load``."""
    if model._custom_logger or model.tensorboard_log is not None:
        return False
    model.set_logger(quiet_logger(model.verbose))
    return True


@contextlib.contextmanager
def quiet_logging_for_setup(model: BaseAlgorithm) -> Iterator[None]:
    """Around SB3's ``_setup_learn``: ``use_quiet_logger`` for this ``learn`` only, as SB3's own
    logger is (a logger set with ``set_logger`` is kept; one given here is replaced at the next
    ``learn``, and ``load`` drops it anyway)."""
    quiet = use_quiet_logger(model)
    try:
        yield
    finally:
        if quiet:
            model._custom_logger = False
