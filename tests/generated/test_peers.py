"""Byte compatibility with independent implementations: kio and kafka-python.

For every message and every version a peer supports, values drawn from the model encode to the
same bytes in kwire and the peer, and each decodes the other's bytes. The consumer-group family
gets 12 examples per version in `make test`; every other API gets 3 examples of each version the
peer has per message; `make sweep` (KWIRE_SWEEP=1) gives every message 25 per version.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kio.schema.errors import ErrorCode

from tests.sampling import SWEEP
from tests.peers import FAMILY, KIO, PEERS, Peer, Unrepresentable
from tests.strategies import Strategies, load_message, present_dict

ROOT = Path(__file__).resolve().parents[2]
NAMES = sorted(set(FAMILY) | {"RequestHeader", "ResponseHeader"})
ALL = sorted(p.stem for p in (ROOT / "schemas").glob("*.json"))
MESSAGES = {name: load_message(ROOT / "schemas" / f"{name}.json") for name in ALL}
CASES = [
    (peer, name, v)
    for peer in PEERS
    for name in (ALL if SWEEP else NAMES)
    for v in peer.versions(name)
    if v in MESSAGES[name].valid
]
SAMPLED = (
    []
    if SWEEP
    else [
        (peer, name)
        for peer in PEERS
        for name in ALL
        if name not in NAMES and any(v in MESSAGES[name].valid for v in peer.versions(name))
    ]
)


def test_peers_cover_the_family() -> None:
    covered = {(name, v) for _, name, v in CASES}
    # Everything kwire ships for the consumer-group family has at least one independent reference,
    # except versions no peer implements (listed so a change in coverage is noticed).
    missing = {
        (name, v) for name in NAMES for v in MESSAGES[name].valid if (name, v) not in covered
    }
    # Kafka 4.4's new versions of family APIs are newer than both peers (kio is generated from
    # Kafka 4.1, kafka-python bundles 4.x files): tests/schemas checks them against the jar.
    newer = {
        ("ApiVersionsRequest", 5),
        ("ApiVersionsResponse", 5),
        ("DeleteGroupsRequest", 3),
        ("DeleteGroupsResponse", 3),
    }
    assert missing == {("RequestHeader", 0)} | newer, sorted(missing)


# Examples per message, version and peer: 25 in make sweep, 12 in make test.
EXAMPLES = 25 if SWEEP else 12


@pytest.mark.parametrize(
    ("peer", "name", "version"), CASES, ids=[f"{p.name}-{n}-v{v}" for p, n, v in CASES]
)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_bytes_as_peer(peer: Peer, name: str, version: int, data: st.DataObject) -> None:
    _same_bytes(peer, name, version, data)


def test_every_api_is_compared_with_a_peer() -> None:
    compared = {name for _, name, _ in CASES} | {name for _, name in SAMPLED}
    # Every message a peer knows is compared; kio covers the newest APIs too.
    assert len(compared) >= 180, sorted(set(ALL) - compared)


@pytest.mark.parametrize(("peer", "name"), SAMPLED, ids=[f"{p.name}-{n}" for p, n in SAMPLED])
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_same_bytes_as_peer_every_version_sampled(
    peer: Peer, name: str, data: st.DataObject
) -> None:
    for version in peer.versions(name):
        if version in MESSAGES[name].valid:
            _same_bytes(peer, name, version, data)


# Top-level fields Kafka 4.4 renamed (same bytes) after the peers were generated: our key -> the
# peers' key, per message (see RENAMED_FIELDS in tests/schemas/test_schema_facts.py).
PEER_NAMES = {
    "TxnOffsetCommitRequest": {"generation_id_or_member_epoch": "generation_id"},
    "StreamsGroupHeartbeatResponse": {"acceptable_recovery_lag_legacy": "acceptable_recovery_lag"},
}


def _as_peer(name: str, plain: dict, back: bool = False) -> dict:
    names = PEER_NAMES.get(name, {})
    if back:
        names = {theirs: mine for mine, theirs in names.items()}
    return {names.get(key, key): value for key, value in plain.items()}


def _timestamp_fields(cls: type) -> set[str]:
    names: set[str] = set()
    for f in cls.FIELDS:  # type: ignore[attr-defined]
        if f.name.endswith("TimestampMs") or (f.name.endswith("TimeMs") and f.type == "int64"):
            names.add(f.name)
        if f.struct is not None:
            names |= _timestamp_fields(f.struct)
    return names


def _same_bytes(peer: Peer, name: str, version: int, data: st.DataObject) -> None:
    message = MESSAGES[name]
    module = importlib.import_module(f"generated.{message.module}")
    cls = getattr(module, name)
    # kio holds error codes as an enum of the codes Kafka defines: draw from those for kio.
    # kio holds *TimestampMs fields as datetimes through float seconds, exact to the millisecond
    # only up to about 2^43 ms (year 2248): draw those from 0 to 2^41 (year 2039) for kio.
    overrides = (
        {
            "ErrorCode": st.sampled_from(sorted(int(c) for c in ErrorCode)),
            **{name: st.integers(0, 2**41) for name in _timestamp_fields(cls)},
        }
        if peer is KIO
        else {}
    )
    strategies = Strategies(message, module, unknown_tags=False, overrides=overrides)
    obj = data.draw(strategies.message_at(version))
    plain = present_dict(obj, version)
    ours = obj.encode(version)
    try:
        theirs = peer.encode(name, version, _as_peer(name, plain))
        decoded_by_peer = _as_peer(name, peer.decode(name, version, ours), back=True)
    except Unrepresentable:
        if SAMPLED and name not in NAMES:
            return  # one version of a sampled run; the others are still compared
        assume(False)
        return
    assert theirs == ours
    assert decoded_by_peer == plain
    assert cls.decode(theirs, version) == obj
