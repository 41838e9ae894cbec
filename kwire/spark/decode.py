"""Decoding Arrow batches of Kafka frames into one typed Arrow struct per frame.

Pure pyarrow + generated: these functions run inside Spark's Python workers (and anywhere else).
A frame that fails to decode never fails the batch: its row gets an error naming the message,
version, field path and byte offset, and whatever header did decode.
"""

from __future__ import annotations

import gc
import struct
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

import generated
from generated import KwireError
from kwire.spark.consumer import payload_columns
from kwire.spark.faults import fault_point
from kwire.spark.families import message_columns
from kwire.spark.model import (
    FAMILIES,
    PROTOCOL_TYPE_ATTR,
    Dense,
    Selection,
    StructColumns,
    parse_selection,
)

_HEADER8 = struct.Struct(">hhi")
_HH = struct.Struct(">hh")

REQUEST_HEADER_FIELDS = [
    StructField("api_key", ShortType()),
    StructField("api_version", ShortType()),
    StructField("correlation_id", IntegerType()),
    StructField("client_id", StringType()),
]
RESPONSE_HEADER_FIELDS = [
    StructField("api_key", ShortType()),
    StructField("api_version", ShortType()),
    StructField("correlation_id", IntegerType()),
]
ERROR_FIELD = StructField("error", StringType())
STATUS_FIELD = StructField("status", StringType())
# What was unusual in a frame read as Kafka's own readers read it (status ok): null when nothing.
WARNINGS_FIELD = StructField("warnings", ArrayType(StringType()))
HEADER_COLUMNS = ("api_key", "api_version", "correlation_id", "client_id")

# Row statuses (the design's vocabulary; docs/outputs.md, status). The UDF decides the first four from what it read; the
# last three come from the capture step's reason for a row without a frame (kwire.spark.api._finish).
OK, UNSUPPORTED, MALFORMED, UNPAIRED = "ok", "unsupported", "malformed", "unpaired"
INCOMPLETE, REDACTED, ENCRYPTED = "incomplete", "redacted", "encrypted"
STATUSES = (OK, UNSUPPORTED, MALFORMED, INCOMPLETE, UNPAIRED, REDACTED, ENCRYPTED)


class Plan:
    """What to decode for one direction: which families, which of their columns, their types;
    and whether frames Kafka's Java readers accept are read (tolerant, with warnings) or refused
    (strict: status malformed)."""

    def __init__(
        self,
        direction: str,
        families: Iterable[str] | None = None,
        fields: Iterable[str] | None = None,
        tolerant: bool = True,
    ):
        if direction not in ("request", "response"):
            raise ValueError(f"direction must be 'request' or 'response', not {direction!r}")
        self.direction = direction
        self.tolerant = tolerant
        tree = parse_selection(fields or [])
        chosen = list(families) if families is not None else []
        for name in tree:
            if name not in chosen:
                chosen.append(name)
        if families is None and not tree:
            chosen = list(FAMILIES)
        unknown = [f for f in chosen if f not in FAMILIES]
        if unknown:
            raise ValueError(f"unknown message families {unknown}; known: {', '.join(FAMILIES)}")
        self.families: list[tuple[int, str, StructColumns]] = []
        for name in sorted(chosen, key=FAMILIES.__getitem__):
            key = FAMILIES[name]
            info = generated.REGISTRY[key]
            cls = info.request if direction == "request" else info.response
            sel: Selection = tree.get(name)
            self.families.append((key, name, message_columns(cls, sel, name)))
        self.by_key = {key: (name, cols) for key, name, cols in self.families}
        # Pruning decodes only what is asked for: api key -> versions whose selected columns
        # all lie in the message's head (read_head), and the families not asked for at all,
        # whose frames get their header read and their body left alone.
        self.heads: dict[int, frozenset[int]] = {}
        for key, name, _cols in self.families:
            info = generated.REGISTRY[key]
            cls = info.request if direction == "request" else info.response
            versions = _head_versions(cls, tree.get(name))
            if versions:
                self.heads[key] = versions
        self.header_only = frozenset(
            key
            for key, info in generated.REGISTRY.items()
            if key not in self.by_key
            and (info.request if direction == "request" else info.response) is not None
        )
        header = REQUEST_HEADER_FIELDS if direction == "request" else RESPONSE_HEADER_FIELDS
        self.spark_type = StructType(
            header
            + [ERROR_FIELD, STATUS_FIELD, WARNINGS_FIELD]
            + [StructField(name, cols.spark_type) for _, name, cols in self.families]
        )
        self.arrow_type = to_arrow_type(self.spark_type)

    @property
    def family_names(self) -> list[str]:
        return [name for _, name, _ in self.families]


