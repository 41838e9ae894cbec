"""kwire's Spark UDF pack: decode captured Kafka frames into typed columns, in Arrow batches.

    from kwire.spark import decode_requests, decode_responses, register
    decoded = decode_requests(frames.where("direction = 'request'"))
    register(spark)  # SQL: kafka_decode_request(frame), kafka_decode_response(frame, key, version)
    packets = spark.read.format("pcap").load("capture.pcap")   # the pcap source, by byte ranges
    frames = capture_frames(spark, ["ring/"], [9093], keylog=KeyLog.load(["keys.log"])).frames

Types and decoders are derived from the generated codecs' model (`generated`), never per message.
"""

from __future__ import annotations

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
from kwire.spark.spark_capture import capture_frames
from kwire.spark.model import FAMILIES

__all__ = [
    "FAMILIES",
    "capture_frames",
    "decode_requests",
    "decode_responses",
    "message_type",
    "register",
    "request_type",
    "request_udf",
    "response_type",
    "response_udf",
]
