"""Shared strategies and helpers for the records tests.

``VARIANTS`` is the format x codec grid: every (magic, codec, snappy framing, lz4 checksum)
combination Kafka producers write.  Record strategies produce what a producer is *given*
(offsets, timestamps, keys, values, headers); expectations are derived from those inputs, never
from kwire's own decoder.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from kwire import records as R


@dataclass(frozen=True)
class Variant:
    magic: int
    compression: str
    snappy_xerial: bool = True
    lz4_broken_hc: bool = False

    @property
    def name(self) -> str:
        extra = ""
        if self.compression == "snappy":
            extra = "-xerial" if self.snappy_xerial else "-raw"
        if self.compression == "lz4" and self.lz4_broken_hc:
            extra = "-broken-hc"
        return f"v{self.magic}-{self.compression}{extra}"


CODEC_VARIANTS = [
    ("none", True, False),
    ("gzip", True, False),
    ("snappy", False, False),
    ("snappy", True, False),
    ("lz4", True, False),
    ("lz4", True, True),
    ("zstd", True, False),
]

# What decodes: zstd exists only for magic 2; the KAFKA-3160 checksum is accepted for magic 0
# only (Kafka checks the LZ4 header checksum for magic 1 and 2).
VARIANTS = [
    Variant(m, c, x, h)
    for m in (0, 1, 2)
    for c, x, h in CODEC_VARIANTS
    if not (c == "zstd" and m < 2) and not (h and m != 0)
]

small_bytes = st.binary(max_size=40)
nullable_bytes = st.none() | small_bytes
header_keys = st.text(max_size=8)
headers = st.lists(st.tuples(header_keys, nullable_bytes), max_size=3)


@st.composite
def record_inputs(draw: st.DrawFn, *, with_headers: bool, min_size: int = 0) -> list[R.Record]:
    """Records as given to a producer: increasing offsets (gaps allowed), any timestamps."""
    n = draw(st.integers(min_size, 8))
    offset = draw(st.integers(0, 2**40))
    base_ts = draw(st.integers(0, 2**42))
    out = []
    for _ in range(n):
        out.append(
            R.Record(
                offset,
                base_ts + draw(st.integers(-(10**6), 10**6)),
                draw(nullable_bytes),
                draw(nullable_bytes),
                draw(headers) if with_headers else [],
            )
        )
        offset += draw(st.sampled_from([1, 1, 1, 2, 17]))
    return out


@st.composite
def batches(draw: st.DrawFn, variant: Variant) -> list[R.Batch]:
    """One v2 batch, or the message set entries of a legacy variant, built as producers do."""
    if variant.magic == 2:
        recs = draw(record_inputs(with_headers=True))
        log_append = draw(st.booleans())
        idempotent = draw(st.booleans())
        return [
            R.make_batch(
                recs,
                base_offset=recs[0].offset if recs else draw(st.integers(0, 2**40)),
                compression=variant.compression,
                timestamp_type="log_append" if log_append else "create",
                max_timestamp=draw(st.integers(0, 2**42)) if log_append else None,
                is_transactional=idempotent and draw(st.booleans()),
                producer_id=draw(st.integers(0, 2**50)) if idempotent else -1,
                producer_epoch=draw(st.integers(0, 2**15 - 1)) if idempotent else -1,
                base_sequence=draw(st.integers(0, 2**31 - 1)) if idempotent else -1,
                partition_leader_epoch=draw(st.integers(-1, 2**31 - 1)),
                snappy_xerial=variant.snappy_xerial,
                lz4_broken_hc=variant.lz4_broken_hc,
            )
        ]
    compressed = variant.compression != "none"
    recs = draw(record_inputs(with_headers=False, min_size=1 if compressed else 0))
    log_append = variant.magic == 1 and draw(st.booleans())
    wrapper_offset = None
    if compressed and variant.magic == 1 and draw(st.booleans()):
        # kafka-python/librdkafka produce requests: wrapper offset 0, inner offsets as written.
        recs = [
            R.Record(i, r.timestamp, r.key, r.value) for i, r in enumerate(recs)
        ]  # contiguous from 0, as those producers write them
        wrapper_offset = 0
    return R.make_message_set(
        recs,
        magic=variant.magic,
        compression=variant.compression,
        timestamp_type="log_append" if log_append else "create",
        wrapper_offset=wrapper_offset,
        wrapper_timestamp=draw(st.integers(0, 2**42)) if log_append else None,
        snappy_xerial=variant.snappy_xerial,
        lz4_broken_hc=variant.lz4_broken_hc,
    )


def v2_record_bytes(
    offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None
) -> bytes:
    """One v2 record written out by hand (no headers), for fault tests."""

    def varint(v: int) -> bytes:
        z = (v << 1) ^ (v >> 63)
        out = bytearray()
        while z >= 0x80:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        out.append(z)
        return bytes(out)

    body = b"\x00" + varint(ts_delta) + varint(offset_delta)
    for part in (key, value):
        body += varint(-1) if part is None else varint(len(part)) + part
    body += varint(0)
    return varint(len(body)) + body
