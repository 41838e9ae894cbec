"""Spark and Arrow types for kwire's generated messages, and the columnar builders that fill them.

Everything here is derived from the generated classes' `FIELDS` (the compiler's model, printed
into the codecs), so one message has one StructType across all its versions; nothing is written
per message. This module knows nothing of consumer-protocol payloads: `consumer.py` adds those
columns through the `extras_of` hook, and `families.py` puts the two together.
"""

from __future__ import annotations

import os
import re
from itertools import accumulate, chain, repeat
from operator import attrgetter, is_
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

import generated
from generated import kafka_uuid

SCALAR_TYPES: dict[str, DataType] = {
    "bool": BooleanType(),
    "int8": ByteType(),
    "int16": ShortType(),
    "int32": IntegerType(),
    "int64": LongType(),
    "uint16": IntegerType(),  # Spark has no unsigned types: widen to the next signed type
    "uint32": LongType(),
    "float64": DoubleType(),
    "string": StringType(),
    "uuid": StringType(),  # Kafka's base64url text (generated.kafka_uuid), as Kafka tools print it
    "bytes": BinaryType(),
    "records": BinaryType(),
}

UNKNOWN_TAGS = "unknown_tags"
UNKNOWN_TAGS_TYPE = MapType(IntegerType(), BinaryType())

# Selection: None selects a whole subtree; a dict selects some of a struct's columns by name.
Selection = dict[str, "Selection"] | None


