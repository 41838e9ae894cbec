"""Python's cycle collector, run less often in the executors' passes that make a Python object per
record (OUT/records' explode, a share group's attempts).

CPython collects its youngest generation every 700 new container objects (tuples, lists, dicts)
and the older ones every 10 of those; a pass that keeps hundreds of thousands of them alive until
its batch is written has the collector walk them again and again for nothing. Measured on the
churny scale ring's frames: exploding 6,000 Produce and Fetch frames (384k records) took 3.1-3.6 s
with the default thresholds, 1.3-1.4 s with these (the same as with the collector off); sg-work's
pass of 760k attempts 22 s against 13 s. The collector still runs, so a cycle made by mistake is
still freed.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLDS = (100_000, 50, 50)


@contextmanager
def few_collections() -> Iterator[None]:
    """The cycle collector at THRESHOLDS while the block runs, as it was after."""
    was = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*was)
