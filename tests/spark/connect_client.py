"""A Spark Connect client for tests/spark/test_connect.py, run in a process of its own:
registers kwire's SQL functions and pcap source on a session of the server at argv[1], makes
temporary views (argv[2], JSON: view -> [format, path]; paths as given, relative ones from this
process's working directory) and prints each query's rows (argv[3], JSON list) as JSON."""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

import kwire.spark


def main() -> None:
    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    names = kwire.spark.register(spark)
    for view, (kind, path) in json.loads(sys.argv[2]).items():
        spark.read.format(kind).load(path).createOrReplaceTempView(view)
    rows = {
        query: [r.asDict(recursive=True) for r in spark.sql(query).collect()]
        for query in json.loads(sys.argv[3])
    }
    print(json.dumps({"functions": names, "rows": rows}, default=str))


if __name__ == "__main__":
    main()
