"""load_prices: packaged indexes, users' csv/parquet files in many shapes, and bad files."""

import arch.data.nasdaq
import arch.data.sp500
import numpy as np
import pandas as pd
import pytest

from trading_rl.data import PACKAGED_SYMBOLS, PriceDataError, load_prices

OHLCV = ["open", "high", "low", "close", "volume"]


def _bars(index: pd.DatetimeIndex) -> pd.DataFrame:
    """Consistent OHLCV bars (high >= open, close >= low) on ``index``."""
    close = 100 * np.exp(np.cumsum(np.random.default_rng(0).normal(0, 0.01, len(index))))
    return pd.DataFrame(
        {
            "open": close * 0.999,
            "high": close * 1.01,
            "low": close * 0.98,
            "close": close,
            "volume": np.arange(1, len(index) + 1) * 1000,
        },
        index=index,
    )


@pytest.mark.parametrize("symbol, module", [("sp500", arch.data.sp500), ("nasdaq", arch.data.nasdaq)])
def test_packaged_indexes_match_arch(symbol, module):
    prices = load_prices(symbol)
    reference = module.load()
    assert prices.shape == (5031, 6)
    assert list(prices.columns) == [*OHLCV, "adj_close"]
    assert isinstance(prices.index, pd.DatetimeIndex) and prices.index.name == "timestamp"
    np.testing.assert_array_equal(prices.index, reference.index)
    np.testing.assert_array_equal(prices["close"], reference["Close"])
    np.testing.assert_array_equal(prices["adj_close"], reference["Adj Close"])
    np.testing.assert_array_equal(prices["volume"], reference["Volume"])
    assert prices.attrs["source"] == module.__name__


def test_packaged_symbols_are_case_insensitive():
    assert set(PACKAGED_SYMBOLS) == {"sp500", "nasdaq"}
    assert len(load_prices("SP500")) == 5031


def test_unknown_packaged_symbol_lists_available_ones():
    with pytest.raises(PriceDataError, match="unknown packaged symbol 'AAPL'.*sp500, nasdaq"):
        load_prices("AAPL")


def test_path_is_only_for_files(tmp_path):
    with pytest.raises(ValueError, match="path is only used with source='file'"):
        load_prices("sp500", path=tmp_path / "x.csv")


def test_unknown_source_is_rejected():
    with pytest.raises(ValueError, match="unknown price source 'web'"):
        load_prices("sp500", source="web")


@pytest.mark.parametrize("adjusted_name", ["Adj Close", "adj_close", "ADJCLOSE", "Adjusted Close"])
def test_csv_with_odd_column_casing(tmp_path, adjusted_name):
    bars = _bars(pd.bdate_range("2020-01-01", periods=10))
    raw = pd.DataFrame(
        {
            "Date": bars.index.strftime("%Y-%m-%d"),
            "OPEN": bars["open"],
            "High": bars["high"],
            "low": bars["low"],
            "Close": bars["close"],
            adjusted_name: bars["close"] * 0.5,
            "VOLUME": bars["volume"],
            "Ticker": "XYZ",
        }
    )
    file = tmp_path / "xyz.csv"
    raw.to_csv(file, index=False)

    prices = load_prices("XYZ", source="file", path=file)

    assert list(prices.columns) == [*OHLCV, "adj_close"]
    assert prices.index.name == "timestamp"
    np.testing.assert_array_equal(prices.index, bars.index)
    np.testing.assert_allclose(prices["close"], bars["close"])
    np.testing.assert_allclose(prices["adj_close"], bars["close"] * 0.5)
    assert prices.attrs["source"] == str(file)


def test_parquet_with_time_zone_aware_index(tmp_path):
    index = pd.date_range("2021-03-01 09:30", periods=30, freq="1min", tz="America/New_York", name="Datetime")
    bars = _bars(index).rename(columns=str.title)
    file = tmp_path / "spy.parquet"
    bars.to_parquet(file)

    prices = load_prices("spy", source="file", path=file)

    assert str(prices.index.tz) == "America/New_York"
    np.testing.assert_array_equal(prices.index, index)
    assert list(prices.columns) == OHLCV
    assert "adj_close" not in prices


def test_default_location_under_root(tmp_path):
    folder = tmp_path / "data" / "01_raw" / "prices"
    folder.mkdir(parents=True)
    bars = _bars(pd.bdate_range("2020-01-01", periods=5))
    bars.rename_axis("timestamp").to_csv(folder / "AAPL.csv")

    prices = load_prices("aapl", source="file", root=tmp_path)

    np.testing.assert_allclose(prices["close"], bars["close"])


def test_default_location_reports_expected_path(tmp_path):
    with pytest.raises(PriceDataError, match=r"no price file for symbol 'MSFT'.*01_raw/prices/MSFT\.csv or \.parquet"):
        load_prices("MSFT", source="file", root=tmp_path)


def test_both_csv_and_parquet_is_ambiguous(tmp_path):
    folder = tmp_path / "data" / "01_raw" / "prices"
    folder.mkdir(parents=True)
    bars = _bars(pd.bdate_range("2020-01-01", periods=5)).rename_axis("timestamp")
    bars.to_csv(folder / "X.csv")
    bars.to_parquet(folder / "X.parquet")
    with pytest.raises(PriceDataError, match="several price files.*X.csv.*X.parquet"):
        load_prices("X", source="file", root=tmp_path)


