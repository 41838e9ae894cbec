"""The driver JVM's classes, kept between runs (class data sharing) so that Spark starts faster.

A Spark driver spends seconds of its start, and of each new kind of query, loading and verifying
the classes of Spark's jars: on 2 cores, starting local Spark and writing a 10-row table took 12.0 s
with the JDK's defaults and 6.9 s with those classes mapped from an archive; kwire's job on a
313 kB capture went from 38.6 to 33.0 s (benchmarks/results/history.md). The JVM can write the classes a run
loaded to such an archive when it exits (`-XX:ArchiveClassesAtExit`, JDK 13 and later) and map
them on later starts (`-XX:SharedArchiveFile`); a JVM that finds the archive unusable (another
classpath, another JDK) starts without it.

kwire's sessions (build_session) do this for the driver: the first run of a Spark installation
and JDK writes the archive as it ends (about 15 s more on 2 cores), the runs after it use it.
The archive (about 200 MB) lives in KWIRE_CACHE_DIR, else $XDG_CACHE_HOME/kwire, else
~/.cache/kwire, under jvm/, named by a digest of the JDK and Spark's jars, the three most
recently used kept.
KWIRE_JVM_CLASSES=off turns it off, as does any class-sharing option of the user's own in
spark.driver.extraJavaOptions. Executors on a cluster start as their workers start them.

A JVM given a truncated archive crashes rather than starting without it, so an archive is only
put in place once its JVM has exited cleanly and a second JVM has mapped it with every region's
checksum verified.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ENV_SWITCH = "KWIRE_JVM_CLASSES"
ENV_CACHE = "KWIRE_CACHE_DIR"
KEEP = 3
# Messages about the archive (unusable, not written) are not the user's concern: the JVM starts
# without it either way, and the check before it is put in place catches a bad one.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
# Options by which the user manages class sharing (or turns it off) themselves.
USER_OPTIONS = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit", "SharedClassListFile")
# Settings that change the driver's classpath, and so which archive fits it.
CLASSPATH_SETTINGS = ("spark.driver.extraClassPath", "spark.jars", "spark.jars.packages")
STALE_SECONDS = 3600


def cache_dir() -> Path:
    base = os.environ.get(ENV_CACHE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "kwire",
    )
    return Path(base) / "jvm"


def _java() -> Path | None:
    """The java that spark-submit runs (JAVA_HOME's, else the one on PATH), resolved."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not found or not os.path.exists(found):
        return None
    return Path(found).resolve()


def _base_archive(java: Path) -> Path | None:
    """The JDK's own archive, which a dynamic one extends (without it, a JVM asked to write one
    refuses to start)."""
    server = java.parent.parent / "lib" / "server"
    for name in ("classes.jsa", "classes_nocoops.jsa"):
        if (server / name).is_file():
            return server / name
    return None


def _spark_jars() -> Path | None:
    try:
        from pyspark.find_spark_home import _find_spark_home

        jars = Path(_find_spark_home()) / "jars"
    except Exception:
        return None
    return jars if jars.is_dir() else None


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def key(java: Path, base: Path, jars: Path, settings: dict[str, str]) -> str:
    """A digest of what decides whether an archive fits a driver: the JDK, Spark's jars (the
    JVM checks their sizes and times), and the settings that add to the classpath."""
    h = hashlib.sha256()
    for part in (_stamp(java), _stamp(base), str(jars.resolve())):
        h.update(part.encode() + b"\0")
    for jar in sorted(jars.iterdir()):
        h.update(_stamp(jar).encode() + b"\0")
    for name in CLASSPATH_SETTINGS:
        h.update(f"{name}={settings.get(name, '')}".encode() + b"\0")
    return h.hexdigest()[:20]


@dataclass
class Plan:
    """What a session does with the archive: `options` for the driver's JVM; `making` the file
    its JVM writes at exit (None when it uses one, or the archive is off)."""

    options: str = ""
    archive: Path | None = None
    making: Path | None = None
    java: Path | None = None


def plan(settings: dict[str, str]) -> Plan:
    """The archive's options for a driver started with `settings` (kwire's and the user's)."""
    if os.environ.get(ENV_SWITCH, "").lower() in ("0", "off", "false", "no"):
        return Plan()
    # A driver started by spark-submit has its JVM running already (its gateway named here).
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return Plan()
    given = settings.get("spark.driver.extraJavaOptions", "")
    if any(option in given for option in USER_OPTIONS):
        return Plan()
    java = _java()
    base = _base_archive(java) if java else None
    jars = _spark_jars()
    if java is None or base is None or jars is None:
        return Plan()
    try:
        where = cache_dir()
        where.mkdir(parents=True, exist_ok=True)
        name = f"spark-{key(java, base, jars, settings)}"
        archive = where / f"{name}.jsa"
        if any(c.isspace() or c in "'\"" for c in str(archive)):
            return Plan()  # the JVM's options are one string, split at spaces
        if archive.is_file():
            os.utime(archive)  # the most recently used are kept
            return Plan(f"-XX:SharedArchiveFile={archive} {QUIET}", archive, None, java)
        if (where / f"{name}.failed").exists():
            return Plan()
        _clean(where)
        making = where / f"{name}.{os.getpid()}.tmp"
    except OSError:
        return Plan()
    return Plan(f"-XX:ArchiveClassesAtExit={making} {QUIET}", archive, making, java)


def _clean(where: Path) -> None:
    """Removes archives left half-written by runs that were killed."""
    now = time.time()
    for tmp in where.glob("*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_SECONDS:
                tmp.unlink()
        except OSError:
            pass


def finish_at_exit(the_plan: Plan, spark: Any, tell: Callable[[str], None] | None = None) -> None:
    """When the plan makes an archive: at the process's exit, stops `spark`, lets its JVM exit
    and write the archive, checks it and puts it in place (`tell` hears of it)."""
    if the_plan.making is None or the_plan.archive is None:
        return
    try:
        classpath = str(spark._jvm.System.getProperty("java.class.path"))
        jvm = spark.sparkContext._gateway.proc
    except Exception:
        return
    if jvm is None:
        return
    tell = tell or (lambda _: None)
    tell(
        f"the JVM's classes will be kept in {the_plan.making.parent} for faster starts: once, "
        f"as this run ends (about 15 s; {ENV_SWITCH}=off skips it)"
    )
    atexit.register(_finish, the_plan, spark, jvm, classpath, tell)


def _finish(
    the_plan: Plan, spark: Any, jvm: Any, classpath: str, tell: Callable[[str], None]
) -> None:
    making, archive = the_plan.making, the_plan.archive
    assert making is not None and archive is not None and the_plan.java is not None
    try:
        spark.stop()
    except Exception:
        pass
    try:
        # The JVM exits when its stdin closes (pyspark's gateway), writing the archive first.
        if jvm.stdin is not None:
            jvm.stdin.close()
        code = jvm.wait(timeout=300)
    except Exception:
        return  # still running: left to be cleaned as stale
    try:
        if code != 0 or not making.is_file():
            making.unlink(missing_ok=True)  # tried again next run
        elif check(the_plan.java, making, classpath):
            os.replace(making, archive)
            prune(archive.parent)
            tell(f"kept the JVM's classes: {archive} ({archive.stat().st_size / 1e6:.0f} MB)")
        else:
            making.unlink()
            # Not tried again for this JDK and Spark: it writes archives it cannot map.
            archive.with_suffix(".failed").write_text("written but not mapped: check failed\n")
    except OSError:
        pass


def check(java: Path, archive: Path, classpath: str) -> bool:
    """Whether a JVM on `classpath` maps `archive` with every region's checksum right."""
    with tempfile.TemporaryDirectory(prefix="kwire-jvm-") as tmp:
        cmd = [
            str(java),
            "-Xshare:on",
            f"-XX:SharedArchiveFile={archive}",
            "-XX:+VerifySharedSpaces",
            "-XX:-CreateCoredumpOnCrash",
            f"-XX:ErrorFile={tmp}/hs_err.log",
            "-cp",
            classpath,
            "-version",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=120, cwd=tmp)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return proc.returncode == 0


def prune(where: Path, keep: int = KEEP) -> None:
    """Keeps the `keep` most recently used archives."""
    archives = sorted(where.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[keep:]:
        try:
            old.unlink()
        except OSError:
            pass
