"""Captured Kafka traffic (pcap/pcapng) to a frames table: one row per Kafka frame.

TCP streams are reassembled per connection and direction, cut into frames by their length
prefix, and requests are paired with responses; see `read_frames` and the `SCHEMA` contract.
"""

from .engine import E_BAD_HEADER, E_NO_RESPONSE, E_UNPAIRED
from .framing import (
    E_BAD_LENGTH,
    E_CAPTURE_END,
    E_CLOSED,
    E_IDLE,
    E_MIDSTREAM,
    E_MISSING,
    E_SNAPLEN,
)
from .kafka import RequestHeader, api_name, parse_request_header
from .pcapfile import CaptureFileError
from .reader import DEFAULT_BROKER_PORTS, expand_paths, frames_table, read_frames, write_parquet
from .summary import Summary
from .table import SCHEMA

ERROR_REASONS = (
    E_MIDSTREAM,
    E_MISSING,
    E_SNAPLEN,
    E_BAD_LENGTH,
    E_CAPTURE_END,
    E_CLOSED,
    E_IDLE,
    E_BAD_HEADER,
    E_UNPAIRED,
    E_NO_RESPONSE,
)

__all__ = [
    "CaptureFileError",
    "DEFAULT_BROKER_PORTS",
    "ERROR_REASONS",
    "RequestHeader",
    "SCHEMA",
    "Summary",
    "api_name",
    "expand_paths",
    "frames_table",
    "parse_request_header",
    "read_frames",
    "write_parquet",
]
