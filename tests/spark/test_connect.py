"""kwire over Spark Connect: `kwire decode --remote sc://...` writes what the classic job writes,
and the UDF pack and the pcap source work on a Connect session.

One Spark Connect server for the module (tests/connect_server.py: the installed pyspark's own
jars, a free loopback port, its warehouse and logs in a temporary directory). A process cannot
hold a classic session and a Connect one (pyspark refuses, and a Connect session switches the
process's pyspark functions to Connect's), so the Connect side runs in processes of its own,
as a user's would; the classic side is the tests' own session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from pyspark.sql import SparkSession

from kwire import job, pipeline
from tests.checks import out_tables as _tables
from tests.connect_server import ConnectServer

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "capture"
# A classic group with its rebalances and records, and share consumers with redeliveries: every
# table of OUT has rows.
CAPTURES = [DATA / "mock_group_classic.pcap", DATA / "mock_share_locks.pcap"]
# One worker starts the server and runs every test that uses it.
pytestmark = pytest.mark.xdist_group("connect")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    started = ConnectServer(tmp_path_factory.mktemp("connect"))
    try:
        started.wait()
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def bare_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Connect server whose Python has kwire's dependencies but not kwire (a venv whose
    site-packages path is the project's, without the .pth files there: pyarrow, pandas and the
    other dependencies import, kwire, an editable install's finder, does not)."""
    import sysconfig

    home = tmp_path_factory.mktemp("bare")
    bare = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    (next(bare.glob("lib/python*/site-packages")) / "deps.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    python = str(bare / "bin" / "python")
    probe = subprocess.run(
        [python, "-c", "import pyarrow, pandas, kwire"], capture_output=True, cwd=home
    )
    assert b"No module named 'kwire'" in probe.stderr, probe.stderr
    started = ConnectServer(home / "server", env={"PYSPARK_PYTHON": python})
    try:
        started.wait()
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def classic(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The classic job on CAPTURES, on the tests' session, its tables also in its catalog as
    kw_classic.*: what the Connect runs must equal."""
    out = tmp_path_factory.mktemp("classic") / "out"
    args = [*map(str, CAPTURES), "-o", str(out), "--no-summary", "-q", "--database", "kw_classic"]
    job.run(job.parse_args(args), spark)
    return out


def _client(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A process of its own running `args` with this interpreter, which must succeed (else the
    test fails with what it printed)."""
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return done


def _catalog_counts(server: ConnectServer, database: str, names: list[str]) -> dict[str, int]:
    """Rows of each OUT table (by its manifest name) in DATABASE, asked by another client of
    the server."""
    queries = [f"SELECT count(*) AS n FROM {database}.{n.replace('/', '_')}" for n in names]
    client = str(ROOT / "tests" / "spark" / "connect_client.py")
    asked = json.loads(_client(client, server.url, "{}", json.dumps(queries)).stdout)
    return {n: asked["rows"][q][0]["n"] for n, q in zip(names, queries)}


def test_decode_over_connect_writes_what_the_classic_job_writes(
    bare_server: ConnectServer, spark: SparkSession, classic: Path, tmp_path: Path
) -> None:
    """`kwire decode --remote` equals the classic job table by table, on a server whose Python
    lacks kwire: the job sends its own pure-Python package as an artifact and says so in one
    line. With --database both sessions' catalogs answer SQL on the tables, publishing again
    (what a re-run with --overwrite does) replaces them, and `kwire groups --remote URL
    --database NAME` tells the story from the catalog. (The compiled readers on a Connect
    server's executors: the live test and the UDF pack's below. One decode job over Connect
    for both cases: each costs half a minute.)"""
    server = bare_server
    inputs = [str(c) for c in CAPTURES]
    remote = tmp_path / "remote"
    said = _client(
        "-m", "kwire", "decode", *inputs, "-o", str(remote), "--remote", server.url,
        "--database", "kw",
    ).stderr  # fmt: skip
    # The start line says where the job ran, with the readers the server's executors have:
    # kwire's pure-Python package, sent by the client.
    assert "the Spark Connect server's Python has no kwire: sent this one's pure-Python" in said
    assert f"(Spark Connect at {server.url}), default parallelism 2" in said, said
    assert "readers on the executors: python (kwire from " in said and ".zip/kwire)" in said, said
    assert "catalog: 20 tables in kw" in said, said
    want, got = _tables(classic), _tables(remote)
    assert sorted(got) == sorted(want)
    empty = [name for name, rows in want.items() if not rows]
    assert len(empty) <= 2, empty  # the captures fill (nearly) every table
    for name in want:
        assert got[name] == want[name], name

    # The classic session's catalog, then again after a re-run with --overwrite.
    counts = {name: len(rows) for name, rows in want.items()}
    for again in (True, False):
        for name, n in counts.items():
            table = "kw_classic." + name.replace("/", "_")
            assert spark.sql(f"SELECT count(*) FROM {table}").first()[0] == n, table
        if again:
            assert len(job.publish_tables(spark, "kw_classic", str(classic))) == len(counts)
    # The Connect server's, from another client of the server.
    assert _catalog_counts(server, "kw", list(counts)) == counts
    # The story, from the catalog's tables, as from OUT.
    from kwire.groups.story import tell

    story = _client("-m", "kwire", "groups", "--remote", server.url, "--database", "kw").stdout
    assert story == tell(classic)
    assert "group g-classic" in story and "share" in story
    page = tmp_path / "report.html"
    args = ["--remote", server.url, "--database", "kw", "-o", str(page)]
    assert f"report -> {page}" in _client("-m", "kwire", "report", *args).stdout
    assert "g-classic" in page.read_text()


# What a notebook user runs on the UDF pack and the pcap source.
QUERIES = [
    "SELECT count(*) AS packets, count(note) AS notes, sum(length) AS bytes,"
    " count(DISTINCT dport) AS ports FROM packets",
    "SELECT kafka_api_name(api_key) AS api, count(*) AS n FROM frames"
    " WHERE direction = 'request' GROUP BY 1 ORDER BY 1",
    "SELECT d.status, d.api_key, d.join_group.group_id AS g, count(*) AS n FROM"
    " (SELECT kafka_decode_request(frame) AS d FROM frames WHERE direction = 'request')"
    " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    "SELECT d.status, d.heartbeat.error_code AS e, count(*) AS n FROM"
    " (SELECT kafka_decode_response(frame, api_key, api_version) AS d FROM frames"
    " WHERE direction = 'response') GROUP BY 1, 2 ORDER BY 1, 2",
]


def test_the_udf_pack_and_the_pcap_source_over_connect(
    server: ConnectServer, spark: SparkSession, tmp_path: Path
) -> None:
    import kwire.spark

    capture_file = CAPTURES[0]
    frames = pipeline.run_capture([str(capture_file)], str(tmp_path), None)
    # The client names the capture relative to its own working directory: the server's is
    # elsewhere (its own temporary directory), and the path must be read where the user is.
    relative = os.path.relpath(capture_file, ROOT)
    views = {"packets": ["pcap", relative], "frames": ["parquet", frames]}
    said = _client(
        str(ROOT / "tests" / "spark" / "connect_client.py"),
        server.url,
        json.dumps(views),
        json.dumps(QUERIES),
    ).stdout
    got = json.loads(said)
    assert got["functions"] == ["kafka_decode_request", "kafka_decode_response", "kafka_api_name"]
    # The same on the tests' classic session.
    kwire.spark.register(spark)
    spark.read.format("pcap").load(str(capture_file)).createOrReplaceTempView("packets")
    spark.read.parquet(frames).createOrReplaceTempView("frames")
    for query in QUERIES:
        want = [r.asDict(recursive=True) for r in spark.sql(query).collect()]
        assert json.loads(json.dumps(want, default=str)) == got["rows"][query], query
    packets = got["rows"][QUERIES[0]][0]
    assert packets["packets"] == 475 and packets["notes"] == 0, packets
    assert any(r["g"] == "g-classic" for r in got["rows"][QUERIES[2]])


def test_live_over_connect_equals_decode(
    server: ConnectServer, classic: Path, tmp_path: Path
) -> None:
    """`kwire live --remote` on a spool: its batches run in the server's Python, and OUT ends
    equal to `kwire decode` on the same files (the source file column aside: live names the
    spooled files)."""
    from kwire.live.spool import spool_file
    from tests.live.test_live import cut

    ring: list[Path] = []
    for capture in CAPTURES:
        ring += cut(capture, 2, tmp_path / "ring", first=len(ring))
    spool = tmp_path / "spool"
    spool.mkdir()
    for f in ring:
        spool_file(str(f), str(spool))
    ports = ",".join(
        str(p)
        for capture in CAPTURES
        for p in json.loads(capture.with_suffix(".json").read_text())["broker_ports"]
    )
    live = tmp_path / "live"
    said = _client(
        "-m", "kwire", "live", str(spool), "-o", str(live), "-p", ports, "--remote", server.url,
        "--max-files", "2", "--trigger", "0.5", "--until-idle", "3", "--database", "kw_live",
    ).stdout  # fmt: skip
    # The client tells the batches the server ran.
    assert "batch 0: files 1-2 (2)" in said and "batch 1: files 3-4 (2)" in said, said
    assert "end of capture" in said, said
    # The same packets as the classic job's captures, cut into files: the same rows.
    batch = classic
    listed = json.loads((batch / "manifest.json").read_text())["tables"]
    assert set(json.loads((live / "manifest.json").read_text())["tables"]) == set(listed)
    for name, rel in sorted(listed.items()):
        if name == "frames":
            continue
        data = ds.dataset(str(batch / rel), format="parquet", partitioning="hive")
        columns = [c for c in data.schema.names if c != "source_file"]

        def rows(out: Path) -> list[str]:
            table = ds.dataset(str(out / rel), format="parquet", partitioning="hive")
            found = table.to_table(columns=columns).to_pylist()
            return sorted(repr(sorted(r.items())) for r in found)

        assert rows(live) == rows(batch), name
    # Live mode kept the server's catalog tables current: every row is there by the end.
    counts = {
        name: ds.dataset(str(batch / rel), format="parquet", partitioning="hive").count_rows()
        for name, rel in listed.items()
    }
    assert _catalog_counts(server, "kw_live", list(counts)) == counts


def test_only_a_loopback_server_is_taken_to_see_this_machines_files() -> None:
    from kwire.spark.driver import is_loopback

    assert is_loopback("sc://127.0.0.1:15002") and is_loopback("sc://localhost")
    assert is_loopback("sc://[::1]:15002/;user_id=a")
    assert not is_loopback("sc://db.example.com:443/;token=x")
    assert not is_loopback("sc://10.0.0.1")


@pytest.mark.parametrize("when", ["running", "late"])
def test_a_failed_step_interrupts_the_others_over_connect(server: ConnectServer, when: str) -> None:
    """Steps tag their operations; a failed step's error is what run() raises, and the other
    step's two-minute query (running, or submitted after the failure) is interrupted."""
    said = json.loads(
        _client(str(ROOT / "tests" / "spark" / "connect_steps.py"), server.url, when).stdout
    )
    assert said["error"] == "ValueError: the decoded requests are not there", said
    assert said["seconds"] < 100, f"the slow step's query was not interrupted: {said}"
    assert said["after"] == 5
