# The UDF pack: decode Kafka frames in any DataFrame with a binary frame column, from Python or
# SQL. In a notebook, `spark` is the session.
from kwire.spark import decode_requests, register

out = "out/demo"  # the decode job's OUT; its frames table holds the captured frames
frames = spark.read.parquet(f"{out}/frames.parquet")

# From Python: one struct column per API; fields= decodes only what it names.
joins = decode_requests(
    frames.where("direction = 'request' AND api_key = 11"), fields=["join_group.group_id"]
)
joins.groupBy("join_group.group_id").count().show()

# From SQL: the same decoders as functions (register also adds the pcap source).
register(spark)
frames.createOrReplaceTempView("frames")
per_api = spark.sql("""
    SELECT kafka_api_name(d.api_key) AS api, d.api_version AS version,
           count(*) AS frames, count(d.error) AS errors
    FROM (SELECT kafka_decode_request(frame) AS d FROM frames WHERE direction = 'request')
    GROUP BY 1, 2 ORDER BY 1, 2
""")
per_api.show(100)

# What each leader assigned: SyncGroup requests, their consumer assignments exploded.
assigned = spark.sql("""
    SELECT d.sync_group.group_id AS group_id, a.member_id, tp.topic, tp.partitions
    FROM (SELECT kafka_decode_request(frame) AS d FROM frames
          WHERE direction = 'request' AND api_key = 14)
      LATERAL VIEW explode(d.sync_group.assignments) AS a
      LATERAL VIEW explode(a.consumer_assignment.assigned_partitions) AS tp
""")
assigned.show(truncate=False)
