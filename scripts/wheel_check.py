"""The wheel as a user gets it: `python scripts/wheel_check.py DIST` (`make wheel-check`).

Installs DIST's kwire wheel with its dependencies into a fresh venv in a temporary directory
outside the checkout, then, from another directory outside it, checks what a user would:

- the wheel puts only kwire, generator and generated at the top of site-packages, and the sdist
  beside it carries the Cython sources it was compiled from;
- `generated.BACKEND` is "compiled" (the wheel carries the compiled modules built for this
  platform) and KWIRE_PURE_PYTHON=1 still gives the Python readers;
- `kwire --help` names the subcommands; `kwire decode` on a bundled capture writes requests,
  responses, records and groups, with compiled readers on the executors; `kwire groups` tells
  the story of the capture's group; `kwire report` writes the page.

Exits 0 when all of it holds, 1 with the failing step named otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "tests" / "data" / "capture" / "mock_group_classic.pcap"
GROUP = "g-classic"  # the group the capture script ran in that scenario (scripts/capture)


class Failed(Exception):
    pass


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> str:
    started = time.monotonic()
    shown = " ".join(Path(c).name if os.sep in c else c for c in cmd)
    print(f"wheel-check: $ {shown}", flush=True)
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise Failed(
            f"{shown} exited {result.returncode} after {time.monotonic() - started:.0f} s:\n"
            f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
        )
    return result.stdout + result.stderr


def check(dist: Path, keep: bool) -> None:
    wheels = sorted(dist.glob("kwire-*.whl"))
    sdists = sorted(dist.glob("kwire-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise Failed(f"{dist} should hold one kwire wheel and one sdist: {wheels + sdists}")
    wheel = wheels[0]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    if top != {"kwire", "generator", "generated"}:
        raise Failed(f"{wheel.name} installs {sorted(top)} at top level")
    compiled = [n for n in names if n.endswith(".so")]
    print(f"wheel-check: {wheel.name}: {len(names)} files, {len(compiled)} compiled modules")
    with tarfile.open(sdists[0]) as t:
        pyx = [n for n in t.getnames() if n.endswith(".pyx")]
        built = [n for n in t.getnames() if n.endswith((".so", ".c"))]
    if len(pyx) < 190 or built:
        raise Failed(f"{sdists[0].name}: {len(pyx)} .pyx sources, build output {built[:3]}")

    work = Path(tempfile.mkdtemp(prefix="kwire-wheel-check-"))
    try:
        venv = work / "venv"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.pop("KWIRE_PURE_PYTHON", None)
        base = getattr(sys, "_base_executable", sys.executable)
        run([base, "-m", "venv", str(venv)], work, env)
        py = str(venv / "bin" / "python")
        run([py, "-m", "pip", "install", "--quiet", str(wheel.resolve())], work, env)
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        elsewhere = work / "elsewhere"
        elsewhere.mkdir()
        shutil.copyfile(CAPTURE, elsewhere / CAPTURE.name)

        said = run(
            [py, "-c", "import generated, kwire; print(generated.BACKEND, kwire.__file__)"],
            elsewhere,
            env,
        )
        if not said.startswith("compiled ") or str(venv) not in said:
            raise Failed(f"the installed wheel: {said.strip()} (want compiled, from {venv})")
        pure = run(
            [py, "-c", "import generated; print(generated.BACKEND)"],
            elsewhere,
            {**env, "KWIRE_PURE_PYTHON": "1"},
        )
        if pure.strip() != "python":
            raise Failed(f"KWIRE_PURE_PYTHON=1 gave {pure.strip()!r}")
        helped = run(["kwire", "--help"], elsewhere, env)
        missing = [
            c for c in ("decode", "groups", "report", "capture", "generate") if c not in helped
        ]
        if missing:
            raise Failed(f"kwire --help does not name {missing}")

        said = run(["kwire", "decode", CAPTURE.name, "-o", "out", "--quiet"], elsewhere, env)
        if "readers on the executors: compiled" not in said:
            raise Failed(f"kwire decode did not run the compiled readers:\n{said[-2000:]}")
        out = elsewhere / "out"
        for table in ("frames.parquet", "requests", "responses", "records", "groups/generations"):
            if not (out / table).exists():
                raise Failed(f"kwire decode wrote no {table}")
        story = run(["kwire", "groups", "out"], elsewhere, env)
        if GROUP not in story:
            raise Failed(f"kwire groups does not tell {GROUP}'s story:\n{story[:2000]}")
        run(["kwire", "report", "out", "-o", "report.html"], elsewhere, env)
        page = (elsewhere / "report.html").read_text()
        if GROUP not in page or "<html" not in page.lower():
            raise Failed("kwire report wrote no page about the group")
        print(
            f"wheel-check: ok: installed outside the checkout, compiled readers, decode, groups "
            f"({story.count(chr(10))} lines) and report ({len(page) // 1024} kB)"
        )
    finally:
        if keep:
            print(f"wheel-check: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dist", type=Path, help="the directory python -m build wrote")
    parser.add_argument("--keep", action="store_true", help="keep the venv and outputs")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        check(args.dist, args.keep)
    except Failed as e:
        print(f"wheel-check: FAILED: {e}", file=sys.stderr)
        return 1
    print(f"wheel-check: done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
