"""Builds the compiled readers: generated/_native/*.pyx (and the records loop,
records/_compiled.pyx) -> extension modules in generated/_native.

    python scripts/build_native.py [--jobs N] [--force]

`make setup` runs it (and `make generate` keeps the .pyx sources current). Cython turns each
module's sources into C, gcc compiles them (-O2, no debug info, N in parallel); modules whose
sources did not change are not rebuilt. The pure-Python package works without any of it:
generated.BACKEND says which readers are in use.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NATIVE = ROOT / "generated" / "_native"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--force", action="store_true", help="rebuild every module")
    args = parser.parse_args(argv)
    try:
        from Cython.Build import cythonize
        from setuptools import Extension, setup
    except ImportError as e:
        print(f"build_native: {e.name} is missing (pip install cython setuptools)", file=sys.stderr)
        return 1
    os.chdir(ROOT)
    sources = sorted(p.relative_to(ROOT).as_posix() for p in NATIVE.glob("*.pyx"))
    if not sources:
        print("build_native: no sources in generated/_native (run make generate)", file=sys.stderr)
        return 1
    started = time.monotonic()
    # Every module is top level (kwire_native_*), loaded from generated/_native by name; the
    # records loop (records/_compiled.pyx, hand-written: the record format is not a schema) is
    # built beside them so Spark's executors get it the same way.
    modules = [Extension(Path(s).stem, [s]) for s in sources]
    modules.append(Extension("kwire_native_records", ["records/_compiled.pyx"]))
    # The UDF pack's scalar columns straight from the decoded objects' slots (udfs/_columns.pyx).
    modules.append(Extension("kwire_native_columns", ["udfs/_columns.pyx"]))
    print(f"build_native: {len(modules)} modules, {args.jobs} compile job(s)", flush=True)
    extensions = cythonize(
        modules,
        nthreads=args.jobs,
        quiet=True,
        force=args.force,
        compiler_directives={"language_level": 3},
    )
    for ext in extensions:
        # -Wno-unused-function: readers of structs met only in tagged fields are never called.
        ext.extra_compile_args = ["-O2", "-g0", "-Wno-unused-function"]
    print(f"build_native: C sources ready ({time.monotonic() - started:.0f} s)", flush=True)
    log = io.StringIO()
    # Top-level modules (kwire_native_*): built straight into generated/_native.
    script = ["build_ext", "--build-lib", str(NATIVE), "--parallel", str(args.jobs)]
    if args.force:
        script.append("--force")
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            setup(name="kwire-native", ext_modules=extensions, script_args=script)
    except (SystemExit, Exception) as e:  # setuptools reports a failed compile by exiting
        sys.stderr.write(log.getvalue()[-4000:])
        print(f"build_native: the build failed ({e})", file=sys.stderr)
        return 1
    built = len(list(NATIVE.glob("kwire_native_*.so")))
    print(
        f"build_native: {built} compiled modules in generated/_native ({time.monotonic() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
