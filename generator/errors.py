"""Schema problems, reported as `file: json-path: problem` lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class SchemaProblem:
    file: str
    path: str  # e.g. "fields[4].nullableVersions"; "" for the file as a whole
    problem: str

    def __str__(self) -> str:
        return f"{self.file}: {self.path or '$'}: {self.problem}"


class SchemaError(Exception):
    """One or more schema problems; nothing was generated."""

    def __init__(self, problems: Iterable[SchemaProblem]):
        self.problems = sorted(set(problems), key=lambda p: (p.file, p.path, p.problem))
        super().__init__("\n".join(str(p) for p in self.problems))


def json_path(parts: Iterable[object]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
