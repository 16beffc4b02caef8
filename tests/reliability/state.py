"""What "the same final state" means for the reliability suite and the benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Bookkeeping that differs between two identical runs: when a Helm release was last written, and the chart
# path as given on the command line (absolute from `invoke`, relative from a script run in the repository).
VOLATILE = ("updated",)


def comparable(resources: dict[str, Any]) -> dict[str, Any]:
    """FakeCloud.resources() without the fields that differ between two runs reaching the same state."""

    def clean(obj: Any, key: str = "") -> Any:
        if isinstance(obj, dict):
            return {k: clean(v, k) for k, v in obj.items() if k not in VOLATILE}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        if key == "chart" and isinstance(obj, str):
            return Path(obj).name
        return obj

    return clean(resources)