def _head_versions(cls: Any, select: Selection) -> frozenset[int]:
    """The versions of cls whose head (see read_head) holds every column the selection asks
    for; empty when the whole message is selected or a column needs more than the head."""
    if select is None:
        return frozenset()
    attrs = {f.attr for f in cls.FIELDS}
    payloads = payload_columns(cls)
    needed = set()
    for name in select:
        if name in attrs:
            needed.add(name)
        elif name in payloads:  # decoded from a bytes field, in the protocol type's context
            needed.add(payloads[name].source)
            needed.update({PROTOCOL_TYPE_ATTR} & attrs)
        else:  # unknown_tags: only a whole read finds them
            return frozenset()
    return frozenset(v for v, head in cls.HEAD_FIELDS.items() if needed <= set(head))


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while a batch is decoded: a batch keeps hundreds of
    thousands of decoded objects alive at once (OffsetCommit partitions), which makes the
    collector's passes, not the decoding, a third of the time. The objects hold no reference
    cycles, so reference counting frees them all the same."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _raw_header(frame: bytes) -> tuple[Any, Any, Any, Any]:
    """Header fields of a request whose schema is unknown: every request header starts with
    api key, version and correlation id; v1 and v2 continue with a classic nullable client id."""
    if len(frame) < 8:
        if len(frame) >= 4:
            k, v = struct.unpack_from(">hh", frame)
            return k, v, None, None
        return None, None, None, None
    k, v, c = _HEADER8.unpack_from(frame)
    client_id = None
    try:
        header, _ = generated.RequestHeader.read(frame, 0, 1)
        client_id = header.client_id
    except KwireError:
        pass
    return k, v, c, client_id


def _status(e: BaseException) -> str:
    """unsupported for an api key or version outside every shipped schema, else malformed."""
    if isinstance(e, (generated.UnknownApiKeyError, generated.UnsupportedVersionError)):
        return UNSUPPORTED
    return MALFORMED


def _as_kafka(
    plan: Plan, frame: bytes, key: int | None = None, version: int | None = None
) -> tuple[Any, Any, int | None, list[str]] | None:
    """A frame the strict decode refused, read as Kafka's own readers read it (tolerant plans
    only): (header, message, the version read, warnings), or None when Kafka refuses it too."""
    if not plan.tolerant:
        return None
    if key is None or version is None:  # a request: its header says which
        report = generated.inspect_request(frame, newer_versions=False)
    else:
        report = generated.inspect_response(frame, key, version, newer_versions=False)
    if report.error is not None:
        return None
    return report.header, report.message, report.version, list(report.warnings)


def _error_text(e: BaseException) -> str:
    if isinstance(e, KwireError):
        return str(e)
    return f"internal error: {type(e).__name__}: {e}"  # the codecs promise KwireError only


def _families(
    plan: Plan,
    n: int,
    found: dict[int, tuple[list[int], list[Any], list[int]]],
) -> list[pa.Array]:
    """One column per planned family: built from the rows of that family only, one version at
    a time (each column then knows whether the version has its field, instead of checking row
    by row), then spread out to the batch's rows with one `take` (null where another family or
    an error)."""
    out = []
    for key, _name, cols in plan.families:
        rows = found.get(key)
        if rows is None:
            out.append(pa.nulls(n, cols.arrow_type))
            continue
        idx, objs, vers = rows
        by_version: dict[int, list[int]] = {}
        for j, v in enumerate(vers):
            group = by_version.get(v)
            if group is None:
                by_version[v] = [j]
            else:
                group.append(j)
        if len(by_version) == 1:
            built = cols.build(Dense(objs), vers[0])
            order: list[int] | range = range(len(objs))
        else:
            parts = []
            order = []
            for v, js in sorted(by_version.items()):
                parts.append(cols.build(Dense([objs[j] for j in js]), v))
                order.extend(js)
            built = pa.concat_arrays(parts)
        if len(idx) == n and isinstance(order, range):
            out.append(built)
            continue
        where: list[int | None] = [None] * n
        for p, j in enumerate(order):
            where[idx[j]] = p
        out.append(built.take(pa.array(where, pa.int32())))
    return out


def _pruned_request(frame: bytes, plan: Plan) -> tuple[Any, Any]:
    """Header and as much body as the plan needs: none for a family not asked for, the head
    when the asked-for columns lie in it, else all. Raises on anything unusual: the caller then
    decodes the frame whole, for the codecs' own error."""
    k, v = _HH.unpack_from(frame)
    if k in plan.header_only:
        hv = generated.request_header_version(k, v)
        return generated.RequestHeader.read(frame, 0, hv)[0], None
    versions = plan.heads.get(k)
    if versions is None or v not in versions:
        return generated.decode_request(frame)
    hv = generated.request_header_version(k, v)
    header, pos = generated.RequestHeader.read(frame, 0, hv)
    return header, generated.REGISTRY[k].request.read_head(frame, pos, v)


def _pruned_response(frame: bytes, k: int, v: int, plan: Plan) -> tuple[Any, Any]:
    """The response counterpart of _pruned_request (key and version come from the request)."""
    hv = generated.response_header_version(k, v)
    header, pos = generated.ResponseHeader.read(frame, 0, hv)
    if k in plan.header_only:
        return header, None
    return header, generated.REGISTRY[k].response.read_head(frame, pos, v)


