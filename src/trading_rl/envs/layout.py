"""Named fields of the trading env's flat observation vector.

Options, reward shaping and the action migrator read the observation by name (``"cash_fraction"``,
``"feature:rsi_14"``) through this object, so a change of window size, feature set or state fields
never silently shifts a hard-coded index.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

STATE_FIELDS: tuple[str, ...] = (
    "position_fraction",
    "unrealized_pnl",
    "cash_fraction",
    "time_in_position",
    "last_action",
)


class ObservationLayout:
    """Maps names to slices of the observation ``[feature window (time-major) | portfolio state]``.

    Names:
      - ``"features"``: the whole flattened window, ``window_size × n_features`` values, oldest bar
        first;
      - ``"state"``: the portfolio state block, one value per name in ``STATE_FIELDS``;
      - each state field by name (``"position_fraction"``, ...);
      - ``"feature:<column>"``: the latest bar's value of feature column ``<column>``.

    The first two are vector fields; the others are scalar fields, which :meth:`get` returns without
    the trailing length-1 axis.
    """

    def __init__(self, feature_columns: Sequence[str], window_size: int):
        columns = [str(column) for column in feature_columns]
        if not columns:
            raise ValueError("feature_columns is empty: the observation needs at least one feature")
        if len(set(columns)) != len(columns):
            raise ValueError(f"feature_columns has duplicates: {columns}")
        if window_size < 1:
            raise ValueError(f"window_size must be >= 1, got {window_size}")
        self.feature_columns: tuple[str, ...] = tuple(columns)
        self.window_size = int(window_size)
        self.n_features = len(columns)
        window_dim = self.window_size * self.n_features
        self.dim = window_dim + len(STATE_FIELDS)

        self.slices: dict[str, slice] = {
            "features": slice(0, window_dim),
            "state": slice(window_dim, self.dim),
        }
        self._scalar_index: dict[str, int] = {}
        for offset, name in enumerate(STATE_FIELDS):
            self._scalar_index[name] = window_dim + offset
        latest_row = (self.window_size - 1) * self.n_features
        for offset, column in enumerate(columns):
            self._scalar_index[f"feature:{column}"] = latest_row + offset
        for name, index in self._scalar_index.items():
            self.slices[name] = slice(index, index + 1)

    @property
    def names(self) -> list[str]:
        return list(self.slices)

    def __getitem__(self, name: str) -> slice:
        try:
            return self.slices[name]
        except KeyError:
            raise KeyError(f"unknown observation field {name!r}; known: {self.names}") from None

    def __contains__(self, name: str) -> bool:
        return name in self.slices

    def index(self, name: str) -> int:
        """Position of a scalar field in the observation vector."""
        if name not in self._scalar_index:
            raise KeyError(f"{name!r} is not a scalar observation field; scalar fields: {list(self._scalar_index)}")
        return self._scalar_index[name]

    def get(self, obs: np.ndarray, name: str) -> np.ndarray:
        """Field ``name`` of one observation ``(dim,)`` or of a batch ``(..., dim)``."""
        if name in self._scalar_index:
            return obs[..., self._scalar_index[name]]
        return obs[..., self[name]]

    def feature_window(self, obs: np.ndarray) -> np.ndarray:
        """The feature window as ``(..., window_size, n_features)``, oldest bar first."""
        window = obs[..., self.slices["features"]]
        return window.reshape(*window.shape[:-1], self.window_size, self.n_features)

    def to_dict(self) -> dict:
        """JSON-serialisable description: ``{name: [start, stop]}`` plus the sizes."""
        return {
            "dim": self.dim,
            "window_size": self.window_size,
            "feature_columns": list(self.feature_columns),
            "fields": {name: [s.start, s.stop] for name, s in self.slices.items()},
        }

    def __repr__(self) -> str:
        return f"ObservationLayout(window_size={self.window_size}, n_features={self.n_features}, dim={self.dim})"
