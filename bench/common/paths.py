"""Where the benchmarks find the repository and the team's shared data (``../shared/data`` beside the
checkout, or ``CCP_SHARED_DATA``). Standard library only: the datatrove baselines import it in their venv."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("CCP_SHARED_DATA", ROOT.parent / "shared" / "data"))
