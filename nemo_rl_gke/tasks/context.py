"""What every task shares: settings from the Invoke context and flags, the runner, confirmation, and one
translation of expected failures into exit codes and one-line messages (never a traceback).

Kept light: `invoke --list` imports this for every namespace.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from invoke import Exit
from invoke import task as invoke_task

from ..settings import ConfigError, Settings


def is_dry(c: Any) -> bool:
    # Invoke's own --dry; c.run would honour it, but we run through sh, so we read it ourselves.
    return bool(c.config.run.dry)


_OPTIONAL_POSITIONAL: set[str] = set()


def _allow_optional_positionals() -> None:
    """Let `invoke job.status [ID]` omit ID, as DESIGN's command line has it.

    Invoke treats every positional argument as required. For the arguments registered here, the parser
    now fills an unfilled one with "" (meaning: not given) just before it checks, so `job.status`,
    `job.status RUN` and `job.status --id=RUN` all parse. Only these arguments change."""
    from invoke.parser.parser import ParseMachine as Parser

    if getattr(Parser.complete_context, "_nrg_optional_positionals", False):
        return
    original = Parser.complete_context

    def complete_context(self: Any) -> None:
        if self.context is not None:
            for arg in self.context.positional_args:
                if arg.value is None and f"{self.context.name}:{arg.name}" in _OPTIONAL_POSITIONAL:
                    arg.value = ""
        original(self)

    complete_context._nrg_optional_positionals = True  # type: ignore[attr-defined]
    Parser.complete_context = complete_context  # type: ignore[method-assign]


def task(*args: Any, optional_positional: bool = False, **kwargs: Any) -> Callable[..., Any]:
    """invoke.task, plus: ConfigError -> exit 2, tool failure -> the tool's exit code, one clear message.

    optional_positional: the task's `positional` arguments may be left out (they arrive as "")."""

    def decorate(body: Callable[..., Any]) -> Any:
        @functools.wraps(body)
        def guarded(c: Any, *a: Any, **kw: Any) -> Any:
            from ..render import RenderError
            from ..runner import ToolError

            try:
                return body(c, *a, **kw)
            except ConfigError as exc:
                raise Exit(f"error: {exc}", code=2) from None
            except RenderError as exc:
                raise Exit(f"error: {exc}", code=2) from None
            except ToolError as exc:
                raise Exit(f"error: {exc}", code=exc.exit_code) from None
            except KeyboardInterrupt:
                raise Exit("interrupted", code=130) from None

        made = invoke_task(*args, **kwargs)(guarded)
        if optional_positional:
            _allow_optional_positionals()
            module = body.__module__.rsplit(".", 1)[-1]
            for name in kwargs.get("positional", []):
                # Invoke's parser context is named "<collection>.<task>"; the argument keeps its Python name.
                _OPTIONAL_POSITIONAL.add(f"{module}.{made.name}:{name}")
        return made

    if len(args) == 1 and callable(args[0]) and not kwargs:
        body, args = args[0], ()
        return decorate(body)
    return decorate


_NOTED_EXAMPLE = False  # say "using .env.example" once per process, not once per task


def settings(c: Any, *, offline: bool = False, **overrides: Any) -> Settings:
    """Settings for this task: .env (or ENV_FILE), then the environment, then the flags.

    Dry runs and offline tasks fall back to .env.example (and say so); real runs refuse without a .env.
    """
    from .. import settings as settings_module

    allow_example = offline or is_dry(c)
    loaded = settings_module.load(allow_example=allow_example, **overrides)
    global _NOTED_EXAMPLE
    if "placeholder" in loaded.source and not _NOTED_EXAMPLE:
        _NOTED_EXAMPLE = True
        print(f"note: no .env here, using {loaded.source}; copy .env.example to .env for real runs.",
              file=sys.stderr)
    return loaded


def runner(c: Any, s: Settings) -> Any:
    from ..runner import Runner

    return Runner(dry=is_dry(c), secrets=s.secrets, verbose=bool(c.config.get("verbose", False)))


def confirm(c: Any, question: str, *, yes: bool) -> None:
    """Ask before destroying or spending. --yes answers; no terminal and no --yes: exit 2. Dry runs never ask."""
    if yes or is_dry(c):
        return
    if not sys.stdin.isatty():
        raise Exit(f"{question}\nrefusing without confirmation: no terminal to ask on. Re-run with --yes.", code=2)
    answer = input(f"{question} [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise Exit("cancelled; nothing was changed.", code=1)


def apply_steps(c: Any, s: Settings, steps: list[Any], *, title: str = "create") -> Any:
    """Create what is missing among steps, in parallel, with the live board."""
    from .. import graph

    r = runner(c, s)
    if r.dry:
        return graph.apply(r, steps)
    from ..board import Board

    with Board(steps, title=f"{title} {s.CLUSTER_NAME}") as board:
        return graph.apply(r, steps, listener=board.listener)


def destroy_steps(c: Any, s: Settings, steps: list[Any], *, delete_data: bool = False, title: str = "delete") -> Any:
    from .. import graph

    r = runner(c, s)
    if r.dry:
        return graph.destroy(r, steps, delete_data=delete_data)
    from ..board import Board

    with Board(steps, title=f"{title} {s.CLUSTER_NAME}") as board:
        return graph.destroy(r, steps, delete_data=delete_data, listener=board.listener)


def status_rows(c: Any, s: Settings, steps: list[Any]) -> list[tuple[str, str]]:
    """(title, present|absent) for each resource step, asked in parallel."""
    r = runner(c, s)
    checked = [step for step in steps if not step.always]
    found = r.parallel([lambda step=step: step.exists(r) for step in checked])
    return [(step.title, "present" if ok else "absent") for step, ok in zip(checked, found, strict=True)]


def print_table(title: str, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for name in header:
        table.add_column(name)
    for row in rows:
        table.add_row(*row)
    Console().print(table)
