"""Makes the driver JVM's class archive (kwire/spark/classes.py) in a directory, once per JDK and
Spark installation, for the test suite's JVMs to start from.

    python scripts/jvm_classes.py DIR

`make test` runs it before pytest and gives the suite DIR (KWIRE_TEST_JVM_CLASSES; see
tests/conftest.py). When DIR already holds the archive that fits this JDK and Spark it returns at
once; otherwise it runs `kwire decode` on two bundled captures with DIR as kwire's cache, and
the job writes the archive as it ends, as a user's first run does (about 35 s on 2 cores). A JVM
mapping it starts and runs its first queries without loading and verifying those classes again:
a job on those captures in a fresh JVM took 25.2-26.8 CPU-seconds with it against 30.2-31.3
without (3 runs each). Without an archive (the JDK cannot write one) the suite runs as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A classic group and share consumers, with records: the job runs every stage and so loads the
# classes of every kind of query it makes.
CAPTURES = [
    ROOT / "tests" / "data" / "capture" / "mock_group_classic.pcap",
    ROOT / "tests" / "data" / "capture" / "mock_share_locks.pcap",
]


LOG = "job.log"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python scripts/jvm_classes.py DIR", file=sys.stderr)
        return 2
    from kwire.spark import classes

    # Here and in the job below: the archive kept in DIR, whatever the caller's environment says.
    os.environ.update({classes.ENV_CACHE: os.path.abspath(argv[1]), classes.ENV_SWITCH: "on"})
    os.environ.pop("PYSPARK_GATEWAY_PORT", None)
    plan = classes.plan({})
    if plan.archive is None:
        print("jvm classes: this JDK or Spark keeps no class archive; the tests start without one")
        return 0
    if plan.making is None:
        return 0  # there already
    with tempfile.TemporaryDirectory(prefix="kwire-jvm-classes-") as tmp:
        cmd = [sys.executable, "-m", "kwire", "decode", *map(str, CAPTURES)]
        done = subprocess.run(
            [*cmd, "-o", os.path.join(tmp, "out")], cwd=tmp, capture_output=True, text=True
        )
    # What the job said, its "kept the JVM's classes" line among it: the class archive's test
    # (tests/spark/test_classes.py) takes this run for the first of its two sessions.
    Path(argv[1], LOG).write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        # Not this step's to report: the tests run the job too, and say what failed there.
        print("jvm classes: the job that makes the archive failed; the tests start without one")
        return 0
    if plan.archive.is_file():
        size = plan.archive.stat().st_size / 1e6
        print(f"jvm classes: {plan.archive} ({size:.0f} MB), for the tests' JVMs")
    else:
        print("jvm classes: no archive was kept; the tests start without one")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
