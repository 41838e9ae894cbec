# The pcap data source: a capture's packets as a DataFrame, read by Spark in byte ranges.
# In a notebook, `spark` is the session (a local one, or Spark Connect's).
import kwire.spark

capture = "tests/data/capture/mock_gt_progress.pcap"  # a capture, a ring directory or a URL

kwire.spark.register(spark)  # the pcap source and kwire's SQL functions, on this session
ports = spark.read.format("pcap").load(capture).groupBy("dport").count()
ports.show()
