"""Core of the fake cloud: command registry, argument parsing, state, latency, output formats.

Handlers register with `@command(tool, *words, mutating=..., latency=...)` and receive a `Ctx`. The state is
one JSON document under $FAKECLOUD_STATE, changed under an exclusive file lock and read under a shared one, so
parallel calls (the runner fans out) see a consistent cloud, and reads run side by side as an API server serves
them. Latency is slept outside the lock, so parallel calls overlap
in time as they would against the real APIs.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

Handler = Callable[["Ctx"], "int | None"]


@dataclass
class Registered:
    handler: Handler
    mutating: bool
    latency: float


REGISTRY: dict[tuple[str, tuple[str, ...]], Registered] = {}
# `kubectl exec POD -- CMD ...`: CMD's basename -> handler(ctx, pod_object, container, cmd_argv)
POD_COMMANDS: dict[str, Callable[..., int | None]] = {}

# Flags that take a value in the next word when not written as --flag=value.
VALUE_FLAGS = {
    "gcloud": set(),
    "kubectl": {"-n", "--namespace", "-o", "--output", "-f", "--filename", "-c", "--container", "-l", "--selector",
                "--context", "--timeout", "--for", "--type"},
    "helm": {"-n", "--namespace", "-f", "--values", "--set", "--set-string", "--kube-context", "--version",
             "--timeout", "-o", "--output"},
}
SHORT_TO_LONG = {"-n": "--namespace", "-o": "--output", "-f": "--filename", "-c": "--container", "-l": "--selector",
                 "-i": "--stdin", "-t": "--tty", "-q": "--quiet"}


def command(tool: str, *words: str, mutating: bool = False, latency: float = 0.0) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        REGISTRY[(tool, tuple(words))] = Registered(handler, mutating, latency)
        return handler

    return register


def pod_command(name: str) -> Callable[[Callable[..., int | None]], Callable[..., int | None]]:
    def register(handler: Callable[..., int | None]) -> Callable[..., int | None]:
        POD_COMMANDS[name] = handler
        return handler

    return register


class Fail(Exception):
    def __init__(self, code: int, stderr: str):
        super().__init__(stderr)
        self.code, self.stderr = code, stderr


def time_scale() -> float:
    return float(os.environ.get("FAKECLOUD_TIME_SCALE", "0") or 0)


class State:
    """Resources as {kind: {key: object}} in one JSON file, guarded by an flock: `locked` to change it (re-entrant
    per thread, written back at the end), `reading` to look (shared, not written back)."""

    def __init__(self, root: Path):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._path = root / "resources.json"
        self._local = threading.local()

    @contextmanager
    def locked(self) -> Iterator[dict[str, dict[str, Any]]]:
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth += 1
            try:
                yield self._local.data
            finally:
                self._local.depth -= 1
            return
        with open(self.root / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                data = json.loads(self._path.read_text()) if self._path.exists() else {}
                self._local.depth, self._local.data = 1, data
                yield data
                tmp = self._path.with_suffix(".tmp")
                tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
                tmp.replace(self._path)
            finally:
                self._local.depth = 0
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextmanager
    def reading(self) -> Iterator[dict[str, dict[str, Any]]]:
        """The state to look at, under a shared lock: what a change inside this block makes is lost, and a
        `locked` inside it would wait for itself (take `locked` for a read that leads to a change)."""
        if getattr(self._local, "depth", 0):
            yield self._local.data
            return
        with open(self.root / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
            try:
                yield json.loads(self._path.read_text()) if self._path.exists() else {}
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        with self.reading() as data:
            return data.get(kind, {}).get(key)

    def put(self, kind: str, key: str, obj: dict[str, Any]) -> None:
        with self.locked() as data:
            data.setdefault(kind, {})[key] = obj

    def delete(self, kind: str, key: str) -> bool:
        with self.locked() as data:
            return data.get(kind, {}).pop(key, None) is not None

    def list(self, kind: str) -> list[dict[str, Any]]:
        with self.reading() as data:
            return list(data.get(kind, {}).values())

    def items(self, kind: str) -> dict[str, dict[str, Any]]:
        with self.reading() as data:
            return dict(data.get(kind, {}))

    def drop_kind(self, kind: str) -> None:
        with self.locked() as data:
            data.pop(kind, None)

    def kinds(self) -> list[str]:
        with self.reading() as data:
            return sorted(k for k, v in data.items() if v and not k.startswith("_"))


@dataclass
class Ctx:
    tool: str
    argv: list[str]
    words: tuple[str, ...] = ()
    positionals: list[str] = field(default_factory=list)
    flags: dict[str, Any] = field(default_factory=dict)
    multi: dict[str, list[str]] = field(default_factory=dict)
    after_dashdash: list[str] = field(default_factory=list)
    state: State = None  # type: ignore[assignment]
    latency: float = 0.0
    _stdin: str | None = None
    # Where the command's output goes: the process's own streams, or buffers when called in-process.
    stdout: TextIO | None = None
    stderr: TextIO | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)  # the environment the tool runs with

    def stdin(self) -> str:
        if self._stdin is None:
            self._stdin = "" if sys.stdin is None or sys.stdin.closed else sys.stdin.read()
        return self._stdin

    def out(self, text: str) -> None:
        (self.stdout or sys.stdout).write(text if text.endswith("\n") or not text else text + "\n")

    def err(self, text: str) -> None:
        (self.stderr or sys.stderr).write(text if text.endswith("\n") or not text else text + "\n")

    def work(self, seconds: float | None = None) -> None:
        """Sleep the operation's typical latency × FAKECLOUD_TIME_SCALE."""
        delay = (self.latency if seconds is None else seconds) * time_scale()
        if delay > 0:
            time.sleep(delay)

    def flag(self, name: str, default: Any = None) -> Any:
        return self.flags.get(name, default)

    @property
    def project(self) -> str:
        return str(self.flags.get("--project") or os.environ.get("CLOUDSDK_CORE_PROJECT") or "fake-project")

    def command_name(self) -> str:
        return f"{self.tool}.{'.'.join(self.words)}"

    def emit(self, obj: Any) -> None:
        """Print obj the way gcloud/kubectl would for the requested --format / --output."""
        fmt = self.flags.get("--format") or self.flags.get("--output") or ""
        self.out(format_output(obj, str(fmt)))


