"""The decoding contract under fuzzing: call an entry point, classify what came out, judge it.

Shared by the pytest fuzz tests and the long runner (scripts/fuzz/run.py); standard library plus
`generated` only, so that it can run in worker processes and under atheris.

An outcome is one of:
- success (the bytes decoded);
- a clean error: a `KwireError` subclass; a `DecodeError` must also carry an int `offset` within
  [0, len(input)], a str `path`, a `message_name`, and a `str()` that names them;
- a *violation*: a KwireError that breaks those rules, or a tolerant `inspect_*` call that raised;
- a *crash*: any exception that is not a KwireError (struct.error, IndexError, RecursionError ...).

`masked` marks a DecodeError built by the runtime's catch-all ("cannot decode: <Type>: ..."): the
contract is kept (it is a KwireError), but some reader raised an exception nobody anticipated, so
the runner reports these separately.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import generated as g
from generated import DecodeError, KwireError

# Inputs longer than this are not interesting for the decoders (real group-API frames are small).
MAX_INPUT = 1 << 16

_NUMBER = re.compile(r"-?\d+")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


class Crash(Exception):
    """A non-kwire exception escaped an entry point (or a tolerant call raised at all)."""

    def __init__(self, target: str, data: bytes, exc: BaseException):
        self.target = target
        self.data = data
        self.exc = exc
        self.trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        super().__init__(f"{target}: {type(exc).__name__}: {exc} (input {data.hex()})")


def signature(exc: BaseException) -> str:
    """'<Type> in <file>:<function>' at the innermost frame of kwire's own code (generated/,
    capture/), or of the whole traceback: groups crashes that share a cause."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/generated/" in f.filename or "/capture/" in f.filename]
    named = [f for f in ours if not f.name.startswith("<")]  # not <listcomp>, <genexpr>
    if not frames:
        return type(exc).__name__
    where = (named or ours or frames)[-1]
    path = where.filename.replace("\\", "/")
    short = "/".join(path.split("/")[-2:])
    return f"{type(exc).__name__} in {short}:{where.name}"


# Crashes already reported and pinned by a strict xfail regression test (tests/fuzz/test_*.py):
# the general fuzz tests step over these so that `make test` stays green until the fix lands,
# while scripts/fuzz/run.py still counts and saves them. Remove an entry when its fix lands.
KNOWN_CRASHES: set[str] = set()


def is_known(err: BaseException) -> bool:
    exc = getattr(err, "exc", None)
    return isinstance(err, Crash) and exc is not None and signature(exc) in KNOWN_CRASHES


class Violation(Exception):
    """A kwire error that breaks the error contract (offset, path, message name, str)."""

    def __init__(self, target: str, data: bytes, exc: Any, problem: str):
        self.target = target
        self.data = data
        self.exc = exc
        self.problem = problem
        self.trace = (
            "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) if exc else ""
        )
        shown = f"{type(exc).__name__}: {exc}" if exc is not None else "-"
        super().__init__(f"{target}: {problem} [{shown}] (input {data.hex()})")


def shape(text: str) -> str:
    """An error text with its numbers and quoted values blanked: groups errors by kind."""
    return _NUMBER.sub("#", _QUOTED.sub("'…'", text))


def problem_of(e: BaseException) -> str:
    return getattr(e, "problem", None) or str(e)


def is_masked(e: BaseException) -> bool:
    return str(getattr(e, "problem", "")).startswith("cannot decode:")


def kind_of(e: Any) -> str:
    """'<ExceptionType>: <problem shape>': the key the runner counts distinct errors by."""
    return f"{type(e).__name__}: {shape(problem_of(e))}"


def contract_problems(e: Any, data: bytes, decode_error: Any = DecodeError) -> list[str]:
    """What is wrong with a kwire error raised for `data` (empty when it keeps the contract)."""
    if not isinstance(e, decode_error):
        return []
    out = []
    off = e.offset
    if not isinstance(off, int) or isinstance(off, bool):
        out.append(f"offset is {off!r}, not an int")
    elif not 0 <= off <= len(data):
        out.append(f"offset {off} outside [0, {len(data)}]")
    path = e.path
    if not isinstance(path, str):
        out.append(f"path is {type(path).__name__}, not str")
    if not isinstance(e.message_name, str) or not e.message_name:
        out.append("message_name is not set")
    if e.version is not None and not isinstance(e.version, int):
        out.append(f"version is {e.version!r}")
    text = str(e)
    if e.message_name and e.message_name not in text:
        out.append("str() does not name the message")
    if e.message_name and e.version is not None and f"v{e.version}" not in text:
        out.append("str() does not name the version")
    if isinstance(off, int) and f"at byte {off}" not in text:
        out.append("str() does not name the offset")
    if isinstance(path, str) and path and path not in text:
        out.append("str() does not name the path")
    return out


@dataclass(frozen=True)
class Target:
    """One decode entry point with its fixed arguments; `call(data)` runs it."""

    name: str  # e.g. "decode:JoinGroupRequest:v6", "request", "response:11:v5", "prefixed:..."
    call: Callable[[bytes], Any]
    tolerant: bool = False  # inspect_*: must never raise, errors come back in the report
    # The error family: another compiled package (the kitchen sink) carries its own runtime.
    kwire_error: Any = KwireError
    decode_error: Any = DecodeError


