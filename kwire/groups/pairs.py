"""What the group tables' builders share: a family's requests with their answers, and per-group
rows carried through Spark as JSON (built in plain Python, on the executors or the driver, typed
back here)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType, TimestampType

from kwire.groups.errors import NAMES

_PAIR_BASE = (
    "connection_id",
    "client_addr",
    "client_port",
    "broker_addr",
    "broker_port",
    "client_id",
    "correlation_id",
    "version",
    "ts",
    "resp_ts",
    "latency_us",
    "resp_status",
    "resp_raw_error",
)


def paired(pairs: DataFrame, family: str) -> DataFrame:
    """Each request of a family with its response's struct (`resp`, null if none decoded)."""
    return pairs.where(F.col(f"req_{family}").isNotNull()).select(
        *_PAIR_BASE,
        F.col(f"req_{family}").alias("req"),
        F.col(f"resp_{family}").alias("resp"),
    )


_EPOCH = datetime(1970, 1, 1)


def _json_value(v: Any) -> Any:
    if isinstance(v, datetime):
        return (v.replace(tzinfo=None) - _EPOCH) // timedelta(microseconds=1)
    if isinstance(v, float):
        if v != v:  # NaN: JSON has none, and the tables mean null
            return None
        return int(v) if v.is_integer() else v
    return v


def _from_rows(rows: DataFrame, table: str, schema: StructType) -> DataFrame:
    """Rows of `table` (schema `schema`) back from (table, row as JSON), times from epoch µs."""
    as_json = StructType(
        [
            StructField(f.name, LongType() if isinstance(f.dataType, TimestampType) else f.dataType)
            for f in schema
        ]
    )
    parsed = rows.where(F.col("table") == table).select(F.from_json("row", as_json).alias("r"))
    return parsed.select(
        *[
            (
                F.timestamp_micros(F.col(f"r.{f.name}"))
                if isinstance(f.dataType, TimestampType)
                else F.col(f"r.{f.name}")
            ).alias(f.name)
            for f in schema
        ]
    )


def _missing(v: Any) -> bool:
    try:
        return bool(pd.isna(v)) if not isinstance(v, (list, dict, str, bytes)) else False
    except (TypeError, ValueError):
        return False


def write_typed(df: DataFrame, schema: StructType, path: str) -> None:
    """Writes `df` to `path` (Parquet) with exactly `schema`'s columns, cast to its types."""
    from kwire.spark.sink import write_parquet

    write_parquet(df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema]), path)


def _named(name: Column, topic_id: Column, names: dict[str, str]) -> Column:
    """A topic as the group tables show it: its name where the frame gives one, else the name
    the capture's Metadata responses give its id, else the id (Kafka's text form)."""
    if not names:
        return F.coalesce(name, topic_id)
    mapping = F.create_map(*[x for k, v in names.items() for x in (F.lit(k), F.lit(v))])
    return F.coalesce(name, mapping[topic_id], topic_id)


def _error_name(col: Any) -> Any:
    mapping = F.create_map(*[x for code, name in NAMES.items() for x in (F.lit(code), F.lit(name))])
    return F.when(col.isNull() | (col == 0), None).otherwise(
        F.coalesce(mapping[col.cast("int")], F.concat(F.lit("ERROR_"), col.cast("string")))
    )
