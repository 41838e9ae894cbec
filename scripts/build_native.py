"""Builds the compiled modules in place: generated/_native/*.pyx -> extension modules beside
them, kwire/records/_compiled.pyx and kwire/spark/_columns.pyx -> modules of their packages.

    python scripts/build_native.py [--jobs N] [--force]

`make native` (part of `make setup`) runs it; the list of modules and how they are compiled is
setup.py's, the same the wheel is built with. Cython turns each source into C, gcc compiles them
(-O2, no debug info, N in parallel); modules whose sources did not change are not rebuilt. The
pure-Python package works without any of it: generated.BACKEND says which readers are in use.
"""

from __future__ import annotations

import argparse
import os
import subprocess
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
        import Cython  # noqa: F401
        import setuptools  # noqa: F401
    except ImportError as e:
        print(f"build_native: {e.name} is missing (pip install cython setuptools)", file=sys.stderr)
        return 1
    sources = sorted(NATIVE.glob("*.pyx"))
    if not sources:
        print("build_native: no sources in generated/_native (run make generate)", file=sys.stderr)
        return 1
    started = time.monotonic()
    print(f"build_native: {len(sources) + 2} modules, {args.jobs} compile job(s)", flush=True)
    command = [sys.executable, "setup.py", "build_ext", "--inplace", "--parallel", str(args.jobs)]
    if args.force:
        command.append("--force")
    env = {**os.environ, "KWIRE_PURE_PYTHON": ""}
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.stderr.write((result.stdout + result.stderr)[-4000:])
        print(f"build_native: the build failed (exit {result.returncode})", file=sys.stderr)
        return 1
    built = len(list(NATIVE.glob("kwire_native_*.so")))
    built += len(list((ROOT / "kwire").glob("*/_*.so")))
    print(f"build_native: {built} compiled modules in place ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
