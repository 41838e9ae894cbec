"""Kafka record batches (v2) and message sets (magic 0 and 1): decode, encode, compression, CRC.

The data of ProduceRequest, FetchResponse and ShareFetchResponse ``records`` fields.  Entry points:

* :func:`decode_records` / :func:`iter_batches`: a records field's bytes -> :class:`Batch` list
  (formats may be mixed; bad bytes become a batch status, never an exception).
* :func:`encode_batch` / :func:`encode_records`, with :func:`make_batch`,
  :func:`make_message_set` and :func:`control_record` to build batches as producers do.
* :func:`iter_rows`, :data:`ROW_COLUMNS`, :func:`arrow_schema`, :func:`rows_to_arrow`: the flat
  OUT/records rows for the Spark job.

Facts behind the code: Kafka's record formats and codecs as the Apache Kafka documentation
("Message Format") and its Java client define them; where kwire reads more leniently or more
strictly, the code says so where it matters.
"""

from .compression import DEFAULT_MAX_DECOMPRESSED, compress, decompress
from .decode import backend, decode_records, iter_batches, set_backend
from .encode import (
    control_record,
    encode_batch,
    encode_records,
    make_batch,
    make_message_set,
)
from .errors import (
    CompressionError,
    DecompressedTooLarge,
    RecordsDecodeError,
    RecordsEncodeError,
    RecordsError,
    UnsupportedCodec,
)
from .model import (
    CODEC_NAMES,
    CONTROL_TYPES,
    CRC_MISMATCH,
    MALFORMED,
    OK,
    PARTIAL,
    STATUSES,
    TOO_LARGE,
    UNSUPPORTED_CODEC,
    Batch,
    Record,
)
from .rows import BATCH_COLUMNS, RECORD_COLUMNS, ROW_COLUMNS, arrow_schema, iter_rows, rows_to_arrow

__all__ = [
    "backend",
    "set_backend",
    "BATCH_COLUMNS",
    "CODEC_NAMES",
    "CONTROL_TYPES",
    "CRC_MISMATCH",
    "DEFAULT_MAX_DECOMPRESSED",
    "MALFORMED",
    "OK",
    "PARTIAL",
    "RECORD_COLUMNS",
    "ROW_COLUMNS",
    "STATUSES",
    "TOO_LARGE",
    "UNSUPPORTED_CODEC",
    "Batch",
    "CompressionError",
    "DecompressedTooLarge",
    "Record",
    "RecordsDecodeError",
    "RecordsEncodeError",
    "RecordsError",
    "UnsupportedCodec",
    "arrow_schema",
    "compress",
    "control_record",
    "decode_records",
    "decompress",
    "encode_batch",
    "encode_records",
    "iter_batches",
    "iter_rows",
    "make_batch",
    "make_message_set",
    "rows_to_arrow",
]
