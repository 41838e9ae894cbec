"""Version ranges of the schema dialect ("none", "N", "A-B", "A+"), as small value objects."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

MAX_VERSION = 32767  # Kafka keeps versions in a Java short
_RANGE = re.compile(r"^(\d+)(?:(\+)|-(\d+))?$")


class VersionSyntaxError(ValueError):
    """A version range that does not parse."""


@dataclass(frozen=True, order=True)
class Versions:
    """An inclusive range of versions; empty when low > high."""

    low: int
    high: int

    @staticmethod
    def parse(text: str) -> "Versions":
        text = text.strip()
        if text == "none":
            return NONE
        m = _RANGE.match(text)
        if not m:
            raise VersionSyntaxError(f"{text!r} is not a version range (none, N, A-B or A+)")
        low = int(m.group(1))
        if m.group(2):
            high = MAX_VERSION
        elif m.group(3) is not None:
            high = int(m.group(3))
        else:
            high = low
        if low > MAX_VERSION or high > MAX_VERSION:
            raise VersionSyntaxError(f"{text!r} exceeds the highest version {MAX_VERSION}")
        if high < low:
            return NONE  # Kafka parses "3-1" to the empty range
        return Versions(low, high)

    @property
    def empty(self) -> bool:
        return self.low > self.high

    @property
    def open_ended(self) -> bool:
        return not self.empty and self.high == MAX_VERSION

    def __contains__(self, v: object) -> bool:
        if isinstance(v, Versions):
            return v.empty or (self.low <= v.low and v.high <= self.high)
        return isinstance(v, int) and self.low <= v <= self.high

    def __and__(self, other: "Versions") -> "Versions":
        low, high = max(self.low, other.low), min(self.high, other.high)
        return Versions(low, high) if low <= high else NONE

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.low, self.high + 1))

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high == MAX_VERSION:
            return f"{self.low}+"
        if self.low == self.high:
            return str(self.low)
        return f"{self.low}-{self.high}"


NONE = Versions(0, -1)
ALL = Versions(0, MAX_VERSION)
