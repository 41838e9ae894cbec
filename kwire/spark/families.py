"""The columns of a message family: the model's columns plus the consumer-protocol payloads.

This is where the two halves meet (model.py knows nothing of payloads, consumer.py builds on
model.py), so neither imports the other in a circle.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import StructType

from kwire.spark.consumer import payload_columns
from kwire.spark.model import Selection, StructColumns


def message_columns(cls: Any, select: Selection = None, path: str = "") -> StructColumns:
    """The columns of a message class covering all its versions."""
    valid: range = cls.VALID_VERSIONS
    flexible = any(v in cls.FLEXIBLE_VERSIONS for v in valid)
    return StructColumns(cls, valid, flexible, select, path or cls.__name__, payload_columns)


def message_type(cls: Any, select: Selection = None) -> StructType:
    """The Spark StructType of a generated message class, across all its versions."""
    return message_columns(cls, select).spark_type
