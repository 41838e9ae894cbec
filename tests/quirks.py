"""Answers librdkafka's mock broker really sends out of spec, pinned by exact error.

(api key, version, error class, message). tests/capture/test_capture_decode.py explains each;
the job test expects exactly these among the decoded responses of the real captures.
"""

from __future__ import annotations

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
        for n in (62, 198, 199)
    ),
}
