"""The layering, checked on the source (ast): one process seam, pure command builders, steps that never import
tasks, module names that say one thing. A break here is a design change: make it on purpose, here."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "nemo_rl_gke"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """Every module path path imports (relative imports resolved), at any depth (lazy imports included)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = parts if path.name == "__init__.py" else parts[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _named(prefix: str) -> list[Path]:
    return [p for p in MODULES if p.relative_to(PACKAGE).as_posix().startswith(prefix)]


def test_architecture_only_the_tools_module_starts_processes():
    starters = {"sh", "subprocess", "os.system", "os.popen", "pty", "multiprocessing"}
    offenders = {p.relative_to(PACKAGE).as_posix(): sorted(_imports(p) & starters) for p in MODULES
                 if p.name != "tools.py" and _imports(p) & starters}
    assert offenders == {}
    assert "sh" in _imports(PACKAGE / "tools.py")


def test_architecture_command_builders_are_pure():
    # commands/ builds argv lists and data: nothing that runs, prints through the runner, or reads the cloud.
    forbidden = {"nemo_rl_gke.runner", "nemo_rl_gke.tools", "nemo_rl_gke.graph", "nemo_rl_gke.gcs",
                 "nemo_rl_gke.gcs_client", "nemo_rl_gke.resources", "nemo_rl_gke.tasks"}
    offenders = {p.name: sorted(m for m in _imports(p) if any(m == f or m.startswith(f + ".") for f in forbidden))
                 for p in _named("commands/")}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_architecture_resources_and_core_never_import_tasks():
    offenders = [p.relative_to(PACKAGE).as_posix() for p in MODULES
                 if not p.relative_to(PACKAGE).as_posix().startswith("tasks/")
                 and any(m == "nemo_rl_gke.tasks" or m.startswith("nemo_rl_gke.tasks.") for m in _imports(p))]
    assert offenders == []


def test_architecture_module_names_are_unique_and_say_what_they_hold():
    names = Counter(p.stem for p in MODULES if p.name != "__init__.py")
    assert [name for name, count in names.items() if count > 1] == []
    undocumented = [p.relative_to(PACKAGE).as_posix() for p in MODULES
                    if p.read_text().strip() and not ast.get_docstring(ast.parse(p.read_text()))]
    assert undocumented == []
