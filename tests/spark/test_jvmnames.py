"""kwire.spark.jvmnames: each Java class and static method is asked of the JVM once; values, and
names not found, every time. Counted at py4j's socket (every command the Python side sends)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from py4j.java_gateway import JavaPackage
from pyspark import SparkContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kwire.spark.jvmnames import KeptView, keep_jvm_names


@pytest.fixture
def sent(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """py4j's commands as they are sent, counted by their first two lines (command and
    subcommand: "r/u", a name looked up, "r/m", a class's member) and by their first three (the
    name: "r/u/PythonUtils")."""
    keep_jvm_names(spark)
    client = SparkContext._jvm._gateway_client
    counts: Counter[str] = Counter()
    send = client.send_command

    def counting(command: str, *args: Any, **kw: Any) -> Any:
        lines = command.split("\n")
        counts["/".join(lines[:2])] += 1
        counts["/".join(lines[:3])] += 1
        return send(command, *args, **kw)

    monkeypatch.setattr(client, "send_command", counting)
    yield counts


def test_the_view_is_kept_once(spark: SparkSession) -> None:
    keep_jvm_names(spark)
    view = SparkContext._jvm
    assert isinstance(view, KeptView)
    assert spark._jvm is view  # type: ignore[attr-defined]
    keep_jvm_names(spark)
    assert SparkContext._jvm is view


def test_a_class_and_its_methods_are_asked_for_once(sent: Counter[str]) -> None:
    # A view of its own, with nothing kept yet: the process's view has kept what the tests run
    # before this one in the same process asked for.
    jvm = KeptView(SparkContext._jvm)
    first = jvm.PythonUtils.toSeq
    asked = dict(sent)
    assert asked.get("r/u/PythonUtils") == 1  # the class, by its short name
    assert asked.get("r/m") == 1  # its member
    again = jvm.PythonUtils.toSeq
    assert again is first and dict(sent) == asked  # nothing more was sent
    # And it still works: a Scala Seq of what it was given.
    assert again(["a", "b"]).length() == 2


def test_static_fields_and_missing_names_are_asked_for_every_time(sent: Counter[str]) -> None:
    jvm = KeptView(SparkContext._jvm)
    integer = getattr(jvm, "java.lang.Integer")
    assert integer.MAX_VALUE == 2**31 - 1
    members = sent["r/m"]
    assert integer.MAX_VALUE == 2**31 - 1
    assert sent["r/m"] == members + 1
    # A name that is no class (yet) is a package to py4j, asked for again each time.
    for _ in range(2):
        assert isinstance(getattr(jvm, "KwireNoSuchClass"), JavaPackage)
    assert sent["r/u/KwireNoSuchClass"] == 2


def test_queries_built_through_the_kept_view_answer_as_before(
    spark: SparkSession, sent: Counter[str]
) -> None:
    df = spark.range(5).select((F.col("id") * 2).alias("x"), F.lit("k").alias("k"))
    assert [tuple(r) for r in df.collect()] == [(2 * i, "k") for i in range(5)]
    before = sent["r/u/org.apache.spark.sql.functions"] + sent["r/u/functions"]
    df = spark.range(5).select((F.col("id") * 2).alias("x"), F.lit("k").alias("k"))
    assert [tuple(r) for r in df.collect()] == [(2 * i, "k") for i in range(5)]
    # The second build asked for no class it had asked for before.
    assert sent["r/u/org.apache.spark.sql.functions"] + sent["r/u/functions"] == before
