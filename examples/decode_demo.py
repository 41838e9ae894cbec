"""A first look at kwire's codecs: encode a consumer-group exchange, decode it back, show errors.

Run with `python examples/decode_demo.py` (`make demo` runs the Spark decode job on real captures).
"""

from __future__ import annotations

import json

import generated as g
from generated.consumer_protocol_subscription import ConsumerProtocolSubscription
from generated.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from generated.request_header import RequestHeader


def main() -> None:
    subscription = ConsumerProtocolSubscription(topics=["orders", "payments"])
    metadata = g.encode_version_prefixed(subscription, 1)
    join = JoinGroupRequest(
        group_id="billing",
        session_timeout_ms=45000,
        rebalance_timeout_ms=300000,
        member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=metadata)],
    )
    for version in (0, 5, 9):
        frame = g.encode_request(RequestHeader(11, version, 42, "demo-client"), join)
        header, body = g.decode_request(frame[4:])
        version_used, sub = g.decode_version_prefixed(
            ConsumerProtocolSubscription, body.protocols[0].metadata
        )
        print(f"JoinGroup v{version}: {len(frame)} bytes on the wire: {frame[:24].hex(' ')} ...")
        print(f"  header: {header.to_dict()}")
        print(f"  subscription v{version_used}: topics {sub.topics}")
    print(json.dumps(body.to_dict(), indent=2)[:400])
    cut = frame[4:-7]
    try:
        g.decode_request(cut)
    except g.KwireError as e:
        print(f"a cut frame gives a clear error: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