def parse(tool: str, argv: list[str]) -> Ctx:
    ctx = Ctx(tool, list(argv))
    words: list[str] = []
    i = 0
    value_flags = VALUE_FLAGS.get(tool, set())
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            ctx.after_dashdash = argv[i + 1:]
            break
        if arg.startswith("-") and len(arg) > 1:
            if "=" in arg and arg.startswith("--"):
                name, value = arg.split("=", 1)
            elif arg in value_flags and i + 1 < len(argv):
                name, value = arg, argv[i + 1]
                i += 1
            else:
                name, value = arg, True
            name = SHORT_TO_LONG.get(name, name)
            ctx.flags[name] = value
            if isinstance(value, str):
                ctx.multi.setdefault(name, []).append(value)
        else:
            words.append(arg)
        i += 1
    # Longest registered prefix of the words wins.
    for n in range(len(words), -1, -1):
        if (tool, tuple(words[:n])) in REGISTRY:
            ctx.words, ctx.positionals = tuple(words[:n]), words[n:]
            break
    else:
        ctx.positionals = words
    return ctx


# ---- output formats ------------------------------------------------------------------------------
def _dig(obj: Any, path: str) -> Any:
    for part in [p for p in re.split(r"\.(?![^\[]*\])", path) if p]:
        match = re.fullmatch(r"([^\[]*)((\[[^\]]*\])*)", part)
        name, indexes = match.group(1), re.findall(r"\[([^\]]*)\]", match.group(2)) if match else []
        if name:
            if isinstance(obj, list):
                obj = [o.get(name) if isinstance(o, dict) else None for o in obj]
            else:
                obj = obj.get(name) if isinstance(obj, dict) else None
        for index in indexes:
            if index == "*":
                obj = obj if isinstance(obj, list) else [obj]
            elif isinstance(obj, list):
                try:
                    obj = obj[int(index)]
                except (IndexError, ValueError):
                    obj = None
            elif isinstance(obj, dict) and index.startswith("'"):
                obj = obj.get(index.strip("'\""))
    return obj


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(_scalar(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def format_output(obj: Any, fmt: str) -> str:
    if fmt == "yaml":
        import yaml

        return yaml.safe_dump(obj, sort_keys=False)
    if fmt in ("", "json"):
        return json.dumps(obj, indent=2)
    value = re.fullmatch(r"value\((.*)\)", fmt)
    if value:
        fields = [f.strip() for f in value.group(1).split(",")]
        rows = obj if isinstance(obj, list) else [obj]
        return "\n".join("\t".join(_scalar(_dig(row, f)) for f in fields) for row in rows)
    if fmt == "name":
        items = obj.get("items", [obj]) if isinstance(obj, dict) else obj
        return "\n".join(f"{_kind_path(i)}/{i['metadata']['name']}" for i in items)
    if fmt.startswith("jsonpath="):
        return jsonpath(obj, fmt[len("jsonpath="):])
    return json.dumps(obj, indent=2)


def _kind_path(obj: dict[str, Any]) -> str:
    kind = obj.get("kind", "").lower()
    group = obj.get("apiVersion", "v1").split("/")[0] if "/" in obj.get("apiVersion", "") else ""
    return f"{kind}.{group}" if group else kind


def jsonpath(obj: Any, template: str) -> str:
    """The subset of kubectl's JSONPath our code uses: {.a.b[0].c}, {.items[*].x}, literal text."""
    template = template.strip("'")
    out = []
    for literal, expr in re.findall(r"([^{]*)(?:\{([^}]*)\})?", template):
        out.append(literal)
        if expr:
            out.append(_scalar(_dig(obj, expr.lstrip("."))) if expr != "\"\\n\"" else "\n")
    return "".join(out)


# ---- common resource shapes ------------------------------------------------------------------------
def gcloud_error(ctx: Ctx, message: str) -> str:
    return f"ERROR: ({ctx.command_name()}) {message}"


def create_resource(ctx: Ctx, kind: str, key: str, obj: dict[str, Any], what: str) -> None:
    if ctx.state.get(kind, key) is not None:
        raise Fail(1, gcloud_error(ctx, f"Could not create {what}: The resource '{what}' already exists"))
    ctx.work()
    # Compute's RFC 3339 with milliseconds and the offset its API answers in (US Pacific), not UTC
    pacific = time.gmtime(time.time() - 8 * 3600)
    obj.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%S.000-08:00", pacific))
    obj.setdefault("_created", time.time())
    with ctx.state.locked():
        if ctx.state.get(kind, key) is not None:
            raise Fail(1, gcloud_error(ctx, f"Could not create {what}: The resource '{what}' already exists"))
        ctx.state.put(kind, key, obj)
    ctx.err(f"Created [{what}].")


def require(ctx: Ctx, kind: str, key: str, what: str) -> dict[str, Any]:
    obj = ctx.state.get(kind, key)
    if obj is None:
        raise Fail(1, gcloud_error(ctx, f"NOT_FOUND: The resource '{what}' was not found"))
    return obj


def delete_resource(ctx: Ctx, kind: str, key: str, what: str) -> None:
    require(ctx, kind, key, what)
    ctx.work()
    if not ctx.state.delete(kind, key):
        raise Fail(1, gcloud_error(ctx, f"NOT_FOUND: The resource '{what}' was not found"))
    ctx.err(f"Deleted [{what}].")


def public(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without the fake's private bookkeeping keys (those starting with '_')."""
    return {k: v for k, v in obj.items() if not k.startswith("_")}


def unscoped(obj: dict[str, Any]) -> dict[str, Any]:
    """public(obj) without the `project` the state keeps for scoping (no Compute, GKE or Service Networking v1
    resource has that field)."""
    return {k: v for k, v in public(obj).items() if k != "project"}
