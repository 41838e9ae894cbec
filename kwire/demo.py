"""`make demo`: the decode job on the captures bundled in tests/data, a few SQL queries, and the
story of every consumer group in them (plus the HTML report).

It runs from a checkout (the captures live in tests/data; the demo never falls back to synthetic
traffic, which would show nothing real). Output goes to out/demo (or the directory given as the
first argument).
"""

from __future__ import annotations

import sys
from pathlib import Path

from kwire import job
from kwire.spark import register
from kwire.spark.session import build_session

ROOT = Path(__file__).resolve().parent.parent

QUERIES: list[tuple[str, str]] = [
    (
        "What the producers sent and the consumers fetched, per topic (OUT/records)",
        """
        SELECT coalesce(topic, concat('id ', topic_id)) AS topic,
               CASE api_key WHEN 0 THEN 'produced' ELSE 'fetched' END AS how,
               count(*) AS records, count(DISTINCT client_id) AS clients,
               min(offset) AS first_offset, max(offset) AS last_offset,
               first(CAST(value AS STRING)) AS a_value, first(compression) AS codec
        FROM records WHERE NOT is_control
        GROUP BY 1, 2 ORDER BY 1, 2
        """,
    ),
    (
        "Who joined which group, with which assignors and subscriptions (JoinGroup requests)",
        """
        SELECT DISTINCT join_group.group_id AS group_id, client_id, api_version AS v,
               p.name AS assignor, p.consumer_subscription.version AS sub_v,
               p.consumer_subscription.topics AS topics
        FROM requests LATERAL VIEW explode(join_group.protocols) AS p
        WHERE api_key = 11
        ORDER BY group_id, client_id, assignor
        """,
    ),
    (
        "What each group leader assigned (SyncGroup requests, consumer assignments)",
        """
        SELECT sync_group.group_id AS group_id, a.member_id,
               tp.topic, tp.partitions
        FROM requests
          LATERAL VIEW explode(sync_group.assignments) AS a
          LATERAL VIEW explode(a.consumer_assignment.assigned_partitions) AS tp
        WHERE api_key = 14
        ORDER BY group_id, member_id, topic
        """,
    ),
    (
        "Latest committed offset per group, topic and partition (OffsetCommit requests)",
        """
        SELECT offset_commit.group_id AS group_id, t.name AS topic, p.partition_index AS part,
               max_by(p.committed_offset, ts_first) AS committed_offset, count(*) AS commits
        FROM requests
          LATERAL VIEW explode(offset_commit.topics) AS t
          LATERAL VIEW explode(t.partitions) AS p
        WHERE api_key = 8
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        """,
    ),
    (
        "Broker answers per api: latency and error codes of group-coordination responses",
        """
        SELECT kafka_api_name(api_key) AS api, count(*) AS responses,
               percentile_approx(latency_us, 0.5) AS p50_us,
               max(latency_us) AS max_us,
               count_if(coalesce(heartbeat.error_code, join_group.error_code,
                                 sync_group.error_code, leave_group.error_code) != 0) AS error_codes,
               count(error) AS decode_errors
        FROM responses
        WHERE api_key IN (11, 12, 13, 14)
        GROUP BY api_key ORDER BY api_key
        """,
    ),
    (
        "The SQL functions straight on the frames table",
        """
        SELECT kafka_api_name(d.api_key) AS api, d.api_version AS v, count(*) AS frames,
               count(d.error) AS errors, first(d.error, true) AS an_error
        FROM (SELECT kafka_decode_request(frame) AS d FROM frames WHERE direction = 'request')
        GROUP BY 1, 2 ORDER BY 1, 2
        """,
    ),
]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else ROOT / "out" / "demo"
    out.mkdir(parents=True, exist_ok=True)
    captures = sorted(
        str(p) for p in (ROOT / "tests" / "data").rglob("*") if p.suffix in (".pcap", ".pcapng")
    )
    if not captures:
        job.say(
            f"demo: no bundled captures under {ROOT / 'tests' / 'data'}: run it from a checkout"
        )
        return 2
    job.say(f"demo: {len(captures)} bundled capture(s) from tests/data")
    # The TLS captures' key logs (written by their clients), and their TLS listeners' ports.
    keylogs = sorted(str(p) for p in (ROOT / "tests" / "data").rglob("*.keys"))
    options = [f"--keylog={k}" for k in keylogs]
    if keylogs:
        options += ["-p", "9092,9093,9094"]
    args = job.parse_args([*captures, "-o", str(out), "--overwrite", *options])
    # The bundled captures are a short job's input, as `kwire decode` would size them.
    short = job.short_job(args.master, [], captures)
    spark = build_session(args.master, "kwire-demo", short=short, tell=job.say, batch=True)
    try:
        job.run(args, spark=spark)
        register(spark)
        spark.read.parquet(str(out / "requests")).createOrReplaceTempView("requests")
        spark.read.parquet(str(out / "responses")).createOrReplaceTempView("responses")
        spark.read.parquet(str(out / "records")).createOrReplaceTempView("records")
        spark.read.parquet(str(out / "frames.parquet")).createOrReplaceTempView("frames")
        for title, sql in QUERIES:
            print(f"\n-- {title}")
            print("\n".join(line[8:] for line in sql.strip("\n").splitlines()))
            spark.sql(sql).show(20, truncate=60)
    finally:
        spark.stop()
    # The point of it all: what happened to each consumer group (`kwire groups OUT`), and the
    # same as a page with timelines (`kwire report OUT -o OUT/report.html`).
    from kwire.groups.report import write_report
    from kwire.groups.story import tell

    print(f"\n-- What happened to each consumer group (kwire groups {out})\n")
    print(tell(out))
    page = write_report(out, out / "report.html")
    job.say(f"demo: the groups' report with timelines -> {page} (open it in a browser)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
