"""fio JSON and json+ output (``--output-format=json`` / ``json+``), fio 2.1 to 3.x.

Handles per-job and ``group_reporting`` output, client/server output
(``client_stats``), text before or between documents, and files holding
several documents (``--status-interval``): the last document is the result,
the earlier ones become cumulative interval snapshots.

The rows come from ``fio_json_rows`` (plain Python, no polars); this module
turns them into tables.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import polars as pl

from benchlib.schema import BIN_COLUMNS, LATENCY_BINS, RESULTS, STORED_LATENCY_BINS, TABLES, Tables, unnest_bins
from benchlib.sources.fio_common import PLAT_BITS, PLAT_VAL
from benchlib.sources.fio_json_rows import _IDENTITY, ROW_TABLES, RowPacker, extract_fio_json

try:
    from benchlib._bins import bucket_index as _bucket_index_c
except ImportError:  # built without a C compiler: numpy computes the bucket indices
    _bucket_index_c = None


_PCT_COLUMNS = ("clat_percentiles", "lat_percentiles")

#: How packed rows are read: the tables' own schemas, the percentiles as ``[[percentiles], [values]]`` pairs.
_PACKED = {
    **{name: TABLES[name] for name in ROW_TABLES},
    "results": {**RESULTS, **{name: pl.List(pl.List(pl.Float64)) for name in _PCT_COLUMNS}},
}


def _zip_percentiles(frame: pl.DataFrame) -> pl.DataFrame:
    """``[[percentiles], [values]]`` pairs -> ``List(Struct(percentile, value_ns))`` (null stays null)."""
    pairs = frame.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
        *(pl.col(name).list.get(i, null_on_oob=True).alias(f"{name}{i}") for name in _PCT_COLUMNS for i in (0, 1)),
    )
    rows = pairs.select("row")
    zipped = []
    for name in _PCT_COLUMNS:
        flat = pairs.select("row", pl.col(f"{name}0").alias("percentile"), pl.col(f"{name}1").alias("value_ns"))
        lists = (
            flat.drop_nulls("percentile")
            .explode("percentile", "value_ns")
            .group_by("row", maintain_order=True)
            .agg(pl.struct("percentile", "value_ns").alias(name))
        )
        zipped.append(rows.join(lists, on="row", how="left", maintain_order="left")[name].cast(RESULTS[name]))
    return frame.with_columns(zipped)


def frames_of(packed: dict[str, bytes]) -> tuple[dict[str, pl.DataFrame], pl.DataFrame]:
    """Tables from packed rows (``fio_json_rows.RowPacker``): every table but latency_bins, and those stored.

    polars reads each table's JSON text in one pass; the bins come in as numpy
    views of the int64 bytes.
    """
    frames = {name: pl.read_json(io.BytesIO(packed[name]), schema=_PACKED[name]) for name in ROW_TABLES}
    frames["results"] = _zip_percentiles(frames["results"])
    blocks = pl.read_json(io.BytesIO(packed["bin_blocks"]), schema=_BLOCK_SCHEMA)
    keys, counts = np.frombuffer(packed["bin_keys"], np.int64), np.frombuffer(packed["bin_counts"], np.int64)
    return frames, stored_bins(blocks, keys, counts)


def bucket_index(values: np.ndarray) -> np.ndarray:
    """Fio's ``plat_val_to_idx`` for many bucket values at once (see ``fio_common``).

    The most significant bit comes from the float exponent, exact for any
    value below 2**53 ns (fio's largest bucket is about 2**34).
    """
    values = values.astype(np.int64, copy=False)
    error_bits = np.maximum(np.frexp(values.astype(np.float64))[1] - 1 - PLAT_BITS, 0)
    index = (error_bits + 1) * PLAT_VAL + ((values >> error_bits) & (PLAT_VAL - 1))
    return np.where(values < 2 * PLAT_VAL, values, index)


def bucket_value(index: np.ndarray) -> np.ndarray:
    """Fio's ``plat_idx_to_val`` (the bucket's midpoint) for many bucket indices at once."""
    index = index.astype(np.int64, copy=False)
    error_bits = np.maximum(index // PLAT_VAL - 1, 0)
    value = np.exp2(error_bits + PLAT_BITS) + (index % PLAT_VAL + 0.5) * np.exp2(error_bits)
    return np.where(index < 2 * PLAT_VAL, index.astype(np.float64), value)


def stored_bins(blocks: pl.DataFrame, keys: np.ndarray, counts: np.ndarray) -> pl.DataFrame:
    """Turn raw json+ bins (from one or many files) into stored ``latency_bins``, zero counts dropped.

    ``blocks`` has one row per bins map (job, direction and latency kind) with
    its number of bins, ``keys``/``counts`` every map's bins one after the
    other. The result has one row per block that has bins, its bins as lists
    (``schema.STORED_LATENCY_BINS``): the identity columns are never repeated
    per bin.
    """
    if not blocks.height:
        return pl.DataFrame(schema=STORED_LATENCY_BINS)
    block = np.repeat(np.arange(blocks.height, dtype=np.int32), blocks["bins"].to_numpy())
    if not counts.all():  # fio 2.x lists every bucket, the empty ones too
        kept = counts > 0
        block, keys, counts = block[kept], keys[kept], counts[kept]
    index = bucket_index(keys) if _bucket_index_c is None else np.frombuffer(_bucket_index_c(keys), np.int32)
    value = keys.astype(np.float64)
    if blocks["key_is_index"].any():  # fio 2.x: the keys are bucket indices
        is_index = blocks["key_is_index"].to_numpy()[block]
        index = np.where(is_index, keys, index)
        value = np.where(is_index, bucket_value(keys), value)
    bins = (
        pl.DataFrame(
            {
                "block": pl.Series(block).set_sorted(),  # blocks come in order: polars groups them without hashing
                "bin_index": pl.Series(index, dtype=pl.Int32),
                "bin_value_ns": value * blocks["factor"].to_numpy()[block],
                "count": pl.Series(counts, dtype=pl.Int64),
            }
        )
        .group_by("block", maintain_order=True)
        .agg(BIN_COLUMNS)
    )
    identity = blocks[bins["block"]]
    return identity.select(*_IDENTITY, pl.lit(None, pl.Int64).alias("time_ns"), *(bins[name] for name in BIN_COLUMNS))


def finish_bins(stored: pl.DataFrame) -> pl.DataFrame:
    """Turn stored ``latency_bins`` (:func:`stored_bins`) into rows, one per bin."""
    return unnest_bins(stored.lazy()).collect()


_BLOCK_SCHEMA = {
    **{name: LATENCY_BINS[name] for name in _IDENTITY},
    "factor": pl.Float64,
    "key_is_index": pl.Boolean,
    "bins": pl.Int64,
}


def read_fio_json(path: str | Path) -> Tables:
    """Read fio JSON or json+ output into the tidy tables.

    Parameters
    ----------
    path
        A file holding one or more fio JSON documents, possibly with other
        text around them (warnings, terse or normal output, shell prompts).

    Returns
    -------
    Tables
        ``runs`` (one per client; the "All clients" aggregate of a
        client/server run is its own run with ``is_aggregate``), ``results``
        (per job or group and direction), ``latency_bins`` (json+ only) and,
        when the file holds several documents, the earlier ones as cumulative
        ``intervals`` (metrics ``io_bytes`` and ``io_count``).

    Raises
    ------
    FormatError
        When the file holds no fio JSON document, is truncated, or no job did I/O.

    """
    packer = RowPacker()
    packer.add(Path(path), extract_fio_json(path))
    frames, stored = frames_of(packer.packed())
    return Tables.from_rows({**frames, "latency_bins": finish_bins(stored)})
