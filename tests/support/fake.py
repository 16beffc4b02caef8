"""Drive the real task code against the fake cloud, fake tools first on PATH.

`FakeCloud.invoke` runs `invoke` in-process by default (tests/support/inprocess.py: the Runner's seam calls the
fake cloud's handlers without starting a process; fast). `FakeCloud(root, processes=True)`, or
`invoke(..., process=True)`, runs `python -m invoke` in a subprocess with bin/gcloud, bin/kubectl, bin/helm as
real processes: for what needs them (secrets in real argv, detached jobs and process groups, interrupts, locks
between two runs, the real gcloud and helm). Both see the same handlers, state directory and calls log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FAKE_BIN = REPO / "tests" / "fakecloud" / "bin"
sys.path.insert(0, str(REPO / "tests" / "fakecloud"))

TEST_HF_TOKEN = "hf_PLANTEDsecretVALUE1234"
TEST_WANDB_KEY = "wandbPLANTEDsecretVALUE5678"


def read_env_example() -> dict[str, str]:
    values = {}
    for line in (REPO / ".env.example").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
    return values


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass
class FakeCloud:
    """A working directory with a .env, and a fake cloud state directory."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    processes: bool = False  # True: every invoke is a real `python -m invoke` subprocess

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def workdir(self) -> Path:
        return self.root / "work"

    def write_env(self, **values: str) -> None:
        merged = {**read_env_example(), "HF_TOKEN": TEST_HF_TOKEN, "WANDB_API_KEY": TEST_WANDB_KEY, **values}
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / ".env").write_text("".join(f"{k}={v}\n" for k, v in merged.items()))

    def process_env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKECLOUD_", "ENV_FILE"))}
        for key in read_env_example():
            env.pop(key, None)
        env.update({
            "PATH": f"{FAKE_BIN}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "FAKECLOUD_STATE": str(self.state_dir),
            "NRG_RETRY_BASE_SECONDS": "0",
            "NRG_POLL_SECONDS": "0",
            "HOME": str(self.root / "home"),
            **self.env,
            **extra,
        })
        return env

    def invoke(self, *args: str, input: str | None = None, timeout: float = 300, process: bool | None = None,
               **extra_env: str) -> Done:
        """`invoke ARGS` in the working directory: in-process unless process=True (or FakeCloud.processes)."""
        from support import inprocess

        env = self.process_env(**extra_env)
        if not (self.processes if process is None else process) and inprocess.seam_reaches_runner():
            code, out, err, _ = inprocess.invoke(list(args), cwd=self.workdir, env=env, input=input, timeout=timeout)
            return Done(code, out, err)
        argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO), *args]
        proc = subprocess.run(argv, cwd=self.workdir, env=env, capture_output=True, text=True, input=input,
                              timeout=timeout)
        return Done(proc.returncode, proc.stdout, proc.stderr)

    def calls(self) -> list[dict[str, Any]]:
        path = self.state_dir / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def mutating_calls(self, since: int = 0) -> list[dict[str, Any]]:
        return [c for c in self.calls()[since:] if c["mutating"]]

    def resources(self) -> dict[str, dict[str, Any]]:
        """The fake cloud's state without bookkeeping (call counters, timestamps), for equality checks."""
        path = self.state_dir / "resources.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        return {kind: {key: _strip(obj) for key, obj in items.items()}
                for kind, items in data.items() if not kind.startswith("_") and items}


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items()
                if not k.startswith("_") and k not in ("creationTimestamp", "resourceVersion", "uid")}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj
