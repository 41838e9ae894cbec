"""The wire plan: for each struct and version, the exact sequence of reads and writes.

Every protocol decision (compact or classic lengths, nullability per version, absent fields and
their defaults, tagged sections, fused fixed-width runs) is made here, so the templates only print.
Versions whose plans are identical share one decode and one encode function.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from .model import FIXED, STRUCT_DEFAULT, Field, Message, Struct

# Local names the generated functions use for themselves; a field whose Python name is one of these
# gets a trailing underscore as a local variable.
RESERVED_LOCALS = {
    *("data", "pos", "f", "o", "out", "n", "tags", "tag", "size", "end", "e", "b", "s", "start"),
}


@dataclass
class Step:
    """One field (or a run of fixed-width fields) in wire order."""

    kind: str  # "fixed" | "value" | "absent"
    fields: tuple[Field, ...]
    reader: str = ""  # runtime reader or nested decode function
    writer: str = ""
    read_arg: str = ""  # element reader or nested decoder handed to an array/struct helper
    write_arg: str = ""
    fmt: str = ""  # struct format of a fixed run
    const: str = ""  # name of the precompiled struct.Struct that reads a fixed run
    wconst: str = ""  # ... and the one that writes it (bools as "B", which rejects non-integers)
    width: int = 0
    check: str = ""  # encode: Python test that is true when an absent field holds a non-default
    child: tuple[Struct, int] | None = None
    # The fast path's form of a value: "string" / "bytes" (inlined, with the common 1-byte
    # compact length or 2/4-byte classic length), "struct", "struct_array" (an inlined loop), or
    # "call" (the runtime reader/writer, which the fast path shares with the checked one).
    fast: str = "call"
    compact: bool = False
    nullable: bool = False
    # A struct_array whose element codec the fast path prints inside its loop: no call per element.
    inline: Codec | None = None

    @property
    def field(self) -> Field:
        return self.fields[0]


@dataclass
class TaggedStep:
    tag: int
    field: Field
    reader: str
    writer: str
    read_arg: str
    write_arg: str
    check: str  # Python test: true when the value must be written
    child: tuple[Struct, int] | None = None
    nondefault: str = ""  # the value half of check: true when the value is not the default


@dataclass
class Codec:
    """The decode and encode functions of one struct for a group of versions."""

    struct: Struct
    class_name: str
    versions: list[int]
    flexible: bool
    steps: list[Step]
    tagged: list[TaggedStep]
    invalid_tags: list[int]  # known tags of the struct that this version must reject
    known_tags: list[int]
    decode_name: str = ""
    encode_name: str = ""
    # A message's head: its leading steps, up to its first array or struct. Reading only these
    # serves filters and column pruning over many frames; `head_skipped` are the fields the head
    # leaves at their defaults (the array or struct, what follows it, the tagged fields and
    # those absent in this version), in schema order. None
    # for nested structs and for versions with no array or struct (read whole: just as cheap).
    head: list[Step] | None = None
    head_skipped: list[Field] = field(default_factory=list)
    # Codecs whose heads read alike share one head function, printed by the first of them:
    # head_name names it; head_versions (on that first codec) are all the versions it serves.
    head_name: str = ""
    head_versions: list[int] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        """No arrays of structs and no known tagged fields: the fast path can print this codec
        inside its parent's loop without any local of its own but `n` and `end`."""
        return not self.tagged and all(s.fast != "struct_array" for s in self.steps)

    @property
    def head_fields(self) -> list[Field]:
        """The fields a head read gives their wire values (or, absent here, their defaults)."""
        return [f for s in self.head or [] for f in s.fields]

    @property
    def version_text(self) -> str:
        return ", ".join(_ranges(self.versions))

    @property
    def head_version_text(self) -> str:
        return ", ".join(_ranges(self.head_versions))