def message_targets(package: Any = g, prefix: str = "decode") -> list[Target]:
    """`Message.decode(data, v)` for every message class of a compiled package (`generated`
    unless told) and every valid version."""
    out = []
    for name, cls in sorted(package.MESSAGES.items()):
        for v in cls.VALID_VERSIONS:
            out.append(
                Target(
                    f"{prefix}:{name}:v{v}",
                    _decode_call(cls, v),
                    kwire_error=package.KwireError,
                    decode_error=package.DecodeError,
                )
            )
    return out


def head_targets() -> list[Target]:
    """`Message.read_head(data, 0, v)` (the leading fields only) for every message version
    that has a head (HEAD_FIELDS): column pruning reads untrusted frames this way."""
    out = []
    for name, cls in sorted(g.MESSAGES.items()):
        for v in sorted(getattr(cls, "HEAD_FIELDS", {})):
            out.append(Target(f"head:{name}:v{v}", _head_call(cls, v)))
    return out


def _head_call(cls: Any, v: int) -> Callable[[bytes], Any]:
    return lambda data: cls.read_head(data, 0, v)


def _decode_call(cls: Any, v: int) -> Callable[[bytes], Any]:
    return lambda data: cls.decode(data, v)


def _response_call(key: int, v: int) -> Callable[[bytes], Any]:
    return lambda data: g.decode_response(data, key, v)


def _inspect_response_call(key: int, v: int) -> Callable[[bytes], Any]:
    return lambda data: g.inspect_response(data, key, v)


def _prefixed_call(cls: Any) -> Callable[[bytes], Any]:
    return lambda data: g.decode_version_prefixed(cls, data)


def frame_targets() -> list[Target]:
    """decode_request, decode_response at every (key, version), decode_version_prefixed, and the
    tolerant inspect_request/inspect_response when this package has them."""
    out = [Target("request", g.decode_request)]
    for key, info in sorted(g.REGISTRY.items()):
        for v in info.response.VALID_VERSIONS:
            out.append(Target(f"response:{key}:v{v}", _response_call(key, v)))
    for name, cls in sorted(g.MESSAGES.items()):
        if getattr(cls, "API_KEY", None) is None and name not in (
            "RequestHeader",
            "ResponseHeader",
        ):
            out.append(Target(f"prefixed:{name}", _prefixed_call(cls)))
    if hasattr(g, "inspect_request"):
        out.append(Target("inspect_request", g.inspect_request, tolerant=True))
        for key, info in sorted(g.REGISTRY.items()):
            for v in info.response.VALID_VERSIONS:
                out.append(
                    Target(f"inspect_response:{key}:v{v}", _inspect_response_call(key, v), True)
                )
    return out


class _NeverRaised(Exception):
    """The records target's error family: records turns bad bytes into batch statuses, so any
    exception at all out of it is a crash."""


# The decompression cap for the records target: small, so a compression bomb hits it quickly
# and a decode's traced allocation stays within the runner's limit.
RECORDS_CAP = 256 << 10


def _records_call(data: bytes) -> Any:
    from kwire import records  # imported here: the message targets need only the standard library

    batches = records.decode_records(data, max_decompressed=RECORDS_CAP)
    for b in batches:
        if b.status not in records.STATUSES or (b.status == records.OK) != (b.error is None):
            raise AssertionError(f"batch status {b.status!r} with error {b.error!r}")
    for _ in records.rows_to_arrow(records.iter_rows(data, max_decompressed=RECORDS_CAP)):
        pass
    return batches


def records_targets() -> list[Target]:
    """A records field (what Produce and Fetch carry) through records.decode_records and the
    OUT/records row path: every batch gets a known status, nothing raises."""
    return [Target("records", _records_call, kwire_error=_NeverRaised, decode_error=_NeverRaised)]


def all_targets() -> list[Target]:
    return message_targets() + head_targets() + frame_targets() + records_targets()


def run_one(target: Target, data: bytes) -> str:
    """Runs one input; returns 'ok' or the error kind; raises Crash or Violation."""
    try:
        result = target.call(data)
    except target.kwire_error as e:
        if target.tolerant:
            raise Violation(target.name, data, e, "a tolerant inspect_* call raised") from None
        problems = contract_problems(e, data, target.decode_error)
        if problems:
            raise Violation(target.name, data, e, "; ".join(problems)) from None
        return kind_of(e)
    except Exception as e:  # noqa: BLE001 - the whole point: nothing else may escape
        raise Crash(target.name, data, e) from None
    if target.tolerant:
        error = result.error
        if error is None:
            return "ok"
        if not isinstance(error, target.kwire_error):
            raise Violation(target.name, data, None, f"report.error is {type(error).__name__}")
        problems = contract_problems(error, data, target.decode_error)
        if problems:
            raise Violation(target.name, data, error, "; ".join(problems))
        return "report " + kind_of(error)
    return "ok"
