"""A local Spark Connect server for the tests, started from the installed pyspark's own jars.

`spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer` (spark-submit
execs the JVM, so the process started is the server's; it gets SIGTERM if the tests' process
dies without stopping it: tests/lifetime.py), bound to a free loopback port, with its
logs, warehouse, metastore and working directory in `home`. Its Python workers run this
interpreter, which imports kwire as the project's venv has it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark

from kwire.spark.session import C1_JVM, LOCAL_GC, jvm_environment
from tests.lifetime import archive_options, dies_with_parent


class ConnectServer:
    def __init__(
        self,
        home: Path,
        env: dict[str, str] | None = None,
        cores: int = 2,
        conf: dict[str, str] | None = None,
    ) -> None:
        self.home = home
        home.mkdir(parents=True, exist_ok=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        spark_home = Path(pyspark.__file__).parent
        environ = {
            **os.environ,
            "SPARK_HOME": str(spark_home),
            # Spark's own (absent in pyspark's wheel), as kwire's sessions have it: the first
            # entry of the JVM's class path, which must be the class archive's (below).
            "SPARK_CONF_DIR": str(spark_home / "conf"),
            "SPARK_LOG_DIR": str(home),
            "SPARK_PID_DIR": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            # A local master's JVM, with the environment kwire gives one (glibc's arenas).
            **jvm_environment(f"local[{cores}]"),
            **(env or {}),
        }
        submit = spark_home / "bin" / "spark-submit"
        self.log = open(home / "server.log", "w")
        self.proc = subprocess.Popen(
            dies_with_parent([
                str(submit),
                "--class",
                "org.apache.spark.sql.connect.service.SparkConnectServer",
                "--master",
                f"local[{cores}]",
                "--driver-memory",
                "1g",
                "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf", f"spark.connect.grpc.binding.port={self.port}",
                "--conf", "spark.driver.bindAddress=127.0.0.1",
                "--conf", "spark.driver.host=127.0.0.1",
                "--conf", "spark.ui.enabled=false",
                "--conf", "spark.sql.shuffle.partitions=2",
                "--conf", f"spark.sql.warehouse.dir={home / 'warehouse'}",
                # A local master: its tasks run in its JVM, collected as kwire's local
                # sessions' are (kwire.spark.session.LOCAL_GC).
                "--conf", f"spark.driver.extraJavaOptions={LOCAL_GC} {C1_JVM} {archive_options()}"
                f" -Dderby.system.home={home}",
                *[x for key, value in (conf or {}).items() for x in ("--conf", f"{key}={value}")],
            ]),
            cwd=home,
            env=environ,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        self.url = f"sc://127.0.0.1:{self.port}"

    def wait(self, timeout: float = 120) -> str:
        """The server's URL once it listens; its log's tail if it died or never listened."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the Connect server exited {self.proc.returncode}:\n{self.tail()}"
                )
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self.url
            time.sleep(0.25)
        raise RuntimeError(f"the Connect server did not listen in {timeout} s:\n{self.tail()}")

    def tail(self) -> str:
        self.log.flush()
        return (self.home / "server.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self.log.close()
