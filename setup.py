"""The compiled modules of kwire's wheel (everything else is in pyproject.toml).

`python -m build` (or `pip wheel .`) compiles the committed Cython sources with the build backend:
the codecs' twins (generated/_native/kwire_native_*.pyx, placed beside the generated package,
which loads them by path with a check that each was built from exactly its source), the records
loop (kwire.records._compiled) and the Spark column builder (kwire.spark._columns). The same
list serves `make native` (scripts/build_native.py: built in place, in parallel, incrementally).

- KWIRE_PURE_PYTHON=1 at build time gives a pure-Python wheel (any platform; slower decoding).
- An editable install (`pip install -e .`, what `make setup` does) compiles nothing: `make
  native` builds in place, where the editable install finds the modules.
- A wheel built in a checkout where `make native` already built a module from the same source
  (its .so newer than its .pyx and .pxd) copies that module instead of compiling it again.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
NATIVE = "generated/_native"
COMPILE_ARGS = ["-O2", "-g0", "-Wno-unused-function"]
# Readers of structs met only in tagged fields are never called: -Wno-unused-function.


def _pure() -> bool:
    return os.environ.get("KWIRE_PURE_PYTHON", "") not in ("", "0")


def extension_sources() -> list[tuple[str, str]]:
    """(module name, .pyx path relative to the root) of every compiled module.

    The codecs' modules are top level (kwire_native_<module>) because each cimports the shared
    runtime by that name; they are files inside generated/_native, never top-level packages of
    site-packages (generated._runtime loads them by path)."""
    native = sorted((ROOT / NATIVE).glob("kwire_native_*.pyx"))
    out = [(p.stem, p.relative_to(ROOT).as_posix()) for p in native]
    out.append(("kwire.records._compiled", "kwire/records/_compiled.pyx"))
    out.append(("kwire.spark._columns", "kwire/spark/_columns.pyx"))
    return out


def _depends(pyx: str) -> list[Path]:
    files = [ROOT / pyx]
    if pyx.startswith(NATIVE):
        files += sorted((ROOT / NATIVE).glob("*.pxd"))
    return files


class BuildExt(build_ext):
    """build_ext that places the codecs' modules in generated/_native, compiles in parallel, and
    reuses a module `make native` built in place from the same sources."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def get_ext_fullpath(self, ext_name: str) -> str:
        if ext_name.startswith("kwire_native_"):
            base = ROOT if self.inplace else Path(self.build_lib)
            return str(base / NATIVE / self.get_ext_filename(ext_name))
        return str(super().get_ext_fullpath(ext_name))

    def _get_inplace_equivalent(self, build_py: Any, ext: Any) -> tuple[str, str]:
        if ext.name.startswith("kwire_native_"):
            filename = self.get_ext_filename(ext.name)
            return str(ROOT / NATIVE / filename), str(Path(self.build_lib) / NATIVE / filename)
        return super()._get_inplace_equivalent(build_py, ext)  # type: ignore[no-any-return]

    def _in_place(self, ext_name: str) -> Path:
        if ext_name.startswith("kwire_native_"):
            return ROOT / NATIVE / self.get_ext_filename(ext_name)
        return ROOT / self.get_ext_filename(ext_name)

    def build_extension(self, ext: Any) -> None:
        if not self.inplace and not self.force:
            built = self._in_place(ext.name)
            sources: list[Path] = getattr(ext, "kwire_sources", [])
            if (
                built.exists()
                and sources
                and all(built.stat().st_mtime >= s.stat().st_mtime for s in sources)
            ):
                target = Path(self.get_ext_fullpath(ext.name))
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(built, target)
                return
        super().build_extension(ext)


def extensions() -> list[Any]:
    if _pure() or "editable_wheel" in sys.argv or "sdist" in sys.argv or "egg_info" in sys.argv:
        return []
    from Cython.Build import cythonize

    modules = [
        Extension(name, [pyx], extra_compile_args=COMPILE_ARGS) for name, pyx in extension_sources()
    ]
    built = cythonize(
        modules,
        nthreads=os.cpu_count() or 1,
        quiet=True,
        compiler_directives={"language_level": 3},
    )
    by_name = dict(extension_sources())
    for ext in built:  # cythonize keeps each Extension's compile arguments
        ext.kwire_sources = _depends(by_name[ext.name])
    return list(built)


if __name__ == "__main__":
    setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
