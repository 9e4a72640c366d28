"""Market data: loading (packaged indexes or users' files), pandera validation and quality facts."""

from trading_rl.data.frames import by_symbol, long_frame
from trading_rl.data.quality import infer_periods_per_year, quality_report, stale_open_mask
from trading_rl.data.schemas import (
    FeatureSchema,
    FeatureValidationError,
    PriceSchema,
    PriceValidationError,
    validate_features,
    validate_prices,
)
from trading_rl.data.selection import load_validated_prices
from trading_rl.data.sources import OHLC_COLUMNS, PACKAGED_SYMBOLS, PRICE_COLUMNS, PriceDataError, load_prices

__all__ = [
    "OHLC_COLUMNS",
    "PACKAGED_SYMBOLS",
    "PRICE_COLUMNS",
    "FeatureSchema",
    "FeatureValidationError",
    "PriceDataError",
    "PriceSchema",
    "PriceValidationError",
    "by_symbol",
    "infer_periods_per_year",
    "load_prices",
    "load_validated_prices",
    "long_frame",
    "quality_report",
    "stale_open_mask",
    "validate_features",
    "validate_prices",
]
