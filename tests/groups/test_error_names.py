"""kwire's names of Kafka's error codes against two independent tables of them: kafka-python's
(`kafka.errors`, one class per code with its `errno` and `message`) and librdkafka's
(`confluent_kafka.KafkaError`, one constant per broker error code). A code either peer knows
that kwire lacks fails here, so a Kafka release that adds codes is noticed when the peers catch
up; a name that differs from the peer's fails too."""

from __future__ import annotations

import pytest

from kwire.groups.errors import NAMES, error_name

# Where a peer spells a code differently from Kafka's own Errors enum (the name kwire uses).
# kafka-python names some codes after its exception classes' old messages; librdkafka keeps a
# few historical names. Each entry: code -> {peer name, ...} also accepted.
_ALIASES: dict[int, set[str]] = {
    2: {"INVALID_MSG"},
    4: {"INVALID_MSG_SIZE"},
    3: {"UNKNOWN_TOPIC_OR_PART"},
    6: {"NOT_LEADER_FOR_PARTITION"},
    7: {"REQUEST_TIMED_OUT"},
    8: {"BROKER_NOT_AVAILABLE"},
    10: {"MSG_SIZE_TOO_LARGE", "MESSAGE_SIZE_TOO_LARGE"},
    11: {"STALE_CTRL_EPOCH"},
    13: {"NETWORK_EXCEPTION"},
    14: {"GROUP_LOAD_IN_PROGRESS", "COORDINATOR_LOAD_IN_PROGRESS"},
    15: {"GROUP_COORDINATOR_NOT_AVAILABLE", "COORDINATOR_NOT_AVAILABLE"},
    16: {"NOT_COORDINATOR_FOR_GROUP", "NOT_COORDINATOR"},
    17: {"TOPIC_EXCEPTION", "INVALID_TOPIC"},
    18: {"RECORD_LIST_TOO_LARGE"},
    21: {"INVALID_REQUIRED_ACKS"},
    39: {"INVALID_REPLICATION_ASSIGNMENT"},
    34: {"INVALID_SESSION_TIMEOUT"},
    35: {"UNSUPPORTED_VERSION"},
    46: {"INVALID_PRODUCER_ID_MAPPING"},
    62: {"DELEGATION_TOKEN_AUTH_DISABLED"},
    87: {"INVALID_RECORD"},
}


def _same(code: int, theirs: str) -> bool:
    ours = NAMES[code]
    return theirs == ours or theirs in _ALIASES.get(code, set())


def _kafka_python() -> dict[int, str]:
    errors = pytest.importorskip("kafka.errors", reason="kafka-python is a test dependency")
    found: dict[int, str] = {}
    for value in vars(errors).values():
        errno = getattr(value, "errno", None)
        message = getattr(value, "message", None)
        if isinstance(value, type) and isinstance(errno, int) and errno > 0 and message:
            found[errno] = str(message)
    return found


def _librdkafka() -> dict[int, str]:
    ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test dependency")
    found: dict[int, str] = {}
    for name, value in vars(ck.KafkaError).items():
        # Broker error codes are the positive ones; librdkafka's own (local) errors are negative.
        if name.isupper() and isinstance(value, int) and not isinstance(value, bool) and value > 0:
            found[value] = name
    return found


@pytest.mark.parametrize("peer", [_kafka_python, _librdkafka], ids=["kafka-python", "librdkafka"])
def test_every_code_a_peer_knows_is_named_alike(peer) -> None:
    known = peer()
    assert len(known) > 100, f"the peer's table looks empty ({len(known)} codes)"
    missing = sorted(code for code in known if code not in NAMES)
    assert not missing, f"codes the peer names and kwire does not: {missing}"
    differ = {code: (NAMES[code], known[code]) for code in known if not _same(code, known[code])}
    assert not differ, f"kwire's name and the peer's differ: {differ}"


def test_share_and_streams_codes_are_named() -> None:
    # The codes share and streams groups answer with (Kafka's Errors, 4.2).
    assert error_name(121) == "INVALID_RECORD_STATE"
    assert error_name(122) == "SHARE_SESSION_NOT_FOUND"
    assert error_name(129) == "REBOOTSTRAP_REQUIRED"
    assert error_name(132) == "STREAMS_TOPOLOGY_FENCED"
    assert error_name(133) == "SHARE_SESSION_LIMIT_REACHED"
    assert error_name(99) == "POSITION_OUT_OF_RANGE"  # once missing here; the peers caught it
    assert error_name(134) == "ERROR_134"  # an unknown code stays visible
    assert error_name(0) is None and error_name(None) is None


def test_codes_are_contiguous() -> None:
    # Kafka numbers its codes without gaps from -1; a hole means a code was skipped here.
    assert sorted(NAMES) == list(range(-1, max(NAMES) + 1))
