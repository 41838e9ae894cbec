"""The driver JVM's class archive (kwire/spark/classes.py): when a session makes one, uses one or
leaves it alone; that a damaged archive is never put in place (a JVM given a truncated one
crashes); and, with Spark, that a second run maps the classes the first one kept."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kwire.spark import classes

ROOT = Path(__file__).resolve().parents[2]
JAVA = classes._java()


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache dir, and a JDK and Spark jars made of small files: the plan's inputs."""
    for name in (classes.ENV_SWITCH, "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(classes.ENV_CACHE, str(tmp_path / "cache"))
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    (jdk / "lib" / "server").mkdir(parents=True)
    (jdk / "bin" / "java").write_text("java")
    (jdk / "lib" / "server" / "classes.jsa").write_text("base")
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_text("core")
    monkeypatch.setattr(classes, "_java", lambda: jdk / "bin" / "java")
    monkeypatch.setattr(classes, "_spark_jars", lambda: jars)
    return tmp_path


def test_a_first_run_writes_the_archive_and_later_runs_map_it(fake: Path) -> None:
    first = classes.plan({})
    assert first.making is not None and first.archive is not None
    assert first.making.parent == first.archive.parent == fake / "cache" / "jvm"
    assert f"-XX:ArchiveClassesAtExit={first.making}" in first.options
    assert classes.QUIET in first.options
    first.archive.write_bytes(b"an archive")
    later = classes.plan({})
    assert later.making is None
    assert later.options == f"-XX:SharedArchiveFile={first.archive} {classes.QUIET}"


def test_the_archive_is_per_jdk_spark_jars_and_classpath(fake: Path) -> None:
    archive = classes.plan({}).archive
    assert archive is not None
    # A jar that changes (Spark upgraded in place) or a classpath setting makes another archive.
    (fake / "jars" / "spark-core.jar").write_text("core 2")
    assert classes.plan({}).archive != archive
    assert classes.plan({"spark.jars": "extra.jar"}).archive not in (None, archive)


@pytest.mark.parametrize(
    "env, settings",
    [
        ({classes.ENV_SWITCH: "off"}, {}),
        ({"PYSPARK_GATEWAY_PORT": "4040"}, {}),
        ({}, {"spark.driver.extraJavaOptions": "-Xmx2g -Xshare:off"}),
        ({}, {"spark.driver.extraJavaOptions": "-XX:SharedArchiveFile=/mine.jsa"}),
    ],
    ids=["switched off", "driver started by spark-submit", "user's -Xshare", "user's archive"],
)
def test_no_archive_options_when_off_or_the_user_manages_sharing(
    fake: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], settings: dict[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert classes.plan(settings) == classes.Plan()


def test_no_archive_in_a_cache_whose_path_has_spaces(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # spark.driver.extraJavaOptions is one string, split at spaces.
    monkeypatch.setenv(classes.ENV_CACHE, str(fake / "my cache"))
    assert classes.plan({}) == classes.Plan()


def test_no_archive_without_the_jdks_base_archive(fake: Path) -> None:
    # A JVM asked to write a dynamic archive without its base refuses to start.
    (fake / "jdk" / "lib" / "server" / "classes.jsa").unlink()
    assert classes.plan({}) == classes.Plan()


def test_an_archive_that_failed_its_check_is_not_tried_again(fake: Path) -> None:
    archive = classes.plan({}).archive
    assert archive is not None
    archive.with_suffix(".failed").write_text("written but not mapped")
    assert classes.plan({}) == classes.Plan()


def test_half_written_archives_of_killed_runs_are_removed_once_stale(fake: Path) -> None:
    where = fake / "cache" / "jvm"
    where.mkdir(parents=True)
    stale, fresh = where / "spark-x.1.tmp", where / "spark-x.2.tmp"
    for tmp in (stale, fresh):
        tmp.write_bytes(b"half")
    old = time.time() - classes.STALE_SECONDS - 60
    os.utime(stale, (old, old))
    classes.plan({})
    assert not stale.exists() and fresh.exists()


def test_the_three_most_recently_used_archives_are_kept(tmp_path: Path) -> None:
    for i in range(5):
        path = tmp_path / f"spark-{i}.jsa"
        path.write_bytes(b"a")
        os.utime(path, (1000 + i, 1000 + i))
    classes.prune(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.jsa")) == [
        "spark-2.jsa",
        "spark-3.jsa",
        "spark-4.jsa",
    ]


needs_java = pytest.mark.skipif(
    JAVA is None or classes._base_archive(JAVA) is None,
    reason="needs a JDK with its base class archive (lib/server/classes.jsa)",
)


@needs_java
def test_the_check_passes_a_whole_archive_and_refuses_damaged_ones(tmp_path: Path) -> None:
    assert JAVA is not None
    cp = str(tmp_path)
    whole = tmp_path / "whole.jsa"
    subprocess.run(
        [str(JAVA), f"-XX:ArchiveClassesAtExit={whole}", "-cp", cp, "-version"],
        check=True,
        capture_output=True,
    )
    assert whole.stat().st_size > 10_000
    assert classes.check(JAVA, whole, cp)
    # Truncated: a JVM mapping it would crash; the check's JVM crashes instead, leaving no
    # crash report behind.
    truncated = tmp_path / "truncated.jsa"
    truncated.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    flipped = tmp_path / "flipped.jsa"
    data = bytearray(whole.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    garbage = tmp_path / "garbage.jsa"
    garbage.write_bytes(b"not an archive" * 100)
    for bad in (truncated, flipped, garbage):
        assert not classes.check(JAVA, bad, cp), bad.name
    assert not list(Path.cwd().glob("hs_err*")) and not list(tmp_path.glob("hs_err*"))


SESSION = textwrap.dedent("""
    import sys
    from kwire.spark.session import build_session
    spark = build_session("local[1]", "kwire-classes-test", conf=[
        ("spark.driver.extraJavaOptions", sys.argv[1])], tell=print)
    assert spark.range(100).selectExpr("sum(id)").first()[0] == 4950
    """)


def _kept_for_the_suite() -> Path | None:
    """The archive `make test` kept for the suite (scripts/jvm_classes.py: a `kwire decode` in a
    fresh JVM, whose output is in DIR/job.log), when that job said it kept it."""
    suite = os.environ.get("KWIRE_TEST_JVM_CLASSES")
    log = Path(suite, "job.log") if suite else None
    if log is None or not log.is_file():
        return None
    said = re.search(r"kept the JVM's classes: (\S+\.jsa) \(", log.read_text())
    return Path(said.group(1)) if said and Path(said.group(1)).is_file() else None


@pytest.mark.long(10)
@needs_java
def test_a_second_session_maps_the_classes_the_first_one_kept(tmp_path: Path) -> None:
    """The first session keeps its JVM's classes as it ends, the second maps them. Under `make
    test` the first is the `kwire decode` that kept the suite's archive (a JVM's dump costs about
    half a minute); run by hand, the test starts both."""
    cmd = [sys.executable, "-c", SESSION]
    suite = _kept_for_the_suite()
    if suite is not None:
        where = suite.parent
        env = {**os.environ, classes.ENV_CACHE: str(where.parent), classes.ENV_SWITCH: "on"}
    else:
        env = {**os.environ, classes.ENV_CACHE: str(tmp_path / "cache"), classes.ENV_SWITCH: "on"}
        first = subprocess.run(
            [*cmd, "-Dkwire.test=1"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        assert first.returncode == 0, first.stderr[-3000:]
        where = tmp_path / "cache" / "jvm"
        kept = list(where.glob("*.jsa"))
        assert len(kept) == 1 and not list(where.glob("*.tmp")), list(where.iterdir())
        assert f"kept the JVM's classes: {kept[0]}" in first.stdout
    # Which archive each class came from, as the JVM logs it: the second run maps Spark's own
    # classes from the one the first kept (the JDK's own archive holds only the JDK's).
    log = tmp_path / "classes.log"
    second = subprocess.run(
        [*cmd, f"-Xlog:class+load=info:file={log}"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert "kept" not in second.stdout
    shared = [
        line
        for line in log.read_text().splitlines()
        if "org.apache.spark." in line and "shared objects file (top)" in line
    ]
    assert len(shared) > 1000, len(shared)
    assert "[warning][cds" not in second.stderr
    if suite is None:
        shutil.rmtree(where)
