"""Decoded batches and records, and the vocabularies they use.

One :class:`Batch` stands for one entry of a records field: a v2 record batch, or a magic 0/1
message (a compressed wrapper with its inner messages, or a plain message holding one record).
Its fields are what the wire carries, so :func:`records.encode_batch` can write the same bytes
back; the fields that only describe *this* copy of the bytes (position, size, CRCs, codec
framing) are excluded from equality, so ``decode(encode(batch)) == [batch]`` compares meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Kafka's "no value" for producer id/epoch, sequence, leader epoch and timestamps.
NONE = -1

#: Codec id -> name used in the OUT/records ``compression`` column.
CODEC_NAMES: dict[int, str] = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
CODEC_IDS: dict[str, int] = {name: cid for cid, name in CODEC_NAMES.items()}

CREATE_TIME = "create"
LOG_APPEND_TIME = "log_append"

# batch_status vocabulary (design.md, OUT/records).
OK = "ok"
PARTIAL = "partial"
CRC_MISMATCH = "crc_mismatch"
MALFORMED = "malformed"
TOO_LARGE = "too_large"
UNSUPPORTED_CODEC = "unsupported_codec"
STATUSES = (OK, PARTIAL, CRC_MISMATCH, MALFORMED, TOO_LARGE, UNSUPPORTED_CODEC)

#: Control record key ``type`` -> name.  0/1 are transaction markers (the ``commit``/``abort`` of
#: design.md); 2-6 appear only in KRaft logs and are named so they are not mistaken for data.
CONTROL_TYPES: dict[int, str] = {
    0: "abort",
    1: "commit",
    2: "leader_change",
    3: "snapshot_header",
    4: "snapshot_footer",
    5: "kraft_version",
    6: "kraft_voters",
}
CONTROL_TYPE_IDS: dict[str, int] = {name: tid for tid, name in CONTROL_TYPES.items()}
UNKNOWN_CONTROL = "unknown"

Header = tuple[str, "bytes | None"]


@dataclass(slots=True)
class Record:
    """One record (v2) or one message (magic 0/1) as a consumer would see it.

    ``offset`` is absolute (relative inner offsets of magic 1 wrappers already resolved) and
    ``timestamp`` is the one Kafka reports: the batch's when the batch says LogAppendTime.  In
    that case the timestamp the record itself carries is kept in ``own_timestamp`` (None when it
    is the same), because re-encoding needs it and a reader may want it.  Timestamps are epoch
    milliseconds, -1 meaning "none" (magic 0 has no timestamps at all).
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
    sequence: int = NONE
    control_type: str | None = None
    own_timestamp: int | None = None


@dataclass(slots=True)
class Batch:
    """One entry of a records field, with its decode status.

    For magic 0/1, ``base_offset`` is the (wrapper) message's offset and ``max_timestamp`` its
    timestamp; the v2-only fields hold -1.  ``status`` is one of :data:`STATUSES` and ``error``
    says why when it is not ``ok``; whatever could still be decoded is in ``records`` (a CRC
    mismatch does not stop decoding).  ``extra_attributes`` keeps attribute bits this model does
    not name (the v2 delete-horizon bit 6, unused bits) so encoding writes them back.
    """

    base_offset: int
    magic: int
    compression: str | None = "none"
    timestamp_type: str = CREATE_TIME
    is_transactional: bool = False
    is_control: bool = False
    producer_id: int = NONE
    producer_epoch: int = NONE
    base_sequence: int = NONE
    partition_leader_epoch: int = NONE
    base_timestamp: int = NONE
    max_timestamp: int = NONE
    last_offset_delta: int = NONE
    extra_attributes: int = 0
    status: str = OK
    error: str | None = None
    records: list[Record] = field(default_factory=list)
    # Facts about this copy of the bytes, not about the data: left out of equality.
    crc: int | None = field(default=None, compare=False)
    crc_computed: int | None = field(default=None, compare=False)
    position: int = field(default=0, compare=False)
    size: int = field(default=0, compare=False)
    snappy_xerial: bool = field(default=True, compare=False)
    lz4_broken_hc: bool = field(default=False, compare=False)

    @property
    def crc_ok(self) -> bool | None:
        """True/False once both CRCs are known; None when the entry was too short to check."""
        if self.crc is None or self.crc_computed is None:
            return None
        return self.crc == self.crc_computed

    @property
    def codec_id(self) -> int:
        """The numeric codec of ``compression`` (-1 when unknown)."""
        return CODEC_IDS.get(self.compression or "", NONE)
