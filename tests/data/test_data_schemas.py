"""validate_prices / validate_features: good data passes unchanged, every bad input is named."""

import hashlib

import arch.data.sp500
import numpy as np
import pandas as pd
import pytest

from trading_rl.data import (
    FeatureValidationError,
    PriceDataError,
    PriceValidationError,
    load_prices,
    validate_features,
    validate_prices,
)

ROWS = 60
BAD_ROW = 10


@pytest.fixture(scope="module")
def sp500_raw() -> pd.DataFrame:
    """The first rows of the packaged S&P 500 in its original column names, as a user's file would be."""
    return arch.data.sp500.load().iloc[:ROWS]


def _write(raw: pd.DataFrame, tmp_path, name="SPX.csv"):
    file = tmp_path / name
    raw.to_csv(file)
    return file


def _digest(file) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


def _bad_date(raw: pd.DataFrame) -> str:
    return str(raw.index[BAD_ROW].date())


def test_packaged_prices_validate_as_float64():
    prices = load_prices("sp500")
    validated = validate_prices(prices, "sp500")
    assert (validated.dtypes == np.float64).all()
    pd.testing.assert_frame_equal(validated, prices.astype(float))
    assert validated.index.name == "timestamp"


def test_time_zone_aware_intraday_prices_validate():
    index = pd.date_range("2024-01-06", periods=100, freq="h", tz="UTC", name="timestamp")
    prices = pd.DataFrame({"open": 1.0, "high": 2.0, "low": 0.5, "close": 1.5, "volume": 0}, index=index)
    assert validate_prices(prices, "btc").index.tz is not None


def _nan_close(raw):
    raw.iloc[BAD_ROW, raw.columns.get_loc("Close")] = np.nan


def _negative_low(raw):
    raw.iloc[BAD_ROW, raw.columns.get_loc("Low")] = -1.0


def _high_below_low(raw):
    raw.iloc[BAD_ROW, raw.columns.get_loc("High")] = raw["Low"].iloc[BAD_ROW] - 1


def _infinite_volume(raw):
    raw["Volume"] = raw["Volume"].astype(float)
    raw.iloc[BAD_ROW, raw.columns.get_loc("Volume")] = np.inf


def _duplicate_timestamp(raw):
    index = raw.index.to_list()
    index[BAD_ROW + 1] = index[BAD_ROW]
    raw.index = pd.DatetimeIndex(index, name=raw.index.name)


def _unsorted_timestamps(raw):
    index = raw.index.to_list()
    index[BAD_ROW], index[BAD_ROW - 1] = index[BAD_ROW - 1], index[BAD_ROW]
    raw.index = pd.DatetimeIndex(index, name=raw.index.name)


BAD_INPUTS = {
    "nan price": (_nan_close, "close", "no missing values (NaN/NaT)"),
    "negative price": (_negative_low, "low", "greater_than(0)"),
    "high < low": (_high_below_low, "high", "high >= max(open, close)"),
    "infinite volume": (_infinite_volume, "volume", "finite"),
    "duplicate timestamp": (_duplicate_timestamp, "timestamp", "unique"),
    "unsorted timestamps": (_unsorted_timestamps, "timestamp", "timestamps_increasing"),
}


