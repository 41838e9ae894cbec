"""kwire's wheel for the tests, and a Python with it installed as a user's would be.

The wheel is built from a copy of this checkout with the project's own build (setup.py; modules
`make native` already built from the same sources are copied, not compiled again), and installed
with pip into a new virtual environment. That environment sees the checkout's installed
libraries (pyspark, pyarrow, ...) through a path file, so nothing is downloaded; it does not see
the checkout's editable kwire (path files inside an added directory are not run), so `kwire`,
`generated` and `generator` come from the wheel alone.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# What the wheel is built from (a copy, so no build state is shared with the checkout or with
# another build running at the same time).
SOURCES = (
    "setup.py",
    "pyproject.toml",
    "MANIFEST.in",
    "README.md",
    "kwire",
    "generator",
    "generated",
)


def build_wheel(out: Path, timeout: float = 600) -> Path:
    """Builds kwire's wheel into `out` and returns its path. The sources are copied first (with
    their times, so modules `make native` built are reused, not compiled again)."""
    out.mkdir(parents=True, exist_ok=True)
    tree = out / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, tree / name, ignore=ignore)
        else:
            tree.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    result = subprocess.run(
        [
            sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
            "--quiet", "--wheel-dir", str(out), str(tree),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"pip wheel failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    wheels = sorted(out.glob("kwire-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def top_level(wheel: Path) -> set[str]:
    """The names the wheel puts at the top of site-packages (its .dist-info aside)."""
    with zipfile.ZipFile(wheel) as z:
        names = {n.split("/")[0] for n in z.namelist()}
    return {n for n in names if not n.endswith(".dist-info")}


def install(wheel: Path, venv: Path, timeout: float = 300) -> Path:
    """A new venv at `venv` with `wheel` installed (no dependencies: the checkout's libraries are
    visible through a path file); returns its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=timeout
    )
    python = venv / "bin" / "python"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
            "--no-deps", "--no-index", str(wheel),
        ],  # fmt: skip
        check=True,
        timeout=timeout,
        capture_output=True,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    libraries = sysconfig.get_paths()["purelib"]  # this interpreter's: pyspark, pyarrow, ...
    (Path(site) / "zz_checkout_libraries.pth").write_text(libraries + "\n")
    return python