def test_intraday_with_daylight_saving_offsets_becomes_utc(tmp_path):
    # New York local timestamps across the 2020-03-08 DST switch carry -05:00 then -04:00.
    local = pd.DatetimeIndex(
        ["2020-03-06 09:30", "2020-03-06 09:31", "2020-03-09 09:30", "2020-03-09 09:31"]
    ).tz_localize("America/New_York")
    raw = _bars(local).reset_index(names="time")
    raw["time"] = [t.isoformat() for t in local]
    file = tmp_path / "es.csv"
    raw.to_csv(file, index=False)

    prices = load_prices("es", source="file", path=file)

    assert str(prices.index.tz) == "UTC"
    assert prices.index[0] == pd.Timestamp("2020-03-06 14:30", tz="UTC")
    assert prices.index[2] == pd.Timestamp("2020-03-09 13:30", tz="UTC")


def test_24_7_hourly_file(tmp_path):
    index = pd.date_range("2024-01-05", periods=72, freq="h", name="timestamp")  # Fri..Sun
    _bars(index).to_csv(tmp_path / "btc.csv")
    prices = load_prices("btc", source="file", path=tmp_path / "btc.csv")
    np.testing.assert_array_equal(prices.index, index)
    assert (prices.index.dayofweek >= 5).sum() == 48


def test_separate_date_and_time_columns_are_combined(tmp_path):
    raw = _bars(pd.RangeIndex(3)).assign(Date="2022-05-02", Time=["09:30", "09:31", "09:32"])
    raw.to_csv(tmp_path / "x.csv", index=False)
    prices = load_prices("x", source="file", path=tmp_path / "x.csv")
    assert list(prices.index) == list(pd.to_datetime(["2022-05-02 09:30", "2022-05-02 09:31", "2022-05-02 09:32"]))


@pytest.mark.parametrize(
    "stamps, expected",
    [
        ([20200102, 20200103], ["2020-01-02", "2020-01-03"]),
        ([1577923200000, 1578009600000], ["2020-01-02 00:00+00:00", "2020-01-03 00:00+00:00"]),
        ([1577923200, 1578009600], ["2020-01-02 00:00+00:00", "2020-01-03 00:00+00:00"]),
    ],
    ids=["yyyymmdd", "epoch-ms", "epoch-s"],
)
def test_numeric_timestamps(tmp_path, stamps, expected):
    _bars(pd.RangeIndex(2)).assign(timestamp=stamps).to_csv(tmp_path / "x.csv", index=False)
    prices = load_prices("x", source="file", path=tmp_path / "x.csv")
    assert list(prices.index) == [pd.Timestamp(t) for t in expected]


def test_rows_keep_file_order_and_raw_values(tmp_path):
    bars = _bars(pd.bdate_range("2020-01-01", periods=4)).rename_axis("timestamp")
    shuffled = bars.iloc[[2, 0, 3, 1, 1]].astype(object)
    shuffled.iloc[0, 3] = "abc"
    shuffled.to_csv(tmp_path / "x.csv")

    prices = load_prices("x", source="file", path=tmp_path / "x.csv")

    np.testing.assert_array_equal(prices.index, bars.index[[2, 0, 3, 1, 1]])
    assert prices["close"].dtype == object and prices["close"].iloc[0] == "abc"


def test_missing_file(tmp_path):
    with pytest.raises(PriceDataError, match=r"price file not found: .*nope\.csv"):
        load_prices("nope", source="file", path=tmp_path / "nope.csv")


def test_empty_file(tmp_path):
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(PriceDataError, match=r"price file is empty: .*empty\.csv"):
        load_prices("empty", source="file", path=tmp_path / "empty.csv")


def test_unreadable_parquet(tmp_path):
    (tmp_path / "broken.parquet").write_bytes(b"this is not parquet")
    with pytest.raises(PriceDataError, match=r"could not read price file .*broken\.parquet"):
        load_prices("broken", source="file", path=tmp_path / "broken.parquet")


def test_unsupported_suffix(tmp_path):
    (tmp_path / "x.xlsx").write_bytes(b"x")
    with pytest.raises(PriceDataError, match=r"unsupported price file type .*x\.xlsx"):
        load_prices("x", source="file", path=tmp_path / "x.xlsx")


def test_file_without_timestamps(tmp_path):
    _bars(pd.RangeIndex(3)).to_csv(tmp_path / "x.csv", index=False)
    with pytest.raises(PriceDataError, match=r"x\.csv: no timestamp column"):
        load_prices("x", source="file", path=tmp_path / "x.csv")


def test_unparseable_timestamp_names_column_and_row(tmp_path):
    _bars(pd.RangeIndex(3)).assign(Date=["2020-01-02", "2020-01-03", "yesterday"]).to_csv(
        tmp_path / "x.csv", index=False
    )
    with pytest.raises(
        PriceDataError, match=r"x\.csv: column 'Date' has values that are not timestamps \(row 2: 'yesterday'\)"
    ):
        load_prices("x", source="file", path=tmp_path / "x.csv")


def test_same_column_twice_in_different_case(tmp_path):
    _bars(pd.bdate_range("2020-01-01", periods=3)).rename_axis("date").assign(Close=1.0).to_csv(tmp_path / "x.csv")
    with pytest.raises(PriceDataError, match=r"\['close', 'Close'\]"):
        load_prices("x", source="file", path=tmp_path / "x.csv")
