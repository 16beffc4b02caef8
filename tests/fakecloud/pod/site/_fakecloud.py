"""Where the stand-ins in the fake pod find the fake cloud: var/fakecloud/pod.json under NRG_POD_ROOT, written
by the fake `kubectl exec` (tests/fakecloud/fakecloud/handlers/pod_bash.py). Not part of any real package."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

FAKECLOUD = Path(__file__).resolve().parents[2]  # tests/fakecloud
if str(FAKECLOUD) not in sys.path:
    sys.path.insert(0, str(FAKECLOUD))


def identity() -> dict:
    path = Path(os.environ.get("NRG_POD_ROOT", "")) / "var" / "fakecloud" / "pod.json"
    return json.loads(path.read_text())


def state():
    from fakecloud.core import State

    return State(Path(identity()["state"]))
