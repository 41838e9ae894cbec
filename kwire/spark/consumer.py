"""Typed columns for the consumer-protocol payloads carried in group-membership bytes fields.

The schemas say only "bytes"; Kafka's ConsumerProtocol decides what those bytes hold when the
group's protocol type is "consumer" (kafka-wire.md section 6). That placement is the one piece of
protocol knowledge written here by hand; the payload columns themselves come from the model.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import ShortType, StringType, StructField, StructType

import generated
from generated import KwireError, decode_version_prefixed
from kwire.spark.model import MISSING, Column, Selection, StructColumns, _FieldColumn

SUBSCRIPTION = "consumer_subscription"
ASSIGNMENT = "consumer_assignment"
CONSUMER = "consumer"

# Where the payloads live: message, path of schema field names to the bytes field, payload kind.
PAYLOADS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("JoinGroupRequest", ("Protocols", "Metadata"), SUBSCRIPTION),
    ("JoinGroupResponse", ("Members", "Metadata"), SUBSCRIPTION),
    ("SyncGroupRequest", ("Assignments", "Assignment"), ASSIGNMENT),
    ("SyncGroupResponse", ("Assignment",), ASSIGNMENT),
    ("DescribeGroupsResponse", ("Groups", "Members", "MemberMetadata"), SUBSCRIPTION),
    ("DescribeGroupsResponse", ("Groups", "Members", "MemberAssignment"), ASSIGNMENT),
)

PAYLOAD_CLASSES: dict[str, Any] = {
    SUBSCRIPTION: generated.ConsumerProtocolSubscription,
    ASSIGNMENT: generated.ConsumerProtocolAssignment,
}


def _resolve() -> dict[type, dict[str, str]]:
    """generated class -> {bytes field attr: payload kind}, found by walking FIELDS."""
    found: dict[type, dict[str, str]] = {}
    for message, path, kind in PAYLOADS:
        cls: Any = generated.MESSAGES.get(message)
        if cls is None:
            continue  # a package compiled without this message has nothing to decode
        for name in path[:-1]:
            cls = next(f.struct for f in cls.FIELDS if f.name == name)
        info = next(f for f in cls.FIELDS if f.name == path[-1])
        assert info.type == "bytes", (message, path, info.type)
        found.setdefault(cls, {})[info.attr] = kind
    return found


_PAYLOAD_FIELDS = _resolve()


class _Factory:
    def __init__(self, source: str, kind: str):
        self.source = source
        self.kind = kind

    def __call__(self, info: Any, valid: range, select: Selection) -> Column:
        return PayloadColumn(info, valid, self.kind, select)


def payload_columns(cls: Any) -> dict[str, _Factory]:
    """Extra columns a struct gets next to its payload-carrying bytes fields."""
    return {kind: _Factory(attr, kind) for attr, kind in _PAYLOAD_FIELDS.get(cls, {}).items()}


class PayloadColumn(_FieldColumn):
    """struct<version, ...payload fields..., error> decoded from a sibling bytes field.

    Decoded when the nearest enclosing ProtocolType is "consumer". Where no ProtocolType is
    stated (JoinGroupResponse before v7, SyncGroup before v5, or null), the bytes are decoded
    when they parse cleanly and left null otherwise, since they may belong to another protocol
    (Connect, Streams' own assignors are still "consumer"). Empty bytes give null.
    """

    needs_ctx = True

    def __init__(self, info: Any, valid: range, kind: str, select: Selection):
        super().__init__(info, valid)
        self.name = kind
        self.payload_cls = PAYLOAD_CLASSES[kind]
        inner_select: Selection = None
        self.want_version = self.want_error = True
        if select is not None:
            self.want_version = "version" in select
            self.want_error = "error" in select
            inner_select = {k: v for k, v in select.items() if k not in ("version", "error")}
        payload_valid: range = self.payload_cls.VALID_VERSIONS
        self.inner = None
        if inner_select is None or inner_select:
            self.inner = StructColumns(self.payload_cls, payload_valid, False, inner_select, kind)
        fields = []
        if self.want_version:
            fields.append(StructField("version", ShortType()))
        if self.inner is not None:
            fields.extend(self.inner.spark_type.fields)
        if self.want_error:
            fields.append(StructField("error", StringType()))
        if not fields:
            raise ValueError(f"{kind}: the selection leaves no columns")
        self.spark_type = StructType(fields)
        self.arrow_type = to_arrow_type(self.spark_type)
        self.max_version = payload_valid.stop - 1

    def build(self, objs: list[Any], versions: Any, ctx: Any) -> pa.Array:
        raw = self.values(objs, versions)
        n = len(objs)
        if raw is None:
            return pa.nulls(n, self.arrow_type)
        per_row = isinstance(ctx, list)
        decoded: list[Any] = [None] * n
        used: list[int] = [0] * n
        pversion: list[int | None] = [None] * n
        errors: list[str | None] = [None] * n
        null = [True] * n
        cls = self.payload_cls
        for i, data in enumerate(raw):
            if not data:
                continue
            protocol = ctx[i] if per_row else ctx
            if protocol is MISSING or protocol is None:
                strict = False
            elif protocol == CONSUMER:
                strict = True
            else:
                continue
            try:
                version, obj = decode_version_prefixed(cls, data)
            except KwireError as e:
                if strict:
                    null[i] = False
                    errors[i] = str(e)
                    if len(data) >= 2:
                        pversion[i] = int.from_bytes(data[:2], "big", signed=True)
                continue
            except Exception as e:  # the codecs promise KwireError only; never fail the job
                if strict:
                    null[i] = False
                    errors[i] = f"internal error: {type(e).__name__}: {e}"
                continue
            null[i] = False
            decoded[i] = obj
            pversion[i] = version
            used[i] = min(version, self.max_version)
        children: list[pa.Array] = []
        if self.want_version:
            children.append(pa.array(pversion, pa.int16()))
        if self.inner is not None:
            uniform = used[0] if used and all(u == used[0] for u in used) else used
            children.extend(self.inner.children(decoded, uniform, None))
        if self.want_error:
            children.append(pa.array(errors, pa.string()))
        mask = pa.array(null, pa.bool_()) if any(null) else None
        return pa.StructArray.from_arrays(children, fields=list(self.arrow_type), mask=mask)