@pytest.mark.parametrize("damage, column, check", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_rows_are_named_and_file_untouched(sp500_raw, tmp_path, damage, column, check):
    raw = sp500_raw.copy()
    damage(raw)
    file = _write(raw, tmp_path)
    before = _digest(file)

    with pytest.raises(PriceValidationError) as failure:
        validate_prices(load_prices("SPX", source="file", path=file), "SPX")

    message = str(failure.value)
    assert f"prices for symbol 'SPX' (from {file})" in message
    assert f"column '{column}' check '{check}' failed on" in message
    assert str(raw.index[BAD_ROW].date()) in message.split(f"check '{check}'")[1]
    assert _digest(file) == before


def test_missing_column(sp500_raw, tmp_path):
    file = _write(sp500_raw.drop(columns="Volume"), tmp_path)
    with pytest.raises(
        PriceValidationError, match=r"'SPX' .*column 'volume' check 'column present' failed: the column is missing"
    ):
        validate_prices(load_prices("SPX", source="file", path=file), "SPX")


def test_non_numeric_column_shows_the_text(sp500_raw, tmp_path):
    raw = sp500_raw.astype({"Close": object})
    raw.iloc[BAD_ROW, raw.columns.get_loc("Close")] = "abc"
    file = _write(raw, tmp_path)
    before = _digest(file)
    with pytest.raises(PriceValidationError) as failure:
        validate_prices(load_prices("SPX", source="file", path=file), "SPX")
    assert (
        f"column 'close' check 'numeric' failed on 1 rows (non-numeric values); "
        f"first failing rows: {_bad_date(sp500_raw)} (row {BAD_ROW}: close='abc')"
    ) in str(failure.value)
    assert _digest(file) == before


def test_too_few_rows(sp500_raw, tmp_path):
    file = _write(sp500_raw.iloc[:3], tmp_path)
    with pytest.raises(
        PriceValidationError, match=r"'SPX' \(from .*SPX\.csv\).*check 'at least 50 rows' failed .*3 rows"
    ):
        validate_prices(load_prices("SPX", source="file", path=file), "SPX")
    validate_prices(load_prices("SPX", source="file", path=file), "SPX", min_rows=3)


def test_header_only_file_is_empty(sp500_raw, tmp_path):
    file = _write(sp500_raw.iloc[:0], tmp_path)
    with pytest.raises(PriceValidationError, match="check 'non_empty' failed"):
        validate_prices(load_prices("SPX", source="file", path=file), "SPX")


def test_zero_byte_file_fails_on_load_and_stays_untouched(tmp_path):
    file = tmp_path / "SPX.csv"
    file.write_bytes(b"")
    with pytest.raises(PriceDataError, match="SPX.csv"):
        load_prices("SPX", source="file", path=file)
    assert file.read_bytes() == b""


def test_all_failures_are_collected_and_rows_capped_at_five(sp500_raw):
    prices = load_prices("sp500").iloc[:ROWS].copy()
    prices.iloc[20:28, prices.columns.get_loc("open")] = -5.0
    prices.iloc[40, prices.columns.get_loc("volume")] = -1
    with pytest.raises(PriceValidationError) as failure:
        validate_prices(prices, "sp500")
    message = str(failure.value)
    opens = message.split("column 'open' check 'greater_than(0)' failed on 8 rows; first failing rows: ")[1]
    listed = opens.split(";")[0]
    assert listed.count("open=-5.0") == 5
    assert str(prices.index[24].date()) in listed and str(prices.index[25].date()) not in listed
    assert "column 'volume' check 'greater_than_or_equal_to(0)' failed on 1 rows" in message


def test_relation_check_shows_compared_values():
    prices = load_prices("sp500").iloc[:ROWS].copy()
    prices.iloc[BAD_ROW, prices.columns.get_loc("low")] = prices["close"].iloc[BAD_ROW] + 1
    with pytest.raises(PriceValidationError) as failure:
        validate_prices(prices, "sp500", source_name="custom.csv")
    row = prices.iloc[BAD_ROW]
    assert "(from custom.csv)" in str(failure.value)
    assert (
        f"column 'low' check 'low <= min(open, close)' failed on 1 rows; first failing rows: "
        f"{prices.index[BAD_ROW].date()} (row {BAD_ROW}: low={row['low']}, open={row['open']}, close={row['close']})"
    ) in str(failure.value)


def test_index_must_be_the_timestamps():
    prices = load_prices("sp500").iloc[:ROWS].rename_axis("Date")
    with pytest.raises(
        PriceValidationError, match="timestamps must be the index, named 'timestamp' \\(index name 'Date'"
    ):
        validate_prices(prices, "sp500")


def _features(rows=10) -> pd.DataFrame:
    index = pd.date_range("2021-01-01", periods=rows, freq="D", name="timestamp")
    return pd.DataFrame({"ret_1": np.linspace(-1, 1, rows), "rsi_14": np.arange(rows)}, index=index)


def test_features_validate_as_float64():
    validated = validate_features(_features(), "features_sp500")
    assert (validated.dtypes == np.float64).all()
    np.testing.assert_array_equal(validated["rsi_14"], np.arange(10.0))


def _nan_feature(frame):
    frame.iloc[3, 0] = np.nan


def _inf_feature(frame):
    frame["rsi_14"] = frame["rsi_14"].astype(float)
    frame.iloc[3, 1] = -np.inf


def _text_feature(frame):
    frame["rsi_14"] = frame["rsi_14"].astype(object)
    frame.iloc[3, 1] = "oops"


def _repeated_timestamp(frame):
    frame.index = frame.index[[0, 1, 2, 3, 3, 5, 6, 7, 8, 9]]


def _decreasing_timestamp(frame):
    frame.index = frame.index[[0, 1, 2, 4, 3, 5, 6, 7, 8, 9]]


BAD_FEATURES = {
    "nan": (_nan_feature, "column 'ret_1' check 'no missing values (NaN/NaT)' failed on 1 rows"),
    "inf": (_inf_feature, "column 'rsi_14' check 'finite' failed on 1 rows"),
    "text": (_text_feature, "column 'rsi_14' check 'numeric' failed on 1 rows (non-numeric values)"),
    "duplicate": (_repeated_timestamp, "column 'timestamp' check 'unique' failed on 2 rows"),
    "unsorted": (_decreasing_timestamp, "column 'timestamp' check 'timestamps_increasing' failed on 1 rows"),
}


@pytest.mark.parametrize("damage, expected", BAD_FEATURES.values(), ids=BAD_FEATURES.keys())
def test_bad_features_are_named(damage, expected):
    frame = _features()
    damage(frame)
    with pytest.raises(FeatureValidationError) as failure:
        validate_features(frame, "features_sp500")
    message = str(failure.value)
    assert message.startswith("features 'features_sp500' failed validation: ")
    assert expected in message
    assert "2021-01-0" in message.split(expected)[1]  # the failing row's date follows


def test_features_need_rows_and_columns():
    with pytest.raises(FeatureValidationError, match="check 'non_empty' failed"):
        validate_features(_features().iloc[:0], "f")
    with pytest.raises(FeatureValidationError, match="check 'at least one feature column' failed"):
        validate_features(_features()[[]], "f")
