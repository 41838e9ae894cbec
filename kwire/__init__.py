"""kwire: decode captured Kafka traffic into typed tables, and tell what happened to each
consumer group.

Rooms, each importing only the ones below it:

    kwire (the `kwire` command, the decode job, the demo)
      kwire.groups    the consumer groups' tables, story and report
        kwire.spark   the Spark side: UDFs, Spark types, the capture step on executors
          kwire.capture   pcap/pcapng to frames (TCP reassembly, framing, pairing)
          kwire.records   record batches and message sets
            generated     the compiled codecs (and generator, the compiler that makes them)
"""

__version__ = "0.1.0"
