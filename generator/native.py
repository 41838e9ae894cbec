"""The compiled target: each schema's fast readers as Cython, rendered from the same wire plan.

Presentation only, like render.py: the plan decided every read; this names the C expressions
and the Python objects the compiled module binds at install time.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from typing import Any

from .model import FIXED, INT_RANGES, Message
from .plan import Codec, plan_message
from .views import Obj, decorate, environment

NATIVE_FIXED = {
    "bool": "True if d[pos + {o}] else False",
    "int8": "<signed char>d[pos + {o}]",
    "int16": "_i16(d + pos + {o})",
    "uint16": "_u16(d + pos + {o})",
    "int32": "_i32(d + pos + {o})",
    "uint32": "_u32(d + pos + {o})",
    "int64": "_i64(d + pos + {o})",
    "float64": "_f64(d + pos + {o})",
}
_CALL = re.compile(r"^([A-Za-z_]\w*)\(\)$")
# Runtime helpers the compiled target has in C (kwire_native_common): name -> (compact, nullable).
_NATIVE_BYTES = {
    "r_bytes": (False, False),
    "r_nullable_bytes": (False, True),
    "r_compact_bytes": (True, False),
    "r_compact_nullable_bytes": (True, True),
}
_NATIVE_ARRAYS = {
    "r_array": (False, False),
    "r_nullable_array": (False, True),
    "r_compact_array": (True, False),
    "r_compact_nullable_array": (True, True),
}
# An array helper's element reader (its tail) -> the element kind _n_array reads.
_NATIVE_ELEMENTS = {
    "'b'": "_E_INT8",
    "'h'": "_E_INT16",
    "'i'": "_E_INT32",
    "'q'": "_E_INT64",
    "r_string": "_E_STRING",
    "r_compact_string": "_E_COMPACT_STRING",
    "r_uuid": "_E_UUID",
}
_NAME = re.compile(r"^[A-Za-z_]\w*$")


def _native(name: str) -> str:
    return name.replace("_decode_", "_native_", 1)


class _Names:
    def __init__(self, classes: set[str]) -> None:
        self.classes = classes
        self.py: set[str] = set()
        self.plans: set[str] = set()  # classes whose defaults the module makes (their plans kept)

    def default(self, source: str) -> str:
        """A field default's Python source as the compiled module spells it."""
        if source in ("[]", "{}"):
            return source
        m = _CALL.match(source)
        if m and m.group(1) in self.classes:
            # a fresh struct at its defaults, without __init__, from the plan install() kept
            self.plans.add(m.group(1))
            return f"_fresh_in(_PLAN_{m.group(1)})"
        try:
            value = ast.literal_eval(source)
        except ValueError:
            value = ...
        if value is not ... and isinstance(value, (int, float, str, bytes, bool, type(None))):
            return source
        if _NAME.match(source):
            self.py.add(source)
            return f"_py_{source}"
        call = source.split("(", 1)
        self.py.add(call[0])
        return f"_py_{call[0]}({call[1]}"

    def call(self, name: str) -> str:
        self.py.add(name)
        return f"_py_{name}"

    def tail(self, tail: str) -> str:
        """A runtime helper's extra argument (', arg' or ''): a name is bound, a literal kept."""
        arg = tail[2:]
        if not arg:
            return ""
        return ", " + (self.call(arg) if _NAME.match(arg) else arg)


