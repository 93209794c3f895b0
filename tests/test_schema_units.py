"""Schema validation and unit parsing at the edge."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from benchlib.errors import ImpossibleValue, file_failure
from benchlib.schema import (
    RESULTS,
    RUNS,
    SchemaError,
    Tables,
    conform,
    nest_bins,
    percentile_expr,
    unnest_bins,
    validate,
    validate_stored_bins,
)
from benchlib.sources.fio_common import plat_idx_to_val, plat_val_to_idx
from benchlib.units import parse_binary_size, parse_decimal_count, parse_duration_ns, parse_job_size


def test_units() -> None:
    assert parse_job_size("4k") == 4096 and parse_job_size("1M") == 1 << 20 and parse_job_size("512") == 512
    assert parse_job_size("64KiB") == 65536 and parse_job_size("4k-64k") is None
    assert parse_binary_size("183MiB") == 183 * 2**20 and parse_binary_size("29854MB") == 29854 * 2**20
    assert parse_binary_size("91.0MiB/s") == pytest.approx(91.0 * 2**20)
    assert parse_decimal_count("23.3k") == pytest.approx(23300) and parse_decimal_count("3733.6K") == pytest.approx(
        3733600
    )
    assert (
        parse_duration_ns("300") == 300 * 10**9
        and parse_duration_ns("5s") == 5 * 10**9
        and parse_duration_ns("2m") == 120 * 10**9
    )


def test_bucket_layout_round_trips() -> None:
    for index in range(1856):
        assert plat_val_to_idx(plat_idx_to_val(index)) == index
    assert plat_idx_to_val(284) == 740  # a json+ bins key fio-3.33 printed


def test_validate_catches_reader_bugs() -> None:
    good = conform(pl.DataFrame({"run_id": ["r"], "direction": ["read"], "iops": [1.0]}), "results")
    validate(good, "results")
    with pytest.raises(SchemaError, match="missing"):
        validate(good.drop("iops"), "results")
    with pytest.raises(SchemaError, match="unknown direction"):
        validate(good.with_columns(direction=pl.lit("sideways")), "results")
    with pytest.raises(SchemaError, match="run_id is null"):
        validate(good.with_columns(run_id=pl.lit(None, pl.String)), "results")


def _row(**values: object) -> pl.DataFrame:
    frame = pl.DataFrame({"run_id": ["r"], "job_name": ["seq"], "direction": ["read"]}).with_columns(
        pl.lit(v).alias(k) for k, v in values.items()
    )
    return conform(frame, "results")


def _points(*pairs: tuple[float, float]) -> pl.Series:
    return pl.Series("p", [[{"percentile": p, "value_ns": v} for p, v in pairs]], dtype=RESULTS["clat_percentiles"])


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        ({"iops": -1.0}, "iops is -1, below 0"),
        ({"usr_cpu_pct": -3.5}, "usr_cpu_pct is -3.5, below 0"),
        ({"context_switches": -20}, "context_switches is -20, below 0"),
        ({"rwmixread_pct": 130.0}, "rwmixread_pct is 130, above 100"),
        ({"iops": float("nan")}, "iops is nan"),
        ({"clat_min_ns": 1000.0, "clat_mean_ns": 900.0, "clat_max_ns": 5000.0}, "clat mean 900 ns outside its own min"),
        ({"lat_min_ns": 1500.0, "lat_mean_ns": 2.3e9, "lat_max_ns": 9100.0}, "lat mean 2.3e+09 ns outside"),
        (
            {"iops": 1.23e29, "io_count": 30000, "runtime_ns": 3_000_000_000},
            "iops is 1.23e+29, over 2 times what 30,000",
        ),
        ({"bandwidth_bytes_per_s": 5e12, "io_bytes": 1 << 30, "runtime_ns": 10**9}, "bandwidth_bytes_per_s is 5e+12"),
    ],
)
def test_a_value_no_measurement_gives_is_refused_naming_the_row_and_the_rule(broken: dict, says: str) -> None:
    """Issue 44: values a fuzz of real files let through. Each is refused with the row, the values and the rule."""
    with pytest.raises(ImpossibleValue, match="table results, row 1 \\(job_name 'seq', direction 'read'\\)") as err:
        validate(_row(**broken), "results")
    assert says in err.value.found
    reason = file_failure(err.value)
    assert reason is not None and says in reason and "no real measurement gives that" in reason


def test_percentiles_that_fall_are_refused_and_rounded_normal_output_is_not() -> None:
    falling = _row().with_columns(_points((50.0, 4000.0), (95.0, 9000.0), (99.0, 7000.0)).alias("clat_percentiles"))
    with pytest.raises(ImpossibleValue, match="the 99th percentile \\(7,000 ns\\) is below the 95th \\(9,000 ns\\)"):
        validate(falling, "results")
    flat = _row().with_columns(_points((1.0, 0.0), (50.0, 0.0), (99.0, 0.0)).alias("lat_percentiles"))
    validate(flat, "results")  # a direction without I/O: every percentile 0
    # fio's normal output in ms: min=1, max=1 (whole ms, rounded down), avg=1.42: the max may be up to 1 ms more
    validate(_row(clat_min_ns=1e6, clat_mean_ns=1.42e6, clat_max_ns=1e6), "results")
    with pytest.raises(ImpossibleValue):
        validate(_row(clat_min_ns=1e6, clat_mean_ns=2.5e6, clat_max_ns=1e6), "results")
    # a published table: no count, no runtime, no min or max, nothing to relate
    validate(_row(iops=250_000.0, bandwidth_bytes_per_s=1e9), "results")


def test_a_time_out_of_any_clock_is_refused() -> None:
    from datetime import UTC, datetime

    runs = conform(pl.DataFrame({"run_id": ["r"], "start_time": [datetime(2262, 4, 1, tzinfo=UTC)]}), "runs")
    with pytest.raises(ImpossibleValue, match="start_time is 2262-04-01"):
        validate(runs, "runs")
    validate(
        runs.with_columns(pl.lit(datetime(2026, 11, 28, tzinfo=UTC)).cast(RUNS["start_time"]).alias("start_time")),
        "runs",
    )


def test_tables_build_and_percentile_expr() -> None:
    results = pl.DataFrame(
        {
            "run_id": ["r"],
            "direction": ["read"],
            "clat_percentiles": [[{"percentile": 50.0, "value_ns": 10.0}, {"percentile": 99.9, "value_ns": 99.0}]],
        }
    )
    tables = Tables.build(results=results)
    assert tables.runs.height == 0
    picked = tables.results.select(percentile_expr("clat", 99.9), percentile_expr("clat", 50.0))
    assert picked.row(0) == (99.0, 10.0) and picked.columns == ["clat_p99_9_ns", "clat_p50_ns"]


def test_vectorised_bucket_index_matches_fio_layout() -> None:
    """The vectorised bucket index used for json+ bins is fio's plat_val_to_idx for every value, not only midpoints."""
    from benchlib.sources.fio_json import bucket_index, bucket_value

    values = [int(plat_idx_to_val(i)) for i in range(1856)]
    assert bucket_index(np.array(values)).tolist() == [plat_val_to_idx(v) for v in values] == list(range(1856))
    edges = sorted({(1 << bit) + step for bit in range(36) for step in (-1, 0, 1)})  # where the msb changes
    assert bucket_index(np.array(edges)).tolist() == [plat_val_to_idx(v) for v in edges]
    assert bucket_value(np.arange(1856)).tolist() == [plat_idx_to_val(i) for i in range(1856)]
    from benchlib._bins import bucket_index as c_bucket_index  # the C part's, used when it is built

    every = np.array(values + edges + list(range(128)) + [2**62 + 12345], dtype=np.int64)
    assert np.frombuffer(c_bucket_index(every), np.int32).tolist() == [plat_val_to_idx(int(v)) for v in every]
    with pytest.raises(TypeError):
        c_bucket_index(np.arange(3, dtype=np.int32))


