# The codecs alone: encode a JoinGroup request, decode it back, and a response frame.
import generated as g
from generated.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from generated.join_group_response import JoinGroupResponse
from generated.request_header import RequestHeader
from generated.response_header import ResponseHeader

join = JoinGroupRequest(
    group_id="billing",
    session_timeout_ms=45000,
    member_id="",
    protocol_type="consumer",
    protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
)
body = join.encode(5)  # the body alone, at version 5
assert JoinGroupRequest.decode(body, 5) == join

frame = g.encode_request(RequestHeader(11, 5, 42, "my-client"), join)  # with its length prefix
header, message = g.decode_request(frame[4:])  # frames are passed without the prefix
assert (header.request_api_key, header.client_id, message) == (11, "my-client", join)

answer = JoinGroupResponse(generation_id=1, protocol_name="range", leader="m-1", member_id="m-1")
response_frame = g.encode_response(ResponseHeader(42), answer, 5)[4:]
header, message = g.decode_response(response_frame, api_key=11, api_version=5)
print(message.to_dict())  # plain JSON-friendly data

try:
    g.decode_request(frame[4:-3])  # a frame cut short
except g.DecodeError as e:
    print(e)  # names the message, version, field path and byte offset
