"""kwire's Spark UDF pack: decode captured Kafka frames into typed columns, in Arrow batches.

    from kwire.spark import decode_requests, decode_responses, register
    decoded = decode_requests(frames.where("direction = 'request'"))
    register(spark)  # SQL: kafka_decode_request(frame), kafka_decode_response(frame, key, version)
    packets = spark.read.format("pcap").load("capture.pcap")   # the pcap source, by byte ranges
    frames = capture_frames(spark, ["ring/"], [9093], keylog=KeyLog.load(["keys.log"])).frames

Types and decoders are derived from the generated codecs' model (`generated`), never per message.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kwire.spark.api import (
        decode_requests,
        decode_responses,
        register,
        request_type,
        request_udf,
        response_type,
        response_udf,
    )
    from kwire.spark.families import message_type
    from kwire.spark.model import FAMILIES
    from kwire.spark.spark_capture import capture_frames

# Where each public name lives. Imported on first use (PEP 562): the codecs' package takes about
# a second to import, and the processes that only capture (the pcap source's planner, its
# reading tasks, the connection trackers) never need it.
_HOME = {
    "FAMILIES": "kwire.spark.model",
    "capture_frames": "kwire.spark.spark_capture",
    "decode_requests": "kwire.spark.api",
    "decode_responses": "kwire.spark.api",
    "message_type": "kwire.spark.families",
    "register": "kwire.spark.api",
    "request_type": "kwire.spark.api",
    "request_udf": "kwire.spark.api",
    "response_type": "kwire.spark.api",
    "response_udf": "kwire.spark.api",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'kwire.spark' has no attribute {name!r}")
    return getattr(import_module(home), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