_CALLED = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)(?=\()")
_BUILTINS = {"len"}


def _wnative(name: str) -> str:
    return name.replace("_encode_", "_wnative_", 1)


def _native_check(check: str, names: _Names) -> str:
    """An absent field's non-default test, with the Python module's names it calls bound."""
    check = _CALLED.sub(
        lambda m: m.group(1) if m.group(1) in _BUILTINS else names.call(m.group(1)), check
    )
    return re.sub(r"\bZERO_UUID\b", lambda m: names.call("ZERO_UUID"), check)


def _decorate_writer(codec: Codec, names: _Names, classes: dict[str, str]) -> None:
    codec.native_write_name = _wnative(codec.encode_name)  # type: ignore[attr-defined]
    for s in codec.steps:
        if s.kind == "fixed":
            out = []
            for f in s.fields:
                kind = f.type.kind
                low, high = INT_RANGES.get(kind, (0, 0))
                # C has no literal for -2**63: <stdint.h> names it.
                low_text = "INT64_MIN" if low == -(2**63) else str(low)
                out.append((f, kind, low_text, str(high), FIXED[kind][1]))
            s.native_wfixed = out  # type: ignore[attr-defined]
        elif s.kind == "absent":
            s.native_check = _native_nondefault(s.check, names) if s.check else ""  # type: ignore[attr-defined]
        elif s.fast == "struct":
            assert s.child is not None
            s.native_writer = _wnative(s.writer)  # type: ignore[attr-defined]
            s.native_child = classes[s.child[0].name]  # type: ignore[attr-defined]
        elif s.fast == "struct_array":
            assert s.child is not None
            s.native_writer = _wnative(s.write_arg)  # type: ignore[attr-defined]
            s.native_child = classes[s.child[0].name]  # type: ignore[attr-defined]
        elif s.fast == "call":
            _native_wcall(s, names, classes)
    for t in codec.tagged:
        # The value half of the writer's test: a body with a decoded tag order (wire_tags),
        # the other half, goes to Python before these are asked.
        t.native_wcheck = _native_nondefault(t.nondefault, names)  # type: ignore[attr-defined]


_DEFAULT_STRUCT = re.compile(r"^o\.(\w+) != (\w+)\(\)$")


def _native_nondefault(check: str, names: _Names) -> str:
    """A field's not-at-default test (a known tagged field to write, or a field the version
    lacks holding a value): a struct against its defaults in C, anything else as the Python
    writer spells it; true sends the body to the Python writer."""
    m = _DEFAULT_STRUCT.match(check)
    if m and m.group(2) in names.classes:
        return f"not _is_default(o.{m.group(1)}, {m.group(2)})"
    return _native_check(check, names)


def _native_wcall(s: Any, names: _Names, classes: dict[str, str]) -> None:
    """The writing side of _native_call: the C twin of a runtime writer, the loop or marker
    around a compiled struct writer, else the Python writer."""
    helper, tail = s.fast_writer, str(s.fast_write_tail)[2:]
    s.native_wexpr = s.native_wnullable = ""
    writers = {k.replace("r_", "w_", 1): v for k, v in _NATIVE_BYTES.items()}
    arrays = {k.replace("r_", "w_", 1): v for k, v in _NATIVE_ARRAYS.items()}
    elements = {k.replace("r_", "w_", 1): v for k, v in _NATIVE_ELEMENTS.items()}
    if helper == "w_uuid":
        s.native_wexpr = "_nw_uuid(b, v)"
    elif helper in writers:
        compact, nullable = writers[helper]
        s.native_wexpr = f"_nw_bytes(b, v, {compact}, {nullable})"
    elif helper in arrays and tail in elements:
        compact, nullable = arrays[helper]
        s.native_wexpr = f"_nw_array(b, v, {compact}, {nullable}, {elements[tail]})"
    elif (
        helper in ("w_nullable_array", "w_compact_nullable_array", "w_nullable_struct")
        and tail.startswith("_write_")
        and s.child is not None
    ):
        s.native_wnullable = "struct" if helper == "w_nullable_struct" else "array"
        s.native_writer = tail.replace("_write_", "_wnative_", 1)
        s.native_child = classes[s.child[0].name]
    if not (s.native_wexpr or s.native_wnullable):
        s.native_wcall = names.call(str(s.fast_writer))
        s.native_wcall_tail = names.tail(str(s.fast_write_tail))


def _decorate_native(codec: Codec, names: _Names) -> None:
    codec.native_name = _native(codec.decode_name)  # type: ignore[attr-defined]
    for s in codec.steps:
        if s.kind == "fixed":
            out, off = [], 0
            for f in s.fields:
                out.append((f, NATIVE_FIXED[f.type.kind].format(o=off)))
                off += FIXED[f.type.kind][1]
            s.native_fixed = out  # type: ignore[attr-defined]
        elif s.kind == "absent":
            s.native_default = names.default(s.default)  # type: ignore[attr-defined]
        elif s.fast == "struct":
            s.native_reader = _native(s.reader)  # type: ignore[attr-defined]
        elif s.fast == "struct_array":
            s.native_element = _native(s.read_arg)  # type: ignore[attr-defined]
        elif s.fast == "call":
            _native_call(s, names)
    for t in codec.tagged:
        t.native_default = names.default(t.default)  # type: ignore[attr-defined]


def _native_call(s: Any, names: _Names) -> None:
    """A value the plan reads through a runtime helper: its C twin where there is one
    (native_expr), the loop over a nullable array of structs or the marker of a nullable
    struct around the element's compiled reader (native_nullable), else the Python helper."""
    helper, tail = s.fast_reader, str(s.fast_read_tail)[2:]
    s.native_expr = s.native_nullable = ""
    if helper == "r_uuid":
        s.native_expr = "_n_uuid(d, n, &pos)"
    elif helper in _NATIVE_BYTES:
        compact, nullable = _NATIVE_BYTES[helper]
        s.native_expr = f"_n_bytes(d, n, &pos, {compact}, {nullable})"
    elif helper in _NATIVE_ARRAYS and tail in _NATIVE_ELEMENTS:
        compact, nullable = _NATIVE_ARRAYS[helper]
        s.native_expr = f"_n_array(d, n, &pos, {compact}, {nullable}, {_NATIVE_ELEMENTS[tail]})"
    elif helper in ("r_nullable_array", "r_compact_nullable_array") and tail.startswith("_read_"):
        s.native_nullable = "array"
        s.native_element = tail.replace("_read_", "_native_", 1)
    elif helper == "r_nullable_struct" and tail.startswith("_read_"):
        s.native_nullable = "struct"
        s.native_element = tail.replace("_read_", "_native_", 1)
    if not (s.native_expr or s.native_nullable):
        s.native_call = names.call(helper)
        s.native_call_tail = names.tail(str(s.fast_read_tail))


def native_source(message: Message, source: str, module: str) -> tuple[str, str]:
    """The compiled module's source and its key: a digest of that source, which the Python
    module carries too, so that only a build of exactly these readers is ever installed."""
    text = render_native(message, source, module)
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    return text.replace('KEY = ""', f'KEY = "{key}"', 1), key


def render_native(message: Message, source: str, module: str) -> str:
    view = plan_message(message)
    for codec in view.codecs:
        decorate(codec, view.class_names)
    classes = sorted({c.class_name for c in view.codecs})
    names = _Names(set(classes))
    for codec in view.codecs:
        _decorate_native(codec, names)
        _decorate_writer(codec, names, view.class_names)
    offsets: dict[str, list[str]] = {}
    for codec in view.codecs:
        attrs = offsets.setdefault(codec.class_name, [])
        for a in [f.attr for f in codec.struct.fields] + ["unknown_tags", "wire_tags"]:
            if a not in attrs:
                attrs.append(a)
    by_name = {c.decode_name: c for c in view.codecs}
    versions = []
    wversions = []
    for v, dec, enc in view.versions:
        py_fast = dec.replace("_decode_", "_read_", 1)
        py_write = enc.replace("_encode_", "_write_", 1)
        names.py.update((py_fast, py_write))
        native = by_name[dec].native_name  # type: ignore[attr-defined]
        versions.append((v, native, py_fast))
        wversions.append((v, native, py_fast, _wnative(enc), py_write))
    names.py.update(("decode_message", "_DECODERS", "_READERS"))
    py_names = sorted(names.py)
    context: dict[str, Any] = {
        "source": source,
        "module": module,
        "message_name": message.name,
        "classes": classes,
        "py_names": py_names,
        "py_globals": [f"_py_{n}" for n in py_names],
        "offsets": sorted(offsets.items()),
        "offset_globals": [f"_OFF_{c}_{a}" for c, attrs in sorted(offsets.items()) for a in attrs],
        "plans": sorted(names.plans),
        "plan_globals": [f"_PLAN_{c}" for c in sorted(names.plans)],
        "codecs": view.codecs,
        "versions": versions,
        "wversions": wversions,
    }
    template = environment().get_template("native.pyx.j2")
    return template.render(view=Obj(context))


def common_sources() -> dict[str, str]:
    here = Path(__file__).with_name("native")
    return {p.name: p.read_text() for p in sorted(here.glob("kwire_native_common.*"))}
