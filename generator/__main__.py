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
    parser.add_argument(
        "-o",
        "--output",
        "--out",
        dest="out",
        type=Path,
        help="output package directory (default: generated/)",
    )
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
    return run_compiler(args.inputs, args.out, not args.no_format, not args.no_native, args.quiet)


def run_compiler(
    inputs: list[Path], out: Path | None, format: bool, native: bool, quiet: bool
) -> int:
    """Compiles `inputs` (default: a checkout's schemas/) into `out` (default: its generated/);
    0 done, 1 a schema has problems (each printed, nothing written), 2 nothing to compile."""
    if not inputs:
        if not (ROOT / "schemas").is_dir():
            print(
                "kwire generate: no schemas given, and this is not a kwire checkout with schemas/: "
                "give SCHEMA_DIR_OR_FILE... -o OUT_DIR",
                file=sys.stderr,
            )
            return 2
        inputs = [ROOT / "schemas"]
        out = out or ROOT / "generated"
    if out is None:
        print(
            "kwire generate: -o/--output DIR is required when schema paths are given",
            file=sys.stderr,
        )
        return 2
    started = time.perf_counter()
    try:
        files = compile_schemas(inputs, format=format, native_target=native)
    except SchemaError as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        print(f"{len(e.problems)} problem(s); nothing was written", file=sys.stderr)
        return 1
    write_package(files, out)
    if not quiet:
        took = time.perf_counter() - started
        modules = [n for n in files if "/" not in n and n not in ("__init__.py", "_runtime.py")]
        compiled = [n for n in files if n.endswith(".pyx")]
        print(
            f"compiled {len(modules)} schemas into {out} in {took:.1f}s"
            + (
                f" (and {len(compiled)} compiled-target sources in {out / '_native'})"
                if compiled
                else ""
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