def decode_request_array(frames: pa.Array, plan: Plan) -> pa.StructArray:
    """Request frames (without length prefix) -> struct<header..., error, family...> per row."""
    fault_point("decode-requests")
    with _no_gc():
        return _decode_requests(frames, plan)


def _decode_requests(frames: pa.Array, plan: Plan) -> pa.StructArray:
    n = len(frames)
    keys: list[Any] = [None] * n
    vers: list[Any] = [None] * n
    corr: list[Any] = [None] * n
    client: list[Any] = [None] * n
    errors: list[Any] = [None] * n
    status: list[Any] = [None] * n
    warned: list[Any] = [None] * n
    found: dict[int, tuple[list[int], list[Any], list[int]]] = {}
    by_key = plan.by_key
    decode = generated.decode_request
    pruned = plan.heads or plan.header_only
    for i, frame in enumerate(frames.to_pylist()):
        if frame is None:
            continue
        header: Any
        message: Any
        try:
            if pruned:
                try:
                    header, message = _pruned_request(frame, plan)
                except Exception:  # the whole decode below names what is wrong
                    header, message = decode(frame)
            else:
                header, message = decode(frame)
            status[i] = OK
            used = None
        except Exception as e:
            read = _as_kafka(plan, frame)
            if read is not None:
                header, message, used, warned[i] = read
                status[i] = OK
            else:
                errors[i] = _error_text(e)
                status[i] = _status(e)
                header = getattr(e, "header", None)
                if header is None:
                    keys[i], vers[i], corr[i], client[i] = _raw_header(frame)
                    continue
                message = None
        keys[i] = k = header.request_api_key
        vers[i] = v = header.request_api_version
        corr[i] = header.correlation_id
        client[i] = header.client_id
        if message is not None and k in by_key:
            rows = found.get(k)
            if rows is None:
                rows = found[k] = ([], [], [])
            rows[0].append(i)
            rows[1].append(message)
            rows[2].append(v if used is None else used)
    arrays = [
        pa.array(keys, pa.int16()),
        pa.array(vers, pa.int16()),
        pa.array(corr, pa.int32()),
        pa.array(client, pa.string()),
        pa.array(errors, pa.string()),
        pa.array(status, pa.string()),
        pa.array(warned, pa.list_(pa.string())),
    ] + _families(plan, n, found)
    return pa.StructArray.from_arrays(arrays, fields=list(plan.arrow_type))


def decode_response_array(
    frames: pa.Array, api_keys: pa.Array, api_versions: pa.Array, plan: Plan
) -> pa.StructArray:
    """Response frames, with their paired requests' api key and version, -> one struct per row."""
    fault_point("decode-responses")
    with _no_gc():
        return _decode_responses(frames, api_keys, api_versions, plan)


def _decode_responses(
    frames: pa.Array, api_keys: pa.Array, api_versions: pa.Array, plan: Plan
) -> pa.StructArray:
    n = len(frames)
    keys = api_keys.to_pylist()
    vers = api_versions.to_pylist()
    corr: list[Any] = [None] * n
    errors: list[Any] = [None] * n
    status: list[Any] = [None] * n
    warned: list[Any] = [None] * n
    found: dict[int, tuple[list[int], list[Any], list[int]]] = {}
    by_key = plan.by_key
    decode = generated.decode_response
    heads, header_only = plan.heads, plan.header_only
    for i, frame in enumerate(frames.to_pylist()):
        if frame is None:
            continue
        k, v = keys[i], vers[i]
        if k is None or v is None:
            errors[i] = "no api key and version: the response was not paired with a request"
            status[i] = UNPAIRED
            if len(frame) >= 4:
                corr[i] = int.from_bytes(frame[:4], "big", signed=True)
            continue
        header: Any
        message: Any
        try:
            if k in header_only or (k in heads and v in heads[k]):
                try:
                    header, message = _pruned_response(frame, k, v, plan)
                except Exception:  # the whole decode below names what is wrong
                    header, message = decode(frame, k, v)
            else:
                header, message = decode(frame, k, v)
            status[i] = OK
            used = v
        except Exception as e:
            read = _as_kafka(plan, frame, k, v)
            if read is not None:
                header, message, used, warned[i] = read
                status[i] = OK
            else:
                errors[i] = _error_text(e)
                status[i] = _status(e)
                header = getattr(e, "header", None)
                if header is None and len(frame) >= 4:
                    corr[i] = int.from_bytes(frame[:4], "big", signed=True)
                message = None
        if header is not None:
            corr[i] = header.correlation_id
        if message is not None and k in by_key:
            rows = found.get(k)
            if rows is None:
                rows = found[k] = ([], [], [])
            rows[0].append(i)
            rows[1].append(message)
            rows[2].append(used)
    arrays = [
        pa.array(keys, pa.int16()),
        pa.array(vers, pa.int16()),
        pa.array(corr, pa.int32()),
        pa.array(errors, pa.string()),
        pa.array(status, pa.string()),
        pa.array(warned, pa.list_(pa.string())),
    ] + _families(plan, n, found)
    return pa.StructArray.from_arrays(arrays, fields=list(plan.arrow_type))
