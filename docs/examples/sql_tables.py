# SQL over the tables `kwire decode` wrote. In a notebook, `spark` is the session.
out = "out/demo"  # the decode job's OUT (`make demo` writes out/demo)

for table in ("records", "delivery", "groups/commits"):
    spark.read.parquet(f"{out}/{table}").createOrReplaceTempView(table.replace("/", "_"))

# What did each producer send, per topic?
sent = spark.sql("""
    SELECT topic, client_id, count(*) AS records, min(offset) AS first, max(offset) AS last
    FROM records
    WHERE direction = 'request' AND NOT is_control AND offset IS NOT NULL
    GROUP BY topic, client_id ORDER BY topic, client_id
""")
sent.show(truncate=False)

# Producer to consumer: how late were the records, per topic and consuming group?
late = spark.sql("""
    SELECT topic, group_id, count(*) AS records,
           percentile_approx(fetch_ms, 0.5) AS p50_ms, percentile_approx(fetch_ms, 0.99) AS p99_ms
    FROM delivery WHERE first_fetched_at IS NOT NULL
    GROUP BY topic, group_id ORDER BY topic, group_id
""")
late.show(truncate=False)

# How far behind was each group at each commit, in seconds of the wire's clock?
behind = spark.sql("""
    SELECT group_id, topic, partition, ts, offset, time_lag_ms / 1000 AS behind_s
    FROM groups_commits WHERE error IS NULL AND time_lag_ms IS NOT NULL
    ORDER BY group_id, topic, partition, ts
""")
behind.show(truncate=False)
