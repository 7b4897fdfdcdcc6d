"""datatrove's own environment, for the benchmarks that run it side by side with ours (made or reused by
datatrove_env.sh beside this file)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV_SCRIPT = Path(__file__).with_name("datatrove_env.sh")


def datatrove_python(venv: str | None = None) -> str:
    """The interpreter of datatrove's venv: ``venv``, else ``$DATATROVE_VENV``, else ``.venv-datatrove``."""
    env = {**os.environ, "DATATROVE_VENV": venv} if venv else None
    return subprocess.run(
        ["bash", str(ENV_SCRIPT)], capture_output=True, text=True, check=True, env=env
    ).stdout.split()[-1]
