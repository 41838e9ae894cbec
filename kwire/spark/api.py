"""The Spark face of the UDF pack: DataFrame functions and SQL functions over Arrow batches.

Decoding runs in Spark's Python workers as Arrow-native scalar UDFs (`arrow_udf`): Spark sends
only the frame column (and, for responses, the paired request's api key and version) in Arrow
batches, gets back one Arrow struct per row, and keeps every other column on the JVM side.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructType

import generated
from kwire.spark.decode import (
    HEADER_COLUMNS,
    ENCRYPTED,
    INCOMPLETE,
    REDACTED,
    Plan,
    decode_request_array,
    decode_response_array,
)

_DECODED = "__kwire_decoded"
CAPTURE_ERROR = "capture_error"


def _key(values: Iterable[str] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    if isinstance(values, str):
        return (values,)
    return tuple(values)


@lru_cache(maxsize=64)
def plan(
    direction: str,
    families: tuple[str, ...] | None = None,
    fields: tuple[str, ...] | None = None,
    tolerant: bool = True,
) -> Plan:
    """The decode plan (families, columns, types), built once per process and cached."""
    return Plan(direction, families, fields, tolerant)


def request_type(
    families: Sequence[str] | None = None, fields: Sequence[str] | None = None
) -> StructType:
    """The struct `kafka_decode_request` returns: header, error and one struct per family."""
    return plan("request", _key(families), _key(fields)).spark_type


def response_type(
    families: Sequence[str] | None = None, fields: Sequence[str] | None = None
) -> StructType:
    """The struct `kafka_decode_response` returns: header, error and one struct per family."""
    return plan("response", _key(families), _key(fields)).spark_type


def _arrow_udf(fn: Any, return_type: DataType) -> Any:
    try:
        from pyspark.sql.functions import arrow_udf
    except ImportError as e:  # pragma: no cover - pyspark < 4.1
        raise RuntimeError("kwire's UDF pack needs pyspark >= 4.1 (arrow_udf)") from e
    # The type hints (pa.Array in, pa.Array out) make it a scalar Arrow UDF.
    return arrow_udf(fn, returnType=return_type)  # type: ignore[call-overload]


def request_udf(
    families: Sequence[str] | None = None,
    fields: Sequence[str] | None = None,
    tolerant: bool = True,
) -> Any:
    """An Arrow UDF: frame (binary) -> struct<api_key, api_version, correlation_id, client_id,
    error, status, warnings, family...>. Only the plan's parameters travel to executors; the
    plan is rebuilt there. tolerant=False refuses what Kafka's Java readers would accept."""
    fam, fld = _key(families), _key(fields)
    p = plan("request", fam, fld, tolerant)

    def kafka_decode_request(frames: pa.Array) -> pa.Array:
        return decode_request_array(frames, plan("request", fam, fld, tolerant))

    return _arrow_udf(kafka_decode_request, p.spark_type)


def response_udf(
    families: Sequence[str] | None = None,
    fields: Sequence[str] | None = None,
    tolerant: bool = True,
) -> Any:
    """An Arrow UDF: (frame, api_key, api_version) -> struct<api_key, api_version,
    correlation_id, error, status, warnings, family...>; key and version are the paired
    request's."""
    fam, fld = _key(families), _key(fields)
    p = plan("response", fam, fld, tolerant)

    def kafka_decode_response(
        frames: pa.Array, api_keys: pa.Array, api_versions: pa.Array
    ) -> pa.Array:
        return decode_response_array(
            frames, api_keys, api_versions, plan("response", fam, fld, tolerant)
        )

    return _arrow_udf(kafka_decode_response, p.spark_type)


