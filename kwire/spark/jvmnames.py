"""The driver's Java classes and static methods, looked up over py4j once per Python process.

Every PySpark call that builds a query goes through py4j: `F.col("x")` asks the JVM for the class
`org.apache.spark.sql.functions`, then for its member `col`, then calls it; a column list asks for
the class `PythonUtils` by its short name, which the JVM first looks for in the unnamed package,
a search of every jar on the driver's class path that fails, before trying the imports. py4j
keeps none of these answers, so a job that builds a hundred queries asks thousands of times. On a
313 kB capture (tests/data/capture/mock_gt_progress.pcap) a job asked about 5,000 times for a
class, each 0.3-1.6 ms of a round trip and of the JVM's search, on the driver's cores that the
tasks need too: with the answers kept, the job on a warm session took 15.9-17.4 s against
17.1-18.2 s (2 rounds of 4 runs, interleaved; benchmarks/results/history.md).

What is kept cannot change while the JVM runs: which class a name is (a class loaded is never
unloaded while the loader lives) and that a static member is a method or a nested class. Static
fields are values, and are asked for every time; a name that is not found is not kept, so a class
from a jar added later is still found.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JVMView
from pyspark import SparkContext
from pyspark.sql import SparkSession


def _kept(
    kept: dict[str, Any], look_up: Callable[[str], Any], name: str, gateway_client: Any
) -> Any:
    """`name` from `kept`, or looked up and kept when it is a class (kept as a _Class, whose
    members are kept in turn) or a method; anything else (a package, a field's value) is
    returned as found, to be looked up again next time."""
    try:
        return kept[name]
    except KeyError:
        pass
    found = look_up(name)
    if isinstance(found, JavaClass):
        found = _Class(found._fqn, gateway_client)
    if isinstance(found, (JavaClass, JavaMember)):
        kept[name] = found
    return found


class _Keeping:
    """What kept names are looked up in (`_kept`), and how: py4j's own lookup of the class
    given as `_base`, for names that are not private attributes."""

    _base: Any
    _kept: dict[str, Any]
    _gateway_client: Any

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            return self._base.__getattr__(self, name)
        look_up = partial(self._base.__getattr__, self)
        return _kept(self._kept, look_up, name, self._gateway_client)


class _Class(_Keeping, JavaClass):
    """A Java class whose static methods and nested classes are looked up once."""

    _base = JavaClass

    def __init__(self, fqn: str, gateway_client: Any) -> None:
        super().__init__(fqn, gateway_client)
        self._kept = {}


class KeptView(_Keeping, JVMView):
    """py4j's view of the JVM (the same view, by its id) with the classes it found kept."""

    _base = JVMView

    def __init__(self, view: JVMView) -> None:
        super().__init__(view._gateway_client, view._jvm_name, id=view._id)
        self._kept = {}


def keep_jvm_names(spark: SparkSession) -> None:
    """Has this process's PySpark look up each Java class and static method once (see the
    module's docstring); again for the same JVM does nothing."""
    view = SparkContext._jvm
    if view is None or isinstance(view, KeptView):
        return
    kept = KeptView(view)
    SparkContext._jvm = kept
    # A session keeps its own reference, taken from its context when it was made.
    if getattr(spark, "_jvm", None) is view:
        spark._jvm = kept
