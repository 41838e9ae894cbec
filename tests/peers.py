"""Independent reference codecs ("peers") behind one plain-data interface.

kwire's tests cross-check the generated codecs byte-for-byte against two
implementations that share no code with kwire (nor with each other):

* **kio** (``kio``): generated frozen dataclasses per message version under
  ``kio.schema.<api>.v<N>.{request,response,header,data}``, serialised by
  ``kio.serial.entity_writer`` (pure Python) and parsed by
  ``kio.serial.entity_reader`` (native extension).
* **kafka-python 3** (``kafka.protocol``): builds its codecs at run time from
  the Kafka JSON schemas bundled in ``kafka/protocol/schemas/resources``.

Interface
---------
::

    from tests.peers import PEERS, KIO, KAFKA_PYTHON, Unrepresentable

    for peer in PEERS:                                    # (KIO, KAFKA_PYTHON)
        peer.name                                         # "kio" / "kafka-python"
        peer.versions("JoinGroupRequest") -> list[int]    # [] if unsupported
        peer.encode("JoinGroupRequest", 5, value) -> bytes
        peer.decode("JoinGroupRequest", 5, data) -> dict

``PEER_BY_NAME`` maps names to peers; ``common_versions(message)`` is the
intersection of all peers' versions; ``FAMILY`` lists the message names of the
consumer-group family; ``snake_case`` is the key convention below.

Message names are schema names: ``<Api>Request``/``<Api>Response``,
``ConsumerProtocolSubscription``/``ConsumerProtocolAssignment``,
``RequestHeader``/``ResponseHeader``.  Versions of the headers are *header*
versions (RequestHeader 1-2, ResponseHeader 0-1), not API versions.

Bytes are the body only: no size prefix, no request/response header, and for
``ConsumerProtocol*`` no leading int16 version (Kafka's ``ConsumerProtocol``
writes that prefix in front of the struct inside JoinGroup/SyncGroup
metadata; strip it before calling ``decode``).

Values
------
``value`` is a dict keyed by ``snake_case(schema field name)``.  Exactly the
fields present in ``version`` appear.  Nested structs are dicts, arrays are
lists, ``bytes``/``records`` are ``bytes``, ``uuid`` is ``uuid.UUID``,
strings ``str``, nullable values ``None``, ints/bools/floats plain Python
values (int16 error codes are plain ints, ``*Ms`` fields are plain int
milliseconds, authorized-operations bitfields plain signed int32).

encode:
  * every non-tagged field of the version is required; tagged fields may be
    left out, meaning "schema default" (not written).  Unknown keys and keys of
    fields absent from the version raise ``ValueError`` (so a schema mismatch
    between kwire and a peer surfaces instead of being papered over).
  * a uuid may also be given as ``None``; it is written as the all-zero uuid.
  * tagged fields equal to their schema default are not written (both peers
    do this, as does Kafka).

decode:
  * returns every field present in the version, tagged fields included (with
    the schema default when the tag is absent from the wire).
  * uuids come back as ``uuid.UUID``; the all-zero uuid comes back as
    ``uuid.UUID(int=0)`` (both peers turn it into ``None`` internally; the
    adapter undoes that, Kafka uuids are never nullable).
  * unknown tagged fields are dropped (kafka-python keeps them in
    ``unknown_tags``, kio skips them); nothing else peer-specific leaks out.
  * malformed input (truncated, trailing bytes after the body, bad utf-8)
    raises ``ValueError`` (the peer's own exception is the ``__cause__``).

``Unrepresentable`` (a ``ValueError``) is raised when a peer cannot hold a
value that is legal on the wire; see the kio quirks below.  Tests driving
peers with arbitrary values should skip/``assume`` on it.

kio quirks the adapter handles
------------------------------
* Entities are frozen, slotted, ``kw_only`` dataclasses; every field without a
  dataclass default must be passed, so the adapter passes all of them.
* kio renames millisecond fields and gives them semantic types:
  ``ThrottleTimeMs`` -> ``throttle_time: timedelta`` (``timedelta_i32``/
  ``timedelta_i64``), ``*TimestampMs``/``*TimeMs`` -> ``datetime``
  (``datetime_i64``).  The adapter maps ``<name>_ms`` <-> ``<name>`` and
  int ms <-> ``timedelta``/``datetime`` (a nullable ``datetime_i64`` uses
  ``-1`` for ``None``).
* int16 error codes are ``kio.schema.errors.ErrorCode`` (an IntEnum): a code
  kio does not know raises ``Unrepresentable`` on encode *and* decode.
* ``timedelta_i64`` (OffsetCommitRequest.RetentionTimeMs) is written as
  ``round(td.total_seconds() * 1000)``: values beyond ``timedelta`` range
  (~±8.64e16 ms) or that float seconds cannot carry (some from ~±2**51 ms on)
  raise ``Unrepresentable`` on encode (checked exactly, per value).  Decoding
  is exact within the ``timedelta`` range and ``Unrepresentable`` beyond it.
* Zero uuids decode to ``None`` (normalised, see above).
* No request/response header on entities; headers are their own entities
  (``kio.schema.request_header.v1/v2``, ``response_header.v0/v1``).
* kio only ships the versions the Kafka 4.x schemas declare valid
  (e.g. OffsetCommit 2-10, OffsetFetch 1-10).

kafka-python quirks the adapter handles
---------------------------------------
* Field names are ``re.sub('(?<!^)(?=[A-Z])', '_', name).lower()``, which
  differs from ``snake_case`` on acronyms; the adapter maps through the JSON
  field names, never through spelling.
* ``ApiMessage`` clamps every message's minimum version to 0 and speaks
  versions below the JSON's ``validVersions`` to old brokers; the bundled
  (Kafka 4.x) JSON still carries those versions' field ranges.  They are
  included only where that layout was checked against the pre-4.0 upstream
  schemas: OffsetCommitRequest/Response v0-1 and OffsetFetchRequest/Response
  v0 (kio has none of these, so kafka-python is the only reference there).
  Elsewhere versions below ``validVersions`` are excluded as unverified.
  RequestHeader v0 (no ClientId) is excluded: ``ApiHeader.encode`` can only
  produce v1 or v2.
* Encoding takes the message object (``cls(version=v)`` + attributes) and
  ``obj.encode(version=v)``, which writes the body only (``header=False``,
  ``framed=False`` are the defaults).  Nested structs must be objects (the
  generated encoder reads attributes; dicts are not supported, tuples lose
  tagged fields), so the adapter builds the nested data classes.
* Decoding uses the same compiled per-version decoder ``ApiMessage.decode``
  uses, but calls it directly so the end position can be checked and so
  ``ApiVersionsResponse.decode``'s broker-fallback hack (decode as v0 whenever
  ErrorCode != 0) does not apply: this module compares per-version codecs.
* ``DescribeGroupsResponse`` is patched to type ``AuthorizedOperations`` as a
  ``bitfield`` (a ``set`` of bit numbers, ``None`` for -2147483648); the
  adapter converts to/from the signed int32 on the wire.
* Zero uuids decode to ``None`` (normalised, see above).
* Its decoder slices strings/bytes without bounds checks: truncated input may
  decode to a short value; the adapter's end-position check turns that into
  ``ValueError``.
* ``ConsumerProtocol*`` are ``ApiData``; their ``encode``/``decode`` default to
  the int16 version prefix, the adapter passes ``header=False``.
* Headers are encoded by "flexible or not": RequestHeader v1 <-> non-flexible,
  v2 <-> flexible; ResponseHeader v0/v1 likewise.
* Structs nested inside a *tagged* field are always written with an empty
  tagged-field section and must have one on decode (no such struct carries
  tagged fields in the consumer-group family).
* Tagged fields are written in declaration order, not sorted by tag (kio
  sorts); identical for every schema in the family, where tags are declared
  in ascending order.
* No ConsumerGroupHeartbeat/ConsumerGroupDescribe schemas are bundled, so
  kafka-python supports no version of them.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import re
import struct
import uuid
import warnings
from typing import Any

__all__ = [
    "FAMILY",
    "KAFKA_PYTHON",
    "KIO",
    "PEERS",
    "PEER_BY_NAME",
    "Peer",
    "Unrepresentable",
    "common_versions",
    "snake_case",
]

_SNAKE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

_APIS = (
    "OffsetCommit",
    "OffsetFetch",
    "FindCoordinator",
    "JoinGroup",
    "Heartbeat",
    "LeaveGroup",
    "SyncGroup",
    "DescribeGroups",
    "ListGroups",
    "ApiVersions",
    "DeleteGroups",
    "OffsetDelete",
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
)
FAMILY: tuple[str, ...] = tuple(a + s for a in _APIS for s in ("Request", "Response")) + (
    "ConsumerProtocolSubscription",
    "ConsumerProtocolAssignment",
    "RequestHeader",
    "ResponseHeader",
)

_ZERO_UUID = uuid.UUID(int=0)
_MS = datetime.timedelta(milliseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def snake_case(name: str) -> str:
    """Schema field name -> dict key: GroupInstanceId -> group_instance_id."""
    return _SNAKE.sub("_", name).lower()


class Unrepresentable(ValueError):
    """The peer cannot represent this (wire-legal) value."""


class Peer:
    """Common interface; see the module docstring."""

    name: str = "?"

    def versions(self, message_name: str) -> list[int]:
        raise NotImplementedError

    def encode(self, message_name: str, version: int, value: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def decode(self, message_name: str, version: int, data: bytes) -> dict[str, Any]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<peer {self.name}>"

    def _check_version(self, message_name: str, version: int) -> None:
        if version not in self.versions(message_name):
            raise ValueError(f"{self.name} does not support {message_name} v{version}")


def _check_keys(where: str, value: dict[str, Any], known: set[str], required: set[str]) -> None:
    if not isinstance(value, dict):
        raise TypeError(f"{where}: expected a dict, got {type(value).__name__}")
    extra = set(value) - known
    missing = required - set(value)
    if extra or missing:
        raise ValueError(
            f"{where}: unknown or out-of-version keys {sorted(extra)}, missing keys {sorted(missing)}"
        )


# --------------------------------------------------------------------------- kio


class _KioPeer(Peer):
    name = "kio"

    _MS_TYPES = ("timedelta_i32", "timedelta_i64", "datetime_i64")

    def __init__(self) -> None:
        from kio.index import load_entity_schema
        from kio.schema.errors import ErrorCode
        from kio.schema.index import schema_name_map
        from kio.serial import entity_reader, entity_writer
        from kio.serial.errors import SerialError
        from kio.serial._introspect import (
            EntityField,
            EntityTupleField,
            PrimitiveTupleField,
            classify_field,
            get_field_tag,
            is_optional,
        )
        from kio.static.constants import EntityType

        self._load = load_entity_schema
        self._ErrorCode = ErrorCode
        self._names = schema_name_map
        self._reader = entity_reader
        self._SerialError = SerialError
        self._writer = entity_writer
        self._classify = classify_field
        self._tag = get_field_tag
        self._optional = is_optional
        self._EntityField = EntityField
        self._EntityTupleField = EntityTupleField
        self._PrimitiveTupleField = PrimitiveTupleField
        self._ET = EntityType

    def _locate(self, message_name: str) -> tuple[str, Any]:
        ET = self._ET
        if message_name.endswith("Header"):
            return snake_case(message_name), ET.header
        if message_name.endswith("Request"):
            return snake_case(message_name[: -len("Request")]), ET.request
        if message_name.endswith("Response"):
            return snake_case(message_name[: -len("Response")]), ET.response
        return snake_case(message_name), ET.data

    def versions(self, message_name: str) -> list[int]:
        base, kind = self._locate(message_name)
        return sorted(v for v, kinds in self._names.get(base, {}).items() if kind in kinds)

    def _entity(self, message_name: str, version: int) -> Any:
        self._check_version(message_name, version)
        base, kind = self._locate(message_name)
        return self._load(base, version, kind)

    # kio drops the "_ms" suffix of fields it types as timedelta/datetime, and escapes names
    # that shadow Python builtins with a trailing underscore (type_, id_).
    def _key(self, f: dataclasses.Field[Any]) -> str:
        name = f.name[:-1] if f.name.endswith("_") else f.name
        if f.metadata.get("kafka_type") in self._MS_TYPES:
            return name + "_ms"
        return name

    def encode(self, message_name: str, version: int, value: dict[str, Any]) -> bytes:
        cls = self._entity(message_name, version)
        entity = self._to_entity(cls, value, message_name)
        buf = io.BytesIO()
        self._writer(cls)(buf, entity)
        return buf.getvalue()

    def decode(self, message_name: str, version: int, data: bytes) -> dict[str, Any]:
        cls = self._entity(message_name, version)
        data = bytes(data)
        try:
            entity, size = self._reader(cls)(data, 0)
        except (self._SerialError, ValueError) as e:  # BufferUnderflow, bad utf-8, ...
            # Wire-legal values kio's types can't hold: unknown error codes,
            # int64 ms beyond the timedelta/datetime range.
            if "is not a valid ErrorCode" in str(e) or "overflow" in str(e):
                raise Unrepresentable(f"kio: {message_name} v{version}: {e}") from e
            raise ValueError(f"kio: cannot decode {message_name} v{version}: {e!r}") from e
        if size != len(data):
            raise ValueError(
                f"kio: cannot decode {message_name} v{version}: used {size} of {len(data)} bytes"
            )
        return self._from_entity(entity)

    def _to_entity(self, cls: type, value: dict[str, Any], where: str) -> Any:
        fields = dataclasses.fields(cls)
        keys = {self._key(f): f for f in fields}
        required = {k for k, f in keys.items() if self._tag(f) is None}
        _check_keys(where, value, set(keys), required)
        kwargs = {}
        for key, f in keys.items():
            if key in value:
                kwargs[f.name] = self._to_field(f, value[key], f"{where}.{key}")
        return cls(**kwargs)

    def _to_field(self, f: dataclasses.Field[Any], v: Any, where: str) -> Any:
        fc = self._classify(f)
        if isinstance(fc, self._EntityTupleField):
            if v is None:
                return None
            return tuple(self._to_entity(fc.type_, item, where) for item in v)
        if isinstance(fc, self._EntityField):
            return None if v is None else self._to_entity(fc.type_, v, where)
        kafka_type = f.metadata["kafka_type"]
        if isinstance(fc, self._PrimitiveTupleField):
            if v is None:
                return None
            return tuple(self._to_primitive(kafka_type, False, item, where) for item in v)
        return self._to_primitive(kafka_type, self._optional(f), v, where)

    def _to_primitive(self, kafka_type: str, optional: bool, v: Any, where: str) -> Any:
        if kafka_type == "error_code":
            try:
                return self._ErrorCode(v)
            except ValueError as e:
                raise Unrepresentable(f"kio: {where}: {e}") from e
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            try:
                td = datetime.timedelta(milliseconds=v)
            except OverflowError as e:
                raise Unrepresentable(f"kio: {where}: {v} ms overflows timedelta") from e
            if round(td.total_seconds() * 1000) != v:  # what kio's writer computes
                raise Unrepresentable(f"kio: {where}: {v} ms does not survive float seconds")
            return td
        if kafka_type == "datetime_i64":
            if optional and v == -1:
                return None
            try:
                dt = _EPOCH + datetime.timedelta(milliseconds=v)
            except OverflowError as e:
                raise Unrepresentable(f"kio: {where}: {v} ms overflows datetime") from e
            ms = dt.timestamp() * 1000
            if v < 0 or round(ms) != v or int(ms) != v:  # kio's writer rounds, its reader cuts
                raise Unrepresentable(f"kio: {where}: {v} ms is not a kio TZAware datetime")
            return dt
        if kafka_type in ("bytes", "records") and v is not None:
            return bytes(v)
        return v

    def _from_entity(self, entity: Any) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(entity):
            out[self._key(f)] = self._from_field(f, getattr(entity, f.name))
        return out

    def _from_field(self, f: dataclasses.Field[Any], v: Any) -> Any:
        fc = self._classify(f)
        if isinstance(fc, self._EntityTupleField):
            return None if v is None else [self._from_entity(item) for item in v]
        if isinstance(fc, self._EntityField):
            return None if v is None else self._from_entity(v)
        kafka_type = f.metadata["kafka_type"]
        if isinstance(fc, self._PrimitiveTupleField):
            return None if v is None else [self._from_primitive(kafka_type, x) for x in v]
        return self._from_primitive(kafka_type, v)

    @staticmethod
    def _from_primitive(kafka_type: str, v: Any) -> Any:
        if kafka_type == "uuid":
            return _ZERO_UUID if v is None else v
        if v is None:
            return -1 if kafka_type == "datetime_i64" else None
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            return v // _MS
        if kafka_type == "datetime_i64":
            return (v - _EPOCH) // _MS
        if kafka_type in ("bytes", "records"):
            return bytes(v)
        if kafka_type == "bool":
            return bool(v)
        if kafka_type == "float64":
            return float(v)
        if kafka_type == "string":
            return str(v)
        return int(v)  # ints, error codes (IntEnum)


# ------------------------------------------------------------------ kafka-python


class _KafkaPythonPeer(Peer):
    name = "kafka-python"

    # Lowest version to offer where it is below the bundled JSON's validVersions:
    # Kafka 4.0 dropped these versions from validVersions but kept their field
    # ranges, which match the 3.x schemas (e.g. CommitTimestamp "versions": "1").
    _VERIFIED_BELOW_VALID = {
        "OffsetCommitRequest": 0,
        "OffsetCommitResponse": 0,
        "OffsetFetchRequest": 0,
        "OffsetFetchResponse": 0,
    }

    def __init__(self) -> None:
        # Importing the API modules defines (and so registers) the message classes,
        # each loading its JSON through importlib.resources.read_text, which warns.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import kafka.protocol.admin  # noqa: F401
            import kafka.protocol.consumer  # noqa: F401
            import kafka.protocol.metadata  # noqa: F401
            import kafka.protocol.producer  # noqa: F401
        from kafka.protocol.api_data import ApiData
        from kafka.protocol.api_header import RequestHeader, ResponseHeader
        from kafka.protocol.api_message import ApiMessage
        from kafka.protocol.schemas.fields import ArrayField, StructArrayField, StructField
        from kafka.protocol.schemas.fields.base import BaseField
        from kafka.protocol.schemas.fields.codecs import BitField, UUID

        self._ApiData = ApiData
        self._parse_versions = BaseField.parse_versions
        self._ArrayField = ArrayField
        self._StructField = StructField
        self._StructArrayField = StructArrayField
        self._BitField = BitField
        self._UUID = UUID
        self._classes: dict[str, Any] = {
            "RequestHeader": RequestHeader,
            "ResponseHeader": ResponseHeader,
        }

        def subclasses(c: Any) -> Any:
            for sub in c.__subclasses__():
                yield sub
                yield from subclasses(sub)

        for base in (ApiMessage, ApiData):
            for c in subclasses(base):
                # Primary classes only: ApiMessage's cls[v] creates per-version
                # subclasses (with _class_version set); ApiData has no such thing.
                if "_json" in c.__dict__ and getattr(c, "_class_version", None) is None:
                    self._classes[c._json["name"]] = c

    def versions(self, message_name: str) -> list[int]:
        cls = self._classes.get(message_name)
        if cls is None:
            # e.g. ConsumerGroupHeartbeat/Describe: no bundled schema.
            return []
        # The JSON's validVersions, not cls.min_version (always 0, see docstring),
        # except where the older layouts were verified.
        lo, hi = self._parse_versions(cls._json["validVersions"])
        lo = min(lo, self._VERIFIED_BELOW_VALID.get(message_name, lo))
        return list(range(lo, hi + 1))

    def _cls(self, message_name: str, version: int) -> Any:
        self._check_version(message_name, version)
        return self._classes[message_name]

    @staticmethod
    def _fields(struct: Any, version: int) -> list[Any]:
        return [f for f in struct._fields if f.for_version_q(version)]

    def _flexible(self, cls: Any, version: int) -> bool:
        flex = self._parse_versions(cls._json["flexibleVersions"])
        return flex is not None and flex[0] <= version <= flex[1]

    def encode(self, message_name: str, version: int, value: dict[str, Any]) -> bytes:
        cls = self._cls(message_name, version)
        obj = self._to_obj(cls, cls._struct, value, version, message_name)
        if cls._json["type"] == "header":
            return obj.encode(flexible=self._flexible(cls, version))
        if issubclass(cls, self._ApiData):
            return obj.encode(version=version, header=False)
        return obj.encode(version=version)

    def decode(self, message_name: str, version: int, data: bytes) -> dict[str, Any]:
        cls = self._cls(message_name, version)
        data = bytes(data)
        try:
            obj, end = self._parse(cls, version, data)
        except (struct.error, IndexError, ValueError, AssertionError) as e:
            # truncated input, bad utf-8, tags inside a tagged struct, ...
            raise ValueError(f"kafka-python: cannot decode {message_name} v{version}: {e!r}") from e
        # kafka-python slices strings/bytes without a bounds check, so truncated
        # input can "succeed" with a short value and an end beyond the data.
        if end != len(data):
            raise ValueError(
                f"kafka-python: cannot decode {message_name} v{version}:"
                f" used {end} of {len(data)} bytes"
            )
        return self._from_obj(cls._struct, obj, version)

    def _parse(self, cls: Any, version: int, data: bytes) -> tuple[Any, int]:
        if cls._json["type"] == "header" or issubclass(cls, self._ApiData):
            bio = io.BytesIO(data)
            if cls._json["type"] == "header":
                obj = cls.decode(bio, flexible=self._flexible(cls, version))
            else:
                obj = cls.decode(bio, version=version, header=False)
            return obj, bio.tell()
        # What ApiMessage.decode does, minus per-class overrides, keeping the position.
        flexible = cls.flexible_version_q(version)
        fast_decode = cls._struct.compiled_decode_from(
            version, compact=flexible, tagged=flexible, data_class=cls[None]
        )
        return fast_decode(memoryview(data), 0)

    # kafka-python renames some fields at import (its patched schema JSON): its name -> the
    # schema's, by the struct that holds the field (the message itself, or a nested struct).
    _RENAMED = {
        ("MetadataResponse", "authorized_operations"): "cluster_authorized_operations",
        ("MetadataResponseTopic", "authorized_operations"): "topic_authorized_operations",
        ("DescribeClusterResponse", "authorized_operations"): "cluster_authorized_operations",
    }

    def _key(self, struct: Any, f: Any) -> str:
        name = snake_case(f._name)
        for candidate in (getattr(struct, "_type_str", ""), getattr(struct, "_name", "")):
            renamed = self._RENAMED.get((str(candidate).lstrip("[]"), name))
            if renamed:
                return renamed
        return name

    def _to_obj(self, data_class: Any, struct: Any, value: Any, version: int, where: str) -> Any:
        fields = {self._key(struct, f): f for f in self._fields(struct, version)}
        required = {k for k, f in fields.items() if not f.tagged_field_q(version)}
        _check_keys(where, value, set(fields), required)
        # Attributes rather than constructor kwargs: ApiMessage.__init__ swallows
        # min_version/max_version kwargs.
        obj = data_class(version=version)
        for key, f in fields.items():
            if key in value:
                if self._default_tagged_struct(f, value[key], version):
                    continue  # kafka-python would write it; Kafka leaves a default out
                setattr(obj, f.name, self._to_value(f, value[key], version, f"{where}.{key}"))
        return obj

    def _default_tagged_struct(self, f: Any, v: Any, version: int) -> bool:
        """A tagged struct field holding the struct of defaults (kafka-python writes any
        tagged struct it is given, default or not)."""
        if not (isinstance(f, self._StructField) and f.tagged_field_q(version)):
            return False
        return bool(v == self._from_obj(f, f.data_class(version=version), version))

    def _to_value(self, f: Any, v: Any, version: int, where: str) -> Any:
        if v is None:
            return None
        if isinstance(f, self._StructArrayField):
            return [self._to_obj(f.data_class, f.array_of, item, version, where) for item in v]
        if isinstance(f, self._StructField):
            return self._to_obj(f.data_class, f, v, version, where)
        if isinstance(f, self._ArrayField):
            return [self._to_simple(f.array_of, item) for item in v]
        return self._to_simple(f, v)

    def _to_simple(self, f: Any, v: Any) -> Any:
        if f._type is self._BitField:
            v &= 0xFFFFFFFF
            return {b for b in range(32) if v >> b & 1}
        return v

    def _from_obj(self, struct: Any, obj: Any, version: int) -> dict[str, Any]:
        return {
            self._key(struct, f): self._from_value(f, getattr(obj, f.name), version)
            for f in self._fields(struct, version)
        }

    def _from_value(self, f: Any, v: Any, version: int) -> Any:
        if isinstance(f, self._StructArrayField):
            return None if v is None else [self._from_obj(f.array_of, x, version) for x in v]
        if isinstance(f, self._StructField):
            if v is None and f.tagged_field_q(version):
                # kafka-python leaves an absent tagged struct as None; the schema's value for
                # it is the struct of defaults, which is what every other reader returns.
                v = f.data_class(version=version)
            return None if v is None else self._from_obj(f, v, version)
        if isinstance(f, self._ArrayField):
            return None if v is None else [self._from_simple(f.array_of, x) for x in v]
        return self._from_simple(f, v)

    def _from_simple(self, f: Any, v: Any) -> Any:
        if f._type is self._BitField:
            if v is None:  # kafka-python's spelling of -2147483648 ({31})
                return -(2**31)
            n = sum(1 << b for b in v)
            return n - (1 << 32) if n >= 1 << 31 else n
        if f._type is self._UUID:
            return _ZERO_UUID if v is None else v
        if isinstance(v, (bytearray, memoryview)):
            return bytes(v)
        return v


KIO: Peer = _KioPeer()
KAFKA_PYTHON: Peer = _KafkaPythonPeer()
PEERS: tuple[Peer, ...] = (KIO, KAFKA_PYTHON)
PEER_BY_NAME: dict[str, Peer] = {p.name: p for p in PEERS}


def common_versions(message_name: str, peers: tuple[Peer, ...] = PEERS) -> list[int]:
    """Versions of ``message_name`` that every one of ``peers`` supports."""
    common = set(peers[0].versions(message_name))
    for peer in peers[1:]:
        common &= set(peer.versions(message_name))
    return sorted(common)