def _ranges(versions: list[int]) -> list[str]:
    out: list[str] = []
    start = prev = versions[0]
    for v in [*versions[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(f"v{start}" if start == prev else f"v{start}-{prev}")
        if v is not None:
            start = prev = v
    return out


def local_name(f: Field) -> str:
    return f.attr + "_" if f.attr in RESERVED_LOCALS else f.attr


def default_source(f: Field, class_names: dict[str, str]) -> str:
    """Python source for a field's default value."""
    d = f.default
    if d is STRUCT_DEFAULT:
        assert f.struct is not None
        return f"{class_names[f.struct.name]}()"
    if isinstance(d, list):
        return "[]"
    if isinstance(d, uuid.UUID):
        return "ZERO_UUID" if d.int == 0 else f"_UUID(int={d.int:#x})"
    if isinstance(d, bytes):
        return 'b""'
    return repr(d)


def non_default_check(f: Field, value: str, class_names: dict[str, str]) -> str:
    """True when `value` differs from the field's default (Kafka's generateNonDefaultValueCheck)."""
    kind = f.type.kind
    if kind == "records":
        return f"{value} is not None"
    if f.default is None:
        return f"{value} is not None"
    if kind in ("array", "bytes"):
        if not f.ever_nullable:
            return f"len({value}) != 0"
        return f"({value} is None or len({value}) != 0)"
    if kind in ("string", "struct", "uuid"):
        test = f"{value} != {default_source(f, class_names)}"
        return f"({value} is None or {test})" if f.ever_nullable else test
    return f"{value} != {default_source(f, class_names)}"


def type_hint(f: Field, class_names: dict[str, str]) -> str:
    def base(t: Any) -> str:
        if t.kind == "array":
            return f"list[{base(t.element)}]"
        if t.kind == "struct":
            return class_names[t.struct_name]
        return {
            "bool": "bool",
            "float64": "float",
            "uuid": "_UUID",
            "string": "str",
            "bytes": "bytes",
            "records": "bytes",
        }.get(t.kind, "int")

    hint = base(f.type)
    if f.ever_nullable or f.default is None:
        hint += " | None"
    return hint


class Planner:
    def __init__(self, message: Message):
        self.message = message
        self.class_names = {s.name: s.name for s in message.structs}
        self.class_names[message.name] = message.name
        self.signatures: dict[tuple[int, int], Any] = {}
        self.steps: dict[tuple[int, int], tuple[list[Step], list[TaggedStep], list[int]]] = {}
        self.requested: dict[int, tuple[Struct, set[int]]] = {}
        self.fixed_formats: dict[str, str] = {}
        self.runtime: set[str] = set()

    # -- helpers ------------------------------------------------------------------------------

    def compact(self, f: Field, v: int) -> bool:
        flexible = f.flexible if f.flexible is not None else self.message.flexible
        return v in flexible

    def use(self, *names: str) -> None:
        self.runtime.update(n for n in names if n and n[0] not in "_@")

    def fixed_const(self, fmt: str) -> str:
        name = "_S_" + fmt.replace("?", "o")
        self.fixed_formats[name] = ">" + fmt
        return name

    def value_codec(self, f: Field, v: int, compact: bool, nullable: bool, tagged: bool) -> tuple:
        """(reader, writer, read_arg, write_arg, child) for one value of field f at version v.

        "@" stands for the nested struct's decode/encode function, resolved once all are named.
        """
        kind = f.type.kind
        prefix = ("compact_" if compact else "") + ("nullable_" if nullable else "")
        if kind in FIXED or kind == "uuid":
            return f"r_{kind}", f"w_{kind}", "", "", None
        if kind == "string":
            return f"r_{prefix}string", f"w_{prefix}string", "", "", None
        if kind in ("bytes", "records"):
            return f"r_{prefix}bytes", f"w_{prefix}bytes", "", "", None
        if kind == "struct":
            assert f.struct is not None
            child = (f.struct, v)
            if nullable:
                marker = "tagged_nullable_struct" if tagged else "nullable_struct"
                return f"r_{marker}", f"w_{marker}", "@", "@", child
            return "@", "@", "", "", child
        assert kind == "array" and f.type.element is not None
        elem = f.type.element
        if elem.kind == "struct":
            assert f.struct is not None
            return f"r_{prefix}array", f"w_{prefix}array", "@", "@", (f.struct, v)
        if elem.kind in FIXED:
            fmt = repr(FIXED[elem.kind][0])
            return f"r_{prefix}array", f"w_{prefix}array", fmt, fmt, None
        eprefix = "compact_" if compact else ""
        if elem.kind == "string":
            earg = f"{eprefix}string"
        elif elem.kind in ("bytes", "records"):
            earg = f"{eprefix}bytes"
        else:
            earg = elem.kind
        self.use(f"r_{earg}", f"w_{earg}")
        return f"r_{prefix}array", f"w_{prefix}array", f"r_{earg}", f"w_{earg}", None

    def fast_form(self, step: Step, f: Field, v: int) -> None:
        """Decides how the fast path reads and writes one value (see Step.fast)."""
        step.compact, step.nullable = self.compact(f, v), f.is_nullable(v)
        kind = f.type.kind
        if kind in ("string", "bytes"):
            step.fast = kind
        elif kind == "struct" and not step.nullable:
            step.fast = "struct"
        elif kind == "array" and step.read_arg == "@" and not step.nullable:
            step.fast = "struct_array"
        else:
            return
        if step.fast in ("string", "bytes"):
            self.use(
                f"r_{'compact_' if step.compact else ''}{'nullable_' if step.nullable else ''}{kind}"
            )
        if not step.compact and step.fast in ("string", "struct_array"):
            self.fixed_const("h" if step.fast == "string" else "i")
        if not step.compact and step.fast == "bytes":
            self.fixed_const("i")
        if step.compact and step.fast == "struct_array":
            self.use("r_uvarint", "w_uvarint")

    # -- planning -----------------------------------------------------------------------------

    def request(self, struct: Struct, v: int) -> Any:
        """Plans struct at version v (and its children); returns the plan's signature."""
        key = (id(struct), v)
        if key in self.signatures:
            return self.signatures[key]
        self.requested.setdefault(id(struct), (struct, set()))[1].add(v)
        flexible = self.message.flexible_at(v)
        steps: list[Step] = []
        run: list[Field] = []
        sig: list[Any] = [flexible]

        def flush() -> None:
            if not run:
                return
            fmt = "".join(FIXED[f.type.kind][0] for f in run)
            width = sum(FIXED[f.type.kind][1] for f in run)
            steps.append(
                Step(
                    "fixed",
                    tuple(run),
                    fmt=fmt,
                    const=self.fixed_const(fmt),
                    wconst=self.fixed_const(fmt.replace("?", "B")),
                    width=width,
                )
            )
            sig.append(("fixed", tuple(f.name for f in run), fmt))
            run.clear()

        for f in struct.fields:
            if not f.present(v):
                flush()
                check = "" if f.ignorable else non_default_check(f, f"o.{f.attr}", self.class_names)
                steps.append(Step("absent", (f,), check=check))
                sig.append(("absent", f.name, bool(check)))
                continue
            if f.is_tagged(v):
                continue
            if f.type.kind in FIXED:
                run.append(f)
                continue
            flush()
            reader, writer, rarg, warg, child = self.value_codec(
                f, v, self.compact(f, v), f.is_nullable(v), tagged=False
            )
            child_sig = self.request(*child) if child else None
            self.use(reader, writer)
            step = Step("value", (f,), reader, writer, rarg, warg, child=child)
            self.fast_form(step, f, v)
            steps.append(step)
            sig.append(("value", f.name, reader, rarg, child_sig))
        flush()

        tagged: list[TaggedStep] = []
        invalid: list[int] = []
        known = [f.tag for f in struct.tagged_fields if f.tag is not None]
        if flexible:
            for f in struct.tagged_fields:
                assert f.tag is not None
                if not f.is_tagged(v):
                    invalid.append(f.tag)
                    continue
                reader, writer, rarg, warg, child = self.value_codec(
                    f, v, True, f.is_nullable(v), tagged=True
                )
                child_sig = self.request(*child) if child else None
                self.use(reader, writer)
                # Written when non-default, and also when the decoded wire had it (a peer wrote
                # the default explicitly): `order` is the decoded object's wire_tags.
                nondefault = non_default_check(f, f"o.{f.attr}", self.class_names)
                check = f"{nondefault} or (order is not None and {f.tag} in order)"
                tagged.append(
                    TaggedStep(f.tag, f, reader, writer, rarg, warg, check, child, nondefault)
                )
                sig.append(("tag", f.tag, f.name, reader, rarg, child_sig))
            sig.append(("invalid", tuple(invalid)))
        signature = tuple(sig)
        self.signatures[key] = signature
        self.steps[key] = (steps, tagged, invalid)
        return signature

    def codecs(self) -> list[Codec]:
        """All codecs of the message, children before parents, with function names resolved."""
        for v in self.message.valid:
            self.request(self.message.root, v)
        structs = self.message.structs + [self.message.root]
        names: dict[tuple[int, Any], tuple[str, str]] = {}
        out: list[Codec] = []
        for struct in structs:
            if id(struct) not in self.requested:
                continue
            versions = sorted(self.requested[id(struct)][1])
            groups: dict[Any, list[int]] = {}
            for v in versions:
                groups.setdefault(self.signatures[(id(struct), v)], []).append(v)
            for sig, group in groups.items():
                cls = self.class_names[struct.name]
                first = group[0]
                names[(id(struct), sig)] = (f"_decode_{cls}_v{first}", f"_encode_{cls}_v{first}")
                steps, tagged, invalid = self.steps[(id(struct), first)]
                known = [f.tag for f in struct.tagged_fields if f.tag is not None]
                codec = Codec(struct, cls, group, sig[0], steps, tagged, invalid, known)
                codec.decode_name, codec.encode_name = names[(id(struct), sig)]
                out.append(codec)
        heads: dict[Any, Codec] = {}  # head signature -> the codec that prints that head
        for codec in out:
            if codec.struct is not self.message.root or not _plan_head(codec):
                continue
            # What the head reads from the wire, and which fields it sets to their defaults
            # (absent before the cut or skipped after it): the same pair, the same code.
            sig = self.signatures[(id(codec.struct), codec.versions[0])]
            reads = tuple(e for e in sig[1 : 1 + len(codec.head or [])] if e[0] != "absent")
            read = {f.name for s in codec.head or [] if s.kind != "absent" for f in s.fields}
            key = (reads, tuple(f.name for f in codec.struct.fields if f.name not in read))
            owner = heads.setdefault(key, codec)
            codec.head_name = owner.decode_name.replace("_decode_", "_head_", 1)
            owner.head_versions = sorted(owner.head_versions + codec.versions)
        codec_of = {(c.struct.name, c.decode_name): c for c in out}
        # Resolve references to nested codecs.
        for codec in out:
            linked: list[Step | TaggedStep] = [*codec.steps, *codec.tagged]
            for step in linked:
                if step.child is None:
                    continue
                child_struct, v = step.child
                dname, ename = names[(id(child_struct), self.signatures[(id(child_struct), v)])]
                if step.reader == "@":
                    step.reader, step.writer = dname, ename
                else:
                    step.read_arg, step.write_arg = dname, ename
                if isinstance(step, Step) and step.fast == "struct_array":
                    element = codec_of[(child_struct.name, dname)]
                    if element.is_leaf:
                        step.inline = element
        return out

    def version_table(self, codecs: list[Codec]) -> list[tuple[int, str, str]]:
        root = [c for c in codecs if c.struct is self.message.root]
        table = []
        for c in root:
            for v in c.versions:
                table.append((v, c.decode_name, c.encode_name))
        return sorted(table)

    def head_table(self, codecs: list[Codec]) -> list[tuple[int, str, tuple[str, ...]]]:
        """(version, head reader, attributes it reads) for the message versions with a head."""
        table = []
        for c in codecs:
            if c.struct is self.message.root and c.head is not None:
                attrs = tuple(f.attr for f in c.head_fields)
                for v in c.versions:
                    table.append((v, c.head_name, attrs))
        return sorted(table)


def _plan_head(codec: Codec) -> bool:
    """Cuts a message codec's steps at its first array or struct (see Codec.head); False when
    it has none."""
    for i, step in enumerate(codec.steps):
        if step.kind == "value" and step.field.type.kind in ("array", "struct"):
            codec.head = codec.steps[:i]
            read = {id(f) for s in codec.head for f in s.fields}
            codec.head_skipped = [f for f in codec.struct.fields if id(f) not in read]
            return True
    return False


@dataclass
class ModuleView:
    """Everything the module template prints for one schema file."""

    message: Message
    codecs: list[Codec]
    versions: list[tuple[int, str, str]]
    heads: list[tuple[int, str, tuple[str, ...]]]
    fixed_formats: dict[str, str]
    runtime: list[str]
    class_names: dict[str, str]
    classes: list[Struct] = field(default_factory=list)


def plan_message(message: Message) -> ModuleView:
    planner = Planner(message)
    codecs = planner.codecs()
    planner.use("DecodeError", "EncodeError", "ZERO_UUID")
    return ModuleView(
        message=message,
        codecs=codecs,
        versions=planner.version_table(codecs),
        heads=planner.head_table(codecs),
        fixed_formats=dict(sorted(planner.fixed_formats.items())),
        runtime=sorted(planner.runtime),
        class_names=planner.class_names,
        classes=message.structs + [message.root],
    )
