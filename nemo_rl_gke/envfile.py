"""The settings file: which one (ENV_FILE, the nearest .env up to the project root, else .env.example) and
its values, read strictly (a line that does not parse or a file that is not UTF-8 is a ConfigError naming the
line; a key that is not a setting is a warning naming the closest one)."""

from __future__ import annotations

import difflib
import io
import re
import sys
from collections.abc import Callable
from pathlib import Path

from .settings import KEYS, REPO_ROOT, SECRET_KEYS, SHOWN_MAX, ConfigError, shown_value


def project_root(cwd: Path) -> Path | None:
    """The nearest directory, from cwd upward, holding tasks.py: where Invoke finds its tasks, and where
    .env lives. None when cwd is outside the project (e.g. `invoke --search-root` from elsewhere)."""
    for base in (cwd, *cwd.parents):
        if (base / "tasks.py").is_file():
            return base
    return None


def _upward(cwd: Path, root: Path | None) -> list[Path]:
    """cwd, then each parent up to the project root (inclusive); only cwd outside a project."""
    if root is None:
        return [cwd]
    out = [cwd]
    for base in cwd.parents:
        if out[-1] == root:
            break
        out.append(base)
    return out


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


def find_env_file(environ: dict[str, str], cwd: Path) -> tuple[Path | None, bool]:
    """(path, is_example). ENV_FILE wins; then the first .env from cwd up to the project root (the
    directory holding tasks.py), so `cd manifests && invoke …` reads the project's .env; else .env.example
    (cwd, the project root, then the repository of this package)."""
    chosen = environ.get("ENV_FILE")
    if chosen:
        path = Path(chosen)
        if not path.is_absolute():
            path = cwd / path
        if not _is_file(path):
            raise ConfigError("ENV_FILE", chosen, "no such file; point ENV_FILE at your settings file.")
        return path, False
    root = project_root(cwd)
    for base in _upward(cwd, root):
        if _is_file(base / ".env"):
            return base / ".env", False
    for folder in (cwd, root, REPO_ROOT):
        if folder is not None and _is_file(folder / ".env.example"):
            return folder / ".env.example", True
    return None, True


_LINE_KEY = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=", re.ASCII)
# A line with no `=` whose key is a setting's name, written another way (`GPU_TYPE: h200`, `GPU_TYPE h200`).
_KEY_THEN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?:[:\s]\s*(.*))?$", re.ASCII)


def _parts(line: str) -> tuple[str, str, str, str]:
    """(the key a line starts with, upper-cased, or ""; the line up to its separator, `=` or `:` included;
    all that follows; that without a trailing comment)."""
    named = _LINE_KEY.match(line) or _KEY_THEN.match(line)
    if named is None:
        return "", "", "", ""
    head = re.match(r"\s*[=:]?", line[named.end(1):])
    cut = named.end(1) + (head.end() if head else 0)
    after = line[cut:].strip()
    return named.group(1).upper(), line[:cut].strip(), after, re.split(r"(?:^|\s)#", after, maxsplit=1)[0].strip()


def _hidden(line: str) -> str:
    """A line as an error may show it: a secret's value never (a token in a terminal or a CI log leaks; nor
    what looks like a comment after its key: `HF_TOKEN # hf_…` is a token too), and a line that does not start
    with a setting's name not at all (a token pasted alone, with a word beside it)."""
    key, head, after, _ = _parts(line)
    if key not in KEYS:
        return "(not shown)"
    if key in SECRET_KEYS and after:
        return head + ("***" if head.endswith(("=", ":")) else " ***")
    return line


