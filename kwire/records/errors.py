"""The records package's exception family.

Everything the public API raises derives from :class:`RecordsError`, so a caller (the Spark job)
can catch one type.  Decoding never raises for bad *bytes*: those become a batch status.  These
exceptions carry the byte offset (relative to the start of the records field) and what was being
read, because "malformed" without a place is useless when reading a capture.
"""

from __future__ import annotations


class RecordsError(Exception):
    """Root of every error raised by :mod:`records`."""


class RecordsDecodeError(RecordsError):
    """Bytes that do not follow the format: ``offset`` is where, ``what`` is the field."""

    def __init__(self, offset: int, what: str, detail: str = "") -> None:
        self.offset = offset
        self.what = what
        self.detail = detail
        text = f"at byte {offset}: {what}"
        super().__init__(f"{text}: {detail}" if detail else text)


class RecordsEncodeError(RecordsError):
    """A batch or record value that cannot be written in the requested format."""


class CompressionError(RecordsError):
    """A compressed payload that cannot be decompressed (corrupt, truncated, wrong framing)."""


class DecompressedTooLarge(CompressionError):
    """The payload inflates beyond the caller's cap; raised before the output is allocated."""


class UnsupportedCodec(CompressionError):
    """A codec id that the format does not define (5-7, or zstd in a magic 0/1 message)."""