def snake(name: str) -> str:
    """`ConsumerGroupHeartbeat` -> `consumer_group_heartbeat` (same rule as the codecs' attrs)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


# Family column name -> api key, for every api key the generated package knows.
FAMILIES: dict[str, int] = {
    snake(info.name): key for key, info in sorted(generated.REGISTRY.items())
}
FAMILY_OF_KEY: dict[int, str] = {key: name for name, key in FAMILIES.items()}


def rows_of(decoded: DataFrame, family: str) -> DataFrame:
    """The rows of a decoded table (the job's OUT/requests or OUT/responses) that carry one
    API's message. The api key is tested first: a table partitioned by it is then read in that
    API's partition alone, where the struct's test alone reads every file of every API."""
    return decoded.where((F.col("api_key") == FAMILIES[family]) & F.col(family).isNotNull())


def parse_selection(paths: Iterable[str]) -> dict[str, Selection]:
    """Dotted paths (`join_group.protocols.name`) -> a selection tree; a prefix selects all below."""
    tree: dict[str, Selection] = {}
    for path in paths:
        parts = [p for p in path.split(".") if p]
        if not parts:
            raise ValueError(f"empty field path {path!r}")
        node: dict[str, Selection] = tree
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part in node and node[part] is None:
                break  # already selected whole
            if last:
                node[part] = None
            else:
                child = node.setdefault(part, {})
                assert child is not None
                node = child
    return tree


class Column:
    """One column of a struct: its Spark type and how to fill it from decoded objects."""

    name: str
    spark_type: DataType

    def field(self) -> StructField:
        return StructField(self.name, self.spark_type, nullable=True)

    def build(self, objs: list[Any], versions: Any, ctx: Any) -> pa.Array:
        """objs: the enclosing structs (None where null); versions: one int or one per obj;
        ctx: the protocol type in force (one value or one per obj), or None when not needed."""
        raise NotImplementedError


class Dense(list):  # type: ignore[type-arg,unused-ignore]
    """A list of objects known to hold no None (messages, elements of a list of structs), so
    the columns built from it skip the per-row null checks."""

    __slots__ = ()


def has_none(objs: list[Any]) -> bool:
    """`None in objs` without calling the generated dataclasses' __eq__ per element."""
    if type(objs) is Dense:
        return False
    return any(map(is_, objs, repeat(None)))


def _uniform(values: list[Any]) -> Any:
    """Collapses a per-row list to one value when every row shares it (the common case)."""
    if not values:
        return 0
    first = values[0]
    for v in values:
        if v != first:
            return values
    return first


class _FieldColumn(Column):
    """A schema field: knows which versions have it, so absent versions give nulls."""

    def __init__(self, info: Any, valid: range):
        self.info = info
        self.name = info.attr
        self.get = attrgetter(info.attr)
        self.versions: range = info.versions
        # A field present in every valid version of the message never needs a per-row check.
        self.always = all(v in info.versions for v in valid)

    def values(self, objs: list[Any], versions: Any) -> list[Any] | None:
        """The attribute per row, None where the struct is null or the version lacks the field;
        returns None when no row has the field."""
        get = self.get
        if self.always or isinstance(versions, int):
            if not self.always and versions not in self.versions:
                return None
            if has_none(objs):
                return [None if o is None else get(o) for o in objs]
            return list(map(get, objs))
        rng = self.versions
        return [None if o is None or v not in rng else get(o) for o, v in zip(objs, versions)]


def _load_columns() -> Any:
    """The compiled column builder (kwire/spark/_columns.pyx, built by `make setup` or into the
    wheel), or None: not built, built for another interface, or KWIRE_PURE_PYTHON set. Either
    way the columns are the same arrays."""
    if os.environ.get("KWIRE_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from kwire.spark import _columns as module
    except ImportError:
        return None
    return module if getattr(module, "API", None) == 1 else None


# In a box so tests can set it to None (the Python way) and back.
COMPILED: list[Any] = [_load_columns()]


class ScalarColumn(_FieldColumn):
    def __init__(self, info: Any, valid: range, element: str | None = None):
        super().__init__(info, valid)
        kind = element or info.type
        base = SCALAR_TYPES[kind]
        self.spark_type = ArrayType(base) if element else base
        self.arrow_type = to_arrow_type(self.spark_type)
        self.convert = kafka_uuid if kind == "uuid" else None
        self.is_list = element is not None
        self.kind = kind

    def build(self, objs: list[Any], versions: Any, ctx: Any) -> pa.Array:
        compiled = COMPILED[0]
        if (
            compiled is not None
            and not self.is_list
            and (self.always or (isinstance(versions, int) and versions in self.versions))
        ):
            kind = compiled.kind_of(self.kind)
            if kind is not None:
                built = compiled.scalar(objs, self.name, kind, self.arrow_type)
                if built is not None:
                    return built
        vals = self.values(objs, versions)
        if vals is None:
            return pa.nulls(len(objs), self.arrow_type)
        if self.convert is not None:
            c = self.convert
            if self.is_list:
                vals = [None if x is None else [c(u) for u in x] for x in vals]
            else:
                vals = [None if x is None else c(x) for x in vals]
        return pa.array(vals, self.arrow_type)


class StructColumn(_FieldColumn):
    """A single (possibly nullable) nested struct."""

    def __init__(
        self, info: Any, valid: range, flexible: bool, select: Selection, extras: "Extras"
    ):
        super().__init__(info, valid)
        self.struct = StructColumns(info.struct, valid, flexible, select, info.attr, extras)
        self.spark_type = self.struct.spark_type
        self.arrow_type = self.struct.arrow_type

    def build(self, objs: list[Any], versions: Any, ctx: Any) -> pa.Array:
        vals = self.values(objs, versions)
        if vals is None:
            return pa.nulls(len(objs), self.arrow_type)
        return self.struct.build(vals, versions, ctx)


class StructListColumn(_FieldColumn):
    """An array of structs: flattened, built once for all elements of the batch, then offset."""

    def __init__(
        self, info: Any, valid: range, flexible: bool, select: Selection, extras: "Extras"
    ):
        super().__init__(info, valid)
        self.struct = StructColumns(info.struct, valid, flexible, select, info.attr, extras)
        self.spark_type = ArrayType(self.struct.spark_type)
        self.arrow_type = to_arrow_type(self.spark_type)

    def build(self, objs: list[Any], versions: Any, ctx: Any) -> pa.Array:
        lists = self.values(objs, versions)
        if lists is None:
            return pa.nulls(len(objs), self.arrow_type)
        if isinstance(versions, int) and not isinstance(ctx, list) and not has_none(lists):
            # The common case, all in C: no null lists, one version and protocol type.
            offsets = list(accumulate(map(len, lists), initial=0))
            child = self.struct.build(Dense(chain.from_iterable(lists)), versions, ctx)
            return pa.ListArray.from_arrays(
                pa.array(offsets, pa.int32()), child, type=self.arrow_type
            )
        flat: list[Any] = Dense()
        offsets = [0]
        nulls: list[bool] | None = None
        per_row_v = not isinstance(versions, int)
        per_row_c = ctx is not None and isinstance(ctx, list)
        fv: list[int] = []
        fc: list[Any] = []
        total = 0
        for i, lst in enumerate(lists):
            if lst is None:
                if nulls is None:
                    nulls = [False] * len(lists)
                nulls[i] = True
            else:
                n = len(lst)
                if n:
                    flat.extend(lst)
                    total += n
                    if per_row_v:
                        fv.extend([versions[i]] * n)
                    if per_row_c:
                        fc.extend([ctx[i]] * n)
            offsets.append(total)
        child_v = _uniform(fv) if per_row_v else versions
        child_c = _uniform(fc) if per_row_c else ctx
        child = self.struct.build(flat, child_v, child_c)
        mask = pa.array(nulls, pa.bool_()) if nulls is not None else None
        return pa.ListArray.from_arrays(
            pa.array(offsets, pa.int32()), child, type=self.arrow_type, mask=mask
        )


class UnknownTagsColumn(Column):
    """Tagged fields the schema does not know, kept raw: map<int, binary>, null when none."""

    name = UNKNOWN_TAGS
    spark_type = UNKNOWN_TAGS_TYPE

    def __init__(self) -> None:
        self.arrow_type = to_arrow_type(self.spark_type)

    def build(self, objs: list[Any], versions: Any, ctx: Any) -> pa.Array:
        compiled = COMPILED[0]
        if compiled is not None and not compiled.any_tags(objs):
            return pa.nulls(len(objs), self.arrow_type)
        vals = [
            None if o is None or not o.unknown_tags else list(o.unknown_tags.items()) for o in objs
        ]
        return pa.array(vals, self.arrow_type)


PROTOCOL_TYPE_ATTR = "protocol_type"


class _Missing:
    """The protocol type where no enclosing struct states it (absent in this version)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()

# Extra columns a struct class gets beside its own fields (consumer.py's payload columns): class ->
# {column name: factory(info of the source field, valid versions, selection) -> Column}, where the
# factory has a `source` attribute naming the field the column is derived from.
Extras = Callable[[Any], dict[str, Any]]


def no_extras(cls: Any) -> dict[str, Any]:
    return {}


class StructColumns:
    """The columns of one generated class (message or nested struct), in schema order."""

    def __init__(
        self,
        cls: Any,
        valid: range,
        flexible: bool,
        select: Selection = None,
        path: str = "",
        extras_of: Extras = no_extras,
    ):
        self.cls = cls
        self.columns: list[Column] = []
        names = {f.attr for f in cls.FIELDS}
        extras = extras_of(cls)
        available = sorted(names | set(extras) | ({UNKNOWN_TAGS} if flexible else set()))
        if select is not None:
            unknown = set(select) - set(available)
            if unknown:
                raise ValueError(
                    f"{path or cls.__name__}: no column {sorted(unknown)}; "
                    f"available: {', '.join(available)}"
                )
        protocol_info = None
        for info in cls.FIELDS:
            if info.attr == PROTOCOL_TYPE_ATTR:
                protocol_info = info
            wanted = select is None or info.attr in select
            sub = None if select is None else select.get(info.attr)
            if wanted:
                self.columns.append(_field_column(info, valid, flexible, sub, extras_of))
            for extra_name, make in extras.items():
                if make.source == info.attr and (select is None or extra_name in select):
                    sub = None if select is None else select.get(extra_name)
                    self.columns.append(make(info, valid, sub))
        if flexible and (select is None or UNKNOWN_TAGS in select):
            self.columns.append(UnknownTagsColumn())
        if not self.columns:
            raise ValueError(f"{path or cls.__name__}: the selection leaves no columns")
        self.spark_type = StructType([c.field() for c in self.columns])
        self.arrow_type = to_arrow_type(self.spark_type)
        # Consumer payloads below need the nearest enclosing ProtocolType; this struct states it
        # when it has that field, in the versions that have it.
        self.protocol = _FieldColumn(protocol_info, valid) if protocol_info is not None else None
        self.needs_ctx = any(_needs_ctx(c) for c in self.columns)

    def children(self, objs: list[Any], versions: Any, ctx: Any) -> list[pa.Array]:
        if self.needs_ctx and self.protocol is not None:
            stated = self.protocol.values(objs, versions)
            if stated is None:
                ctx = ctx if ctx is not None else MISSING
            else:
                ctx = _uniform([MISSING if p is None else p for p in stated])
        elif not self.needs_ctx:
            ctx = None
        elif ctx is None:
            ctx = MISSING
        return [c.build(objs, versions, ctx) for c in self.columns]

    def build(self, objs: list[Any], versions: Any, ctx: Any = None) -> pa.Array:
        mask = None
        if has_none(objs):
            mask = pa.array(list(map(is_, objs, repeat(None))), pa.bool_())
        elif type(objs) is not Dense:
            objs = Dense(objs)
        return pa.StructArray.from_arrays(
            self.children(objs, versions, ctx), fields=list(self.arrow_type), mask=mask
        )


def _needs_ctx(c: Column) -> bool:
    if isinstance(c, (StructColumn, StructListColumn)):
        return c.struct.needs_ctx
    return bool(getattr(c, "needs_ctx", False))


def _field_column(
    info: Any, valid: range, flexible: bool, select: Selection, extras: Extras
) -> Column:
    t: str = info.type
    if info.struct is not None:
        if t.startswith("[]"):
            return StructListColumn(info, valid, flexible, select, extras)
        return StructColumn(info, valid, flexible, select, extras)
    if select:
        raise ValueError(f"{info.attr} is a {t}, it has no columns to select")
    if t.startswith("[]"):
        return ScalarColumn(info, valid, element=t[2:])
    if t not in SCALAR_TYPES:
        raise ValueError(f"{info.attr}: no Spark type for schema type {t!r}")
    return ScalarColumn(info, valid)


def versions_of(rows: Sequence[int]) -> Any:
    return _uniform(list(rows))
