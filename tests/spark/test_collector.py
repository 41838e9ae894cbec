"""kwire.spark.collector: the executors' passes run with a slower cycle collector and leave it as
they found it."""

from __future__ import annotations

import gc

import pytest

from kwire.spark.collector import THRESHOLDS, few_collections


def test_the_collector_is_slowed_inside_and_restored_after():
    before = gc.get_threshold()
    with few_collections():
        assert gc.get_threshold() == THRESHOLDS
    assert gc.get_threshold() == before


def test_restored_when_the_pass_fails():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError):
        with few_collections():
            raise RuntimeError("a failed batch")
    assert gc.get_threshold() == before


def test_cycles_made_inside_are_still_freed():
    class Node:
        pass

    gc.collect()
    with few_collections():
        for _ in range(3 * THRESHOLDS[0]):
            a, b = Node(), Node()
            a.other, b.other = b, a  # a cycle that only the collector can free
        alive = sum(isinstance(o, Node) for o in gc.get_objects())
    # Three thresholds' worth of cycles made: the collector ran inside and freed most of them.
    assert alive < 2 * THRESHOLDS[0]


def test_records_are_exploded_at_the_pace_and_the_collector_restored_after():
    """OUT/records' explosion (records_table's tasks, and those writing their own files) reads
    its frames at the slower pace, and leaves the collector as it found it once they are done."""
    from kwire.spark import explode

    seen = []

    def batches():
        seen.append(gc.get_threshold())  # as the explosion asks for its first frames
        return
        yield

    before = gc.get_threshold()
    assert before != THRESHOLDS
    assert list(explode._explode(batches())) == []
    assert seen == [THRESHOLDS]
    assert gc.get_threshold() == before