def _q(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def _finish(
    df: DataFrame, decoded: Column, p: Plan, frame: str, client_id: Column | None
) -> DataFrame:
    """Input columns in place (header and error columns replaced), then one column per family."""
    d = df.withColumn(_DECODED, decoded)
    s = _q(_DECODED)
    types = {f.name: f.dataType for f in p.spark_type.fields}
    have = set(df.columns)

    def header(name: str) -> Column:
        if name == "client_id" and client_id is not None:
            return client_id.alias(name)
        value = s[name] if name in types else F.lit(None).cast(StringType())
        if name in have:  # a null or short frame: keep what the capture step knew
            value = F.coalesce(value, _q(name).cast(types.get(name, StringType())))
        return value.alias(name)

    def error() -> Column:
        # Why this row has no typed message: the decode error, or for a missing frame what the
        # capture step said. Capture's own notes on complete frames ("request without
        # response") stay in capture_error and do not mark a decoded row as failed.
        mine = s["error"]
        frame_null = _q(frame).isNull()
        if "error" in have:
            missing = F.coalesce(_q("error").cast(StringType()), F.lit("frame is null"))
        else:
            missing = F.lit("frame is null")
        return F.coalesce(mine, F.when(frame_null, missing)).alias("error")

    def status() -> Column:
        # A row without a frame: the capture step dropped SASL bytes (its reason starts with
        # "redacted"), could not decrypt TLS ("encrypted") or could not complete the frame;
        # otherwise the UDF's own verdict.
        reason = _q("error").cast(StringType()) if "error" in have else F.lit(None)
        no_frame = (
            F.when(reason.startswith(REDACTED), F.lit(REDACTED))
            .when(reason.startswith(ENCRYPTED), F.lit(ENCRYPTED))
            .otherwise(F.lit(INCOMPLETE))
        )
        return F.when(_q(frame).isNull(), no_frame).otherwise(s["status"]).alias("status")

    out: list[Column] = []
    families = set(p.family_names)
    for c in df.columns:
        if c in HEADER_COLUMNS:
            out.append(header(c))
        elif c == "error":
            out.append(_q(c).alias(CAPTURE_ERROR))
            out.append(error())
            out.append(status())
            out.append(s["warnings"].alias("warnings"))
        elif c not in families and c not in (_DECODED, CAPTURE_ERROR, "status", "warnings"):
            out.append(_q(c))
    out.extend(header(name) for name in HEADER_COLUMNS if name not in have)
    if "error" not in have:
        out.append(error())
        out.append(status())
        out.append(s["warnings"].alias("warnings"))
    out.extend(s[name].alias(name) for name in p.family_names)
    return d.select(*out)


def decode_requests(
    df: DataFrame,
    column: str = "frame",
    families: Sequence[str] | None = None,
    fields: Sequence[str] | None = None,
    tolerant: bool = True,
) -> DataFrame:
    """Decodes request frames: every input row comes out once, with api_key, api_version,
    correlation_id, client_id, error, status, warnings and one struct column per message family
    (null unless the row is that family). `families` / `fields` (dotted paths such as
    "join_group.protocols.consumer_subscription.topics") limit what is built and returned.
    Tolerant by default: a frame Kafka's own Java readers read is `ok`, what was unusual in
    `warnings`; tolerant=False makes it `malformed`."""
    p = plan("request", _key(families), _key(fields), tolerant)
    decoded = request_udf(families, fields, tolerant)(_q(column))
    return _finish(df, decoded, p, column, None)


def decode_responses(
    df: DataFrame,
    column: str = "frame",
    api_key: str = "api_key",
    api_version: str = "api_version",
    families: Sequence[str] | None = None,
    fields: Sequence[str] | None = None,
    tolerant: bool = True,
) -> DataFrame:
    """Decodes response frames, taking api key and version from the paired request's columns
    (`api_key`, `api_version` in a capture frames table). Same columns as decode_requests;
    client_id is carried over from the input when it has one (responses do not repeat it)."""
    p = plan("response", _key(families), _key(fields), tolerant)
    decoded = response_udf(families, fields, tolerant)(_q(column), _q(api_key), _q(api_version))
    client = (
        _q("client_id").cast(StringType())
        if "client_id" in df.columns
        else F.lit(None).cast(StringType())
    )
    return _finish(df, decoded, p, column, client)


def api_names() -> dict[int, str]:
    """Api key -> name: the generated package's, and capture's list of every Kafka api key."""
    names: dict[int, str] = {}
    try:
        from kwire.capture.kafka import API_NAMES

        names.update(API_NAMES)
    except ImportError:
        pass
    names.update({key: info.name for key, info in generated.REGISTRY.items()})
    return names


def register(
    spark: SparkSession,
    families: Sequence[str] | None = None,
    fields: Sequence[str] | None = None,
    tolerant: bool = True,
) -> list[str]:
    """Registers SQL functions (tolerant unless told otherwise); returns their names.

    kafka_decode_request(frame)                          -> struct (see request_type())
    kafka_decode_response(frame, api_key, api_version)   -> struct (see response_type())
    kafka_api_name(api_key)                              -> e.g. 'JoinGroup', null if unknown

    and the pcap data source, `spark.read.format("pcap")` (kwire.spark.source).
    """
    from kwire.spark.source import register_source

    register_source(spark)
    spark.udf.register("kafka_decode_request", request_udf(families, fields, tolerant))
    spark.udf.register("kafka_decode_response", response_udf(families, fields, tolerant))
    names = api_names()

    def kafka_api_name(keys: pa.Array) -> pa.Array:
        return pa.array([names.get(k) for k in keys.to_pylist()], pa.string())

    spark.udf.register("kafka_api_name", _arrow_udf(kafka_api_name, StringType()))
    return ["kafka_decode_request", "kafka_decode_response", "kafka_api_name"]


def finish_batch(
    batch: pa.RecordBatch, decoded: pa.StructArray, p: Plan, frame: str, target: pa.Schema
) -> pa.RecordBatch:
    """_finish's rows in Arrow, for a task that decodes and writes in one go: the input's
    columns, the decoded header, error and status columns and one struct per family, in the
    order and types of `target` (the Arrow schema of _finish's DataFrame)."""
    import pyarrow.compute as pc

    n = batch.num_rows
    s = dict(zip([f.name for f in decoded.type], decoded.flatten()))
    have = batch.schema.names
    frame_null = pc.is_null(batch.column(frame))

    def typed(name: str, value: pa.Array) -> pa.Array:
        return value.cast(target.field(name).type)

    def header(name: str) -> pa.Array:
        kind = target.field(name).type
        if name == "client_id" and p.direction == "response":
            if "client_id" in have:
                return batch.column("client_id").cast(kind)
            return pa.nulls(n, kind)
        value = s[name].cast(kind) if name in s else pa.nulls(n, kind)
        if name in have:  # a null or short frame: keep what the capture step knew
            value = pc.coalesce(value, batch.column(name).cast(kind))
        return value

    reason = (
        batch.column("error").cast(pa.string()) if "error" in have else pa.nulls(n, pa.string())
    )
    missing = pc.coalesce(reason, pa.scalar("frame is null"))
    error = pc.coalesce(s["error"], pc.if_else(frame_null, missing, pa.nulls(n, pa.string())))
    no_frame = pc.if_else(
        pc.fill_null(pc.starts_with(reason, REDACTED), False),
        pa.scalar(REDACTED),
        pc.if_else(
            pc.fill_null(pc.starts_with(reason, ENCRYPTED), False),
            pa.scalar(ENCRYPTED),
            pa.scalar(INCOMPLETE),
        ),
    )
    columns: dict[str, pa.Array] = {
        "error": error,
        "status": pc.if_else(frame_null, no_frame, s["status"]),
        "warnings": s["warnings"],
    }
    if "error" in have:
        columns[CAPTURE_ERROR] = batch.column("error")
    for name in HEADER_COLUMNS:
        columns[name] = header(name)
    for name in p.family_names:
        columns[name] = s[name]
    arrays = [
        typed(f.name, columns[f.name] if f.name in columns else batch.column(f.name))
        for f in target
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def decode_task(p: Plan, target: pa.Schema, frame: str = "frame") -> Any:
    """For kwire.spark.sink.write_by_tasks: a task that decodes a frames DataFrame's batches
    (requests or responses, by `p`) and writes _finish's rows, partitioned by api key, as it
    goes, so the decoded rows never go back into the JVM."""
    from kwire.spark.sink import write_batches

    def decoded(batches: Any) -> Any:
        for batch in batches:
            if p.direction == "request":
                structs = decode_request_array(batch.column(frame), p)
            else:
                structs = decode_response_array(
                    batch.column(frame), batch.column("api_key"), batch.column("api_version"), p
                )
            yield finish_batch(batch, structs, p, frame, target)

    def task(batches: Any, open_file: Any) -> Any:
        yield from write_batches(decoded(batches), open_file, "api_key")

    return task


def write_decoded(
    df: DataFrame,
    path: str,
    direction: str,
    families: Sequence[str] | None = None,
    tolerant: bool = True,
) -> None:
    """decode_requests / decode_responses of the `direction` frames ("request" or "response") of
    a capture's frames table (its column names), written to a local table partitioned by api key
    by the decoding tasks themselves: the same table as writing the DataFrame with Spark's writer
    (tests/spark/test_decode_write.py), without taking every decoded row back into the JVM to
    encode it there."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from kwire.spark.sink import write_by_tasks

    df = df.where(F.col("direction") == direction)
    p = plan(direction, _key(families), None, tolerant)
    finished = (decode_requests if direction == "request" else decode_responses)(
        df, families=families, tolerant=tolerant
    )
    zone = df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    target = to_arrow_schema(finished.schema, timezone=zone)
    # No frames of this direction: one empty file with every column, the api key typed as
    # Spark infers it from the partition directories of a table with rows (int).
    key = target.get_field_index("api_key")
    empty = target.set(key, pa.field("api_key", pa.int32()))
    write_by_tasks(df, path, decode_task(p, target), factor=2, empty=empty)
