"""Build, remove or report the compiled build of `speedups.MODULES`.

    python -m speedups build     compile them with mypyc (a C compiler, Python's headers and mypy needed)
    python -m speedups clean     remove the compiled build: pure Python from then on
    python -m speedups status    say which build a new process would use, and why
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import speedups


class BuildError(Exception):
    """The compiled build cannot be made here; the message says what is missing."""


def python_headers() -> Path:
    """This interpreter's Python.h, which compiling an extension needs."""
    return Path(sysconfig.get_paths()["include"]) / "Python.h"


def check_tools() -> str:
    """mypy's version, after checking that a C compiler and this interpreter's headers are present."""
    try:
        import mypy.version
        import mypyc.build  # noqa: F401 (what compiles)
    except ImportError as exc:
        raise BuildError(f"mypy is not installed ({exc}): pip install -e '.[speedups]'") from None
    headers = python_headers()
    if not headers.exists():
        raise BuildError(f"no {headers}: install this Python's headers (Debian: apt-get install python3-dev)")
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        raise BuildError(f"no C compiler '{compiler}' on PATH (Debian: apt-get install gcc)")
    return mypy.version.__version__


@contextlib.contextmanager
def _working_directory(path: Path):
    """Run the block in `path` (mypyc names modules by their paths from there)."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def clean() -> list[Path]:
    """Remove every compiled file of the build, those of modules whose source is gone, and the
    stamp; return what was removed."""
    removed = [path for path in speedups.compiled_files() if path.exists()] + speedups.orphaned_files()
    removed += [speedups.STAMP] if speedups.STAMP.exists() else []
    for path in removed:
        path.unlink()
    return removed


def build(verbose: bool = False) -> float:
    """Compile `MODULES` in place and write the stamp; return the seconds it took."""
    mypy_version = check_tools()
    from mypyc.build import mypycify
    from setuptools import Distribution
    clean()
    start = time.monotonic()
    digests = speedups.source_digests()                     # what is compiled, read before compiling
    with tempfile.TemporaryDirectory(prefix="speedups-") as tmp, _working_directory(speedups.ROOT):
        paths = [str(speedups.source_path(m).relative_to(speedups.ROOT)) for m in speedups.MODULES]
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(sys.stdout if verbose else log):
                # one group: one C unit and one library (in this package), so that calls between the
                # modules are direct C calls the compiler may inline (a group per module calls
                # through tables: about 12 % more instructions per run, docs/htsim.md "A ninth round")
                extensions = mypycify(["--follow-imports=silent", f"--cache-dir={tmp}/mypy", *paths],
                                      group_name=speedups.LIBRARY_GROUP, target_dir=os.path.join(tmp, "c"))
                dist = Distribution({"name": "speedups", "ext_modules": extensions})
                dist.verbose = int(verbose)
                command = dist.get_command_obj("build_ext")
                command.inplace, command.parallel = True, os.cpu_count() or 1
                command.build_temp = command.build_lib = tmp      # nothing left in the checkout but the results
                dist.run_command("build_ext")
        except SystemExit as exc:                    # mypyc exits on a type error, the compiler on a failure
            raise BuildError(f"mypyc failed (exit {exc.code}):\n{log.getvalue().strip()}") from None
        except Exception as exc:                     # setuptools' CompileError and the like
            raise BuildError(f"compiling failed: {exc}\n{log.getvalue().strip()}") from None
    speedups.STAMP.write_text(json.dumps({"mypy": mypy_version, "python": sys.version.split()[0], "sources": digests,
                                          "compiled": speedups.compiled_stats()}, indent=1) + "\n")
    return time.monotonic() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speedups", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("build", "clean", "status"))
    parser.add_argument("-v", "--verbose", action="store_true", help="show mypyc's and the compiler's output")
    options = parser.parse_args(argv)
    if options.action == "clean":
        removed = clean()
        print(f"speedups: removed {len(removed)} files; pure Python from now on")
    elif options.action == "build":
        print(f"speedups: compiling {len(speedups.MODULES)} modules with mypyc ...", flush=True)
        try:
            seconds = build(options.verbose)
        except BuildError as exc:
            print(f"speedups: error: {exc}", file=sys.stderr)
            return 1
        print(f"speedups: compiled in {seconds:.0f} s: {speedups.inspect_build()}")
    else:
        print(f"speedups: a new process would use the {speedups.inspect_build()} build")
    return 0


if __name__ == "__main__":
    sys.exit(main())