def test_fio2_index_keyed_bins_next_to_value_keyed_bins() -> None:
    """fio 2.x json+ keys its bins by bucket index (usec), 3.x by bucket value (ns): one batch may hold both."""
    from benchlib.sources.fio_json import _BLOCK_SCHEMA, finish_bins, stored_bins
    from benchlib.sources.fio_json_rows import _raw_bins

    identity = {"client": None, "job_name": "j", "job_index": 1, "direction": "read", "latency_kind": "clat"}
    layout = {"FIO_IO_U_PLAT_BITS": 6, "FIO_IO_U_PLAT_VAL": 64, "FIO_IO_U_PLAT_NR": 1856}
    fio2 = _raw_bins({"bins": {**layout, "5": 1, "700": 0, "1855": 4}}, 1.0, [])
    fio3 = _raw_bins({"bins": {"2500": 2, "3000": 9}}, 1.0, [])
    assert fio2 is not None and fio3 is not None
    blocks = pl.DataFrame(
        [
            {**identity, "run_id": run, "factor": found[2], "key_is_index": found[3], "bins": len(found[0])}
            for run, found in (("fio2", fio2), ("fio3", fio3))
        ],
        schema=_BLOCK_SCHEMA,
    )
    keys = np.frombuffer(b"".join([fio2[0], fio3[0]]), np.int64)
    counts = np.frombuffer(b"".join([fio2[1], fio3[1]]), np.int64)
    assert fio2[2] == 1000.0 and fio2[3] and not fio3[3]  # fio 2.x: usec, keyed by index
    frame = finish_bins(stored_bins(blocks, keys, counts))
    assert frame["run_id"].to_list() == ["fio2", "fio2", "fio3", "fio3"]  # the zero count is dropped
    assert frame["bin_index"].to_list() == [5, 1855, plat_val_to_idx(2500), plat_val_to_idx(3000)]
    assert frame["bin_value_ns"].to_list() == [5000.0, plat_idx_to_val(1855) * 1000, 2500.0, 3000.0]
    assert frame["count"].to_list() == [1, 4, 2, 9]