def _without_equals(line: str, number: int, where: str, name: str) -> ConfigError | None:
    """A line with no `=` naming a setting (`GPU_TYPE: h200`, `export GPU_TYPE`): python-dotenv reads it as a
    key with no value and the setting silently keeps its default (a b200 pool where h200 was meant), so it is
    refused. None for a word that names no setting (another tool's pass-through `VAR`): ignored, as an unknown
    key is."""
    key, _, _, value = _parts(line)
    if key not in KEYS:
        return None
    meant = f"{key}={'…' if key in SECRET_KEYS else value}" if value else f"{key}=value"
    return ConfigError(f"{name} line {number}", _hidden(line).strip(),
                       f"this line has no `=`, so {key} would keep its default: write {meant} (or delete the "
                       f"line); fix line {number} of {where}.")


_WARNED: set[str] = set()  # each unknown-key warning once per process (chained tasks load settings again)


def warn_once(text: str) -> None:
    if text not in _WARNED:
        _WARNED.add(text)
        print(text, file=sys.stderr)


def read_env_file(path: Path, *, warn: Callable[[str], None] = warn_once) -> dict[str, str]:
    """The settings of one file, strictly: a line that does not parse is a ConfigError naming the file and
    the line (python-dotenv would only log it and carry on with the default); a key that is not a setting
    is a warning naming the closest one; a file that is not UTF-8 is a ConfigError naming the line."""
    from dotenv import dotenv_values
    from dotenv.parser import parse_stream

    where = str(path) if len(str(path)) <= 200 else "…" + str(path)[-199:]
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError("ENV_FILE", str(path), f"cannot read it ({exc.strerror or exc}).") from None
    try:
        text = data.decode("utf-8-sig")  # a BOM (some Windows editors write one) is not part of the first key
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        shown = _hidden(data.split(b"\n")[line - 1][:SHOWN_MAX].decode("utf-8", "replace"))
        raise ConfigError(f"{path.name} line {line}", shown,
                          f"byte 0x{data[exc.start]:02x} is not UTF-8 text; save {where} as UTF-8.") from None
    for binding in parse_stream(io.StringIO(text)):
        number, original = binding.original.line, binding.original.string
        first = _hidden(original.splitlines()[0] if original.strip() else original)
        if binding.error:
            named = _LINE_KEY.match(original)  # its key's name only: never its value
            if named is None:  # `GPU_TYPE: h200`, `GPU_TYPE h200`: a setting written without `=`
                refused = _without_equals(original.splitlines()[0], number, where, path.name)
                if refused is not None:
                    raise refused
            subject = f" (the value of {named.group(1)})" if named else ""
            raise ConfigError(f"{path.name} line {number}", first,
                              f"this line does not parse{subject}: use KEY=value, quotes closed on the same line; "
                              f"fix line {number} of {where}.")
        if binding.key is None:
            continue
        if binding.value is None:
            refused = _without_equals(original.splitlines()[0], number, where, path.name)
            if refused is not None:
                raise refused
            # Not echoed: a word alone on a line may be a pasted token.
            warn(f"warning: {path.name} line {number} has no `=` and names no setting: it is ignored.")
            continue
        if binding.value is not None and "\n" in binding.value:
            spans = original.count("\n") + (not original.endswith("\n"))
            raise ConfigError(f"{path.name} line {number}", first,
                              f"the quoted value of {binding.key} runs over {spans} lines: a closing quote is "
                              f"missing; fix line {number} of {where}.")
        if binding.key not in KEYS and binding.key.upper() in KEYS:  # gpu_type=h200: the default would stand
            key = binding.key.upper()
            raise ConfigError(f"{path.name} line {number}", first,
                              f"settings are upper case, so {key} would keep its default: write "
                              f"{key}={'…' if key in SECRET_KEYS or len(binding.value or '') > 60 else binding.value}; "
                              f"fix line {number} of {where}.")
        if binding.key not in KEYS:
            near = difflib.get_close_matches(binding.key.upper(), KEYS, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}?" if near else "see .env.example for the keys."
            warn(f"warning: {path.name} line {number}: {shown_value(binding.key)} is not a setting and is "
                 f"ignored; {hint}")
    values = dotenv_values(stream=io.StringIO(text))
    return {k: v for k, v in values.items() if k in KEYS and v is not None}
