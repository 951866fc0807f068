"""Shared pytest fixtures: where the built strata binary is, and a scratch directory."""
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def strata_bin() -> pathlib.Path:
    """The strata binary under test: $STRATA_BIN, else build/bin/strata."""
    path = pathlib.Path(os.environ.get("STRATA_BIN", REPO / "build" / "bin" / "strata"))
    if not path.exists():
        pytest.fail(f"strata binary not found at {path}; build first (scripts/setup.sh)")
    return path


def run_strata(strata_bin, *args, check=True, **kwargs):
    """Run strata with arguments; returns the CompletedProcess (text mode)."""
    proc = subprocess.run([str(strata_bin), *map(str, args)], capture_output=True, text=True, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"strata {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc
