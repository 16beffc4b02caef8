"""kubectl's user preferences, kuberc, as kubectl 1.35+ reads them (k8s.io/kubectl/pkg/kuberc; on by default
from 1.34, behind KUBECTL_KUBERC=true in 1.33, which with 1.34 reads no path from $KUBERC): the file is --kuberc,
else $KUBERC ("off" turns kuberc off), else ~/.kube/kuberc; KUBECTL_KUBERC=false turns the feature off. Its
`defaults` give a command's flags a value when the call does not name the flag (applyOverrides: a flag in the
arguments wins). Aliases cannot shadow a built-in command, so only `defaults` reach our calls.
Simpler than kubectl: a default's command is matched on words (kubectl resolves it to the command it names),
and a default for a flag kubectl does not know is ignored (kubectl fails every call).

`kubectl delete --interactive` (pkg/cmd/delete/delete.go) lists what it would delete, asks "Do you want to
continue? (y/N): " and reads one line from stdin: anything but y, or no line at all, prints "deletion is
cancelled" and exits 0, nothing deleted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .core import Ctx


def _file(ctx: Ctx) -> Path | None:
    if str(ctx.environ.get("KUBECTL_KUBERC", "true")).lower() == "false":
        return None
    named = ctx.flag("--kuberc") or ctx.environ.get("KUBERC")
    if named == "off":
        return None
    if named:
        return Path(str(named))
    home = ctx.environ.get("HOME")
    return Path(home) / ".kube" / "kuberc" if home else None


def apply_defaults(ctx: Ctx) -> None:
    """Give ctx's flags the kuberc `defaults` of its command that the call does not name."""
    path = _file(ctx)
    if path is None or not path.is_file() or not ctx.words:
        return
    import yaml

    preference: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
    # kubectl.config.k8s.io/v1beta1 says defaults/options; v1alpha1 (kubectl 1.33) overrides/flags.
    for entry in preference.get("defaults") or preference.get("overrides") or []:
        command = str(entry.get("command", "")).split()
        if command != list(ctx.words[:len(command)]):
            continue
        for option in entry.get("options") or entry.get("flags") or []:
            ctx.flags.setdefault(f"--{option['name']}", str(option.get("default", "")))


def delete_confirmed(ctx: Ctx) -> bool:
    """A `kubectl delete` goes ahead: not --interactive, or the answer read from stdin is y."""
    if str(ctx.flag("--interactive", "false")) not in ("1", "t", "T", "true", "TRUE", "True"):  # Go's ParseBool
        return True
    names = [f"{ctx.positionals[0]}/{name}" for name in ctx.positionals[1:]] if ctx.positionals else []
    ctx.out(f"You are about to delete the following {len(names)} resource(s):")
    for name in names:
        ctx.out(name)
    lines = ctx.stdin().splitlines()
    if lines and lines[0].strip().lower() == "y":
        ctx.out("Do you want to continue? (y/N): ")
        return True
    ctx.out("Do you want to continue? (y/N): deletion is cancelled")  # the question ends without a newline
    return False