def test_latency_bins_stored_per_histogram_round_trip_and_are_checked() -> None:
    """Ingest stores one row per histogram (bins as lists); reading explodes it back to the same rows."""
    flat = conform(
        pl.DataFrame(
            {
                "run_id": ["a", "a", "a", "b", "a"],
                "direction": ["read", "read", "write", "read", "read"],
                "time_ns": [None, None, None, 1000, None],
                "bin_index": [3, 7, 3, 1, 9],
                "bin_value_ns": [3.0, 7.0, 3.0, 1.0, 9.0],
                "count": [1, 2, 3, 4, 5],
            }
        ),
        "latency_bins",
    )
    stored = validate_stored_bins(nest_bins(flat))
    assert stored.height == 3 and stored["count"].to_list() == [[1, 2, 5], [3], [4]]
    back = unnest_bins(stored.lazy()).collect()
    assert back.schema == flat.schema
    assert back.sort("run_id", "direction", "bin_index").equals(flat.sort("run_id", "direction", "bin_index"))
    for broken, problem in (
        (stored.with_columns(pl.col("count").list.head(pl.lit(0))), "a histogram without bins"),
        (stored.with_columns(pl.col("bin_index").list.head(1)), "bin lists of unequal length"),
        (stored.with_columns(pl.col("count").list.eval(-pl.element())), "column 'count' has negative values"),
        (stored.with_columns(pl.lit(None, pl.String).alias("run_id")), "run_id is null"),
    ):
        with pytest.raises(SchemaError, match=problem):
            validate_stored_bins(broken)
    with pytest.raises(SchemaError, match="column 'bin_index' is Int32, expected List"):
        validate_stored_bins(flat)


@pytest.mark.parametrize(
    "bins",
    [
        {"1,2": 5},
        {"": 1},
        {"1.5": 2},
        {"-5": 1},
        {"x": 1},
        {"[3]": 1},
        {"12": True},
        {"12": 1.5},
        {"12": -1},
        {"99999999999999999999": 1},
        {"12": 2**63},
    ],
)
def test_bins_maps_that_are_not_whole_non_negative_numbers_are_refused(bins: dict) -> None:
    """The ordinary path (fio 2.x, or no C part): a key or count that is not a whole number in int64 is an error."""
    from benchlib.sources.fio_json_rows import _raw_bins

    with pytest.raises(ValueError, match="bins"):
        _raw_bins({"bins": bins}, 1.0, [])


def test_bins_keys_read_as_numbers_in_order() -> None:
    from benchlib.sources.fio_json_rows import _raw_bins

    found = _raw_bins({"bins": {"2500": 2, " 3000": 9, "0": 4}}, 1.0, [])
    assert found is not None and list(found[0]) == [2500, 3000, 0] and list(found[1]) == [2, 9, 4]
