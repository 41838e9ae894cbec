"""Answers librdkafka's mock broker really sends out of spec, pinned by exact error.

(api key, version, error class, message). tests/capture/test_capture_decode.py explains each;
the job test expects exactly these among the decoded responses of the real captures.
"""

from __future__ import annotations

import re

MOCK_QUIRKS = {
    (
        18,
        3,
        "TrailingBytesError",
        "ApiVersionsResponse v3: at byte 12: 5 bytes left after a complete message",
    ),
    (
        14,
        3,
        "NullValueError",
        "SyncGroupResponse v3: Assignment at byte 10: null bytes (length -1) in a field that "
        "is not nullable here",
    ),
    *(
        (
            3,
            13,
            "TrailingBytesError",
            f"MetadataResponse v13: at byte {n}: 1 bytes left after a complete message",
        )
        # The byte is where v13 ends, so it moves with the number and names of the topics.
        for n in (62, 115, 198, 199, 200, 201, 202, 477)
    ),
    *(
        (
            76,
            1,
            "TrailingBytesError",
            f"ShareGroupHeartbeatResponse v1: at byte {n}: 1 bytes left after a complete message",
        )
        # Every ShareGroupHeartbeat v1 answer of the mock ends with one 0x00 more; where the
        # message ends depends on its member id, error message and assignment.
        for n in (23, 47, 69, 82)
    ),
    (
        9,
        6,
        "NullValueError",
        "OffsetFetchResponse v6: Topics at byte 9: null array in a field that is not nullable "
        "here",
    ),
}

# Of those, Kafka's own Java readers accept the bytes after a complete body (nothing checks for
# them), so kwire's tolerant reading (the default of the Spark job) decodes those with status ok
# and a warning; the nulls Kafka refuses too ("non-nullable field ... was serialized as null").
_TRAILING = re.compile(r"at byte (\d+): (\d+) bytes left after a complete message$")


def kafka_reads(error_class: str) -> bool:
    """Whether a pinned quirk is one Kafka's Java readers read."""
    return error_class == "TrailingBytesError"


def tolerant_warning(message: str) -> str:
    """The warning tolerant reading gives for a pinned trailing-bytes quirk (its strict error)."""
    found = _TRAILING.search(message)
    assert found, message
    at, n = int(found[1]), int(found[2])
    return f"{n} byte{'' if n == 1 else 's'} after the message (from byte {at}) ignored, as Kafka's reader does"


# The mock writes the transaction markers it appends on EndTxn (control batches, one COMMIT or
# ABORT record) with a CRC field of zero instead of the CRC-32C of the batch; librdkafka does
# not check CRCs unless check.crcs=true, so its consumers never notice. kwire reports such a
# batch as crc_mismatch (records decoded anyway); this is the exact error of those batches.
MOCK_CONTROL_BATCH_CRC = "crc mismatch at byte 17: stored 0x00000000, CRC-32C of bytes 21.."


def is_mock_control_batch_crc(row: dict[str, object]) -> bool:
    """An OUT/records row of a mock transaction marker with its zero CRC (see above)."""
    error = row.get("batch_error")
    return (
        row.get("is_control") is True
        and row.get("batch_status") == "crc_mismatch"
        and isinstance(error, str)
        and error.startswith(MOCK_CONTROL_BATCH_CRC)
        and row.get("control_type") in ("commit", "abort")
    )
