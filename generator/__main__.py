"""`python -m generator [SCHEMA_DIR_OR_FILE ...] --out DIR`: compiles schemas into a package."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .errors import SchemaError
from .render import compile_schemas, write_package

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m generator",
        description="Compile Kafka-dialect JSON message schemas into a Python codec package.",
    )
    parser.add_argument(
        "inputs", nargs="*", type=Path, help="schema files or directories (default: schemas/)"
    )
    parser.add_argument("--out", type=Path, help="output package directory (default: generated/)")
    parser.add_argument(
        "--no-format", action="store_true", help="skip black (faster; for throwaway output)"
    )
    parser.add_argument(
        "--no-native",
        action="store_true",
        help="skip the compiled target's Cython sources (_native/)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    args = parser.parse_args(argv)
    inputs = args.inputs or [ROOT / "schemas"]
    out = args.out or (ROOT / "generated" if not args.inputs else None)
    if out is None:
        parser.error("--out is required when schema paths are given")
    started = time.perf_counter()
    try:
        files = compile_schemas(inputs, format=not args.no_format, native_target=not args.no_native)
    except SchemaError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        print(f"{len(e.problems)} problem(s); nothing was written", file=sys.stderr)
        return 1
    write_package(files, out)
    if not args.quiet:
        took = time.perf_counter() - started
        modules = [n for n in files if "/" not in n and n not in ("__init__.py", "_runtime.py")]
        native = [n for n in files if n.endswith(".pyx")]
        print(
            f"compiled {len(modules)} schemas into {out} in {took:.1f}s"
            + (
                f" (and {len(native)} compiled-target sources in {out / '_native'})"
                if native
                else ""
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
