"""Every kubectl and helm command we make, parsed by the real kubectl and helm: the fake accepts what it was
written to accept, the real tools are the judges of their flags.

The kubeconfig points our context at a closed local port, so a well-formed command gets as far as dialing the
API server and fails there ("connection refused", "cluster unreachable"); a flag or value the tool does not take
fails before that ("unknown flag", "invalid argument"). Sources: the `$ kubectl`/`$ helm` lines of the dry runs
of every task that has them, the argv of every step's existence checks, and the builders that only real runs
reach (waits, listings, the head pod, the stale-context cleanup)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support.asked import asked_by_checks
from support.fake import FAKE_BIN, REPO, FakeCloud, example_settings

CONTEXT = "gke_my-nemo-project_us-central1_nemo-rl"
KUBECONFIG = f"""apiVersion: v1
kind: Config
clusters: [{{name: dead, cluster: {{server: "https://127.0.0.1:9"}}}}]
contexts: [{{name: {CONTEXT}, context: {{cluster: dead, user: nobody}}}}]
users: [{{name: nobody, user: {{token: not-a-secret}}}}]
"""
REACHED_THE_SERVER = re.compile(r"was refused|connection refused|cluster unreachable|Unable to connect to the server"
                                r"|deleted context ")
DRY_TASKS = [["up", "--gpu=b200", "--mode=standard"], ["up", "--gpu=h200", "--mode=autopilot"],
             ["down", "--yes", "--delete-data", "--delete-bucket"], ["clean.ray", "--yes"],
             ["job.submit", "gemma3-gsm8k", "--follow"], ["job.logs", "run-1", "--follow"], ["job.stop", "--id=run-1"],
             ["job.status"], ["job.list"], ["job.checkpoints", "--id=run-1"], ["job.metrics", "--id=run-1"],
             ["ray.status"], ["ray.dashboard"], ["storage.export"], ["status"]]


def real_tool(name: str) -> str:
    """The real kubectl or helm: PATH without the fake cloud's bin/, then this checkout's .tools/bin."""
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) != FAKE_BIN)
    found = shutil.which(name, path=f"{path}{os.pathsep}{REPO / '.tools' / 'bin'}")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"the real {name} must be installed on the CI machine")
        pytest.skip(f"needs the real {name}")
    return found


def _dry_lines(tmp_path: Path) -> list[list[str]]:
    commands = []
    for n, task in enumerate(DRY_TASKS):
        fake = FakeCloud(tmp_path / f"dry{n}")
        fake.write_env()
        done = fake.invoke("--dry", *task)
        assert done.code == 0, (task, done.output)
        commands += [shlex.split(line[2:].split(" <<'EOF'")[0], comments=True)
                     for line in done.stdout.splitlines() if line.startswith(("$ kubectl ", "$ helm "))]
    return commands



def _builders(s) -> list[list[str]]:
    from nemo_rl_gke.commands import kubectl
    from nemo_rl_gke.resources import all_steps, head_pod, prefetch_steps, ray_steps
    from nemo_rl_gke.resources.inventory import inventory_of

    inv = inventory_of(all_steps(s))
    assert inv is not None
    return [*inv.kube_listings().values(),
            kubectl.wait_ready(s, "pods", selector=ray_steps.POD_SELECTOR, namespace=s.NAMESPACE, seconds=1.5),
            kubectl.wait_ready(s, "pods", selector=ray_steps.POD_SELECTOR, namespace=s.NAMESPACE, seconds=0.00003),
            kubectl.delete_context(s), prefetch_steps.list_argv(s), head_pod.kubectl_exec(s, "head-pod"),
            ray_steps.pods_argv(s)]


def _parse(commands: list[list[str]], tmp_path: Path) -> dict[tuple[str, ...], str]:
    """argv -> the tool's last stderr lines (stdout for what succeeds), each with a kubeconfig of its own."""
    tools = {"kubectl": real_tool("kubectl"), "helm": real_tool("helm")}

    def one(n_argv: tuple[int, tuple[str, ...]]) -> tuple[tuple[str, ...], str]:
        n, argv = n_argv
        config = tmp_path / f"kubeconfig-{n}"
        config.write_text(KUBECONFIG)
        env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(tmp_path), "HELM_CACHE_HOME": str(tmp_path)}
        stdin = "{}" if argv[0] == "helm" else '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}'
        proc = subprocess.run([tools[argv[0]], *argv[1:]], env=env, capture_output=True, text=True, input=stdin,
                              timeout=120, cwd=REPO)
        lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return argv, " / ".join(lines[-2:])  # "error: unknown flag: --x / See 'kubectl … --help' for usage."

    unique = sorted({tuple(c) for c in commands})
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(one, enumerate(unique)))


def test_real_kubectl_and_helm_take_every_command_we_make(tmp_path):
    s = example_settings()
    commands = [*_dry_lines(tmp_path), *asked_by_checks(s, presence=True), *_builders(s)]
    commands = [c for c in commands if c and c[0] in ("kubectl", "helm")]
    words = {" ".join(c[1:4]) for c in commands}
    assert any("upgrade --install" in w for w in words) and any("exec -i" in w for w in words), words
    results = _parse(commands, tmp_path)
    assert len(results) >= 20, sorted(results)
    bad = {shlex.join(argv): said for argv, said in results.items() if not REACHED_THE_SERVER.search(said)}
    assert not bad, bad


KUBERC = """apiVersion: kubectl.config.k8s.io/v1alpha1
kind: Preference
overrides:
- command: create configmap
  flags:
  - name: output
    default: json
"""


def test_the_real_kubectl_applies_a_users_kuberc_defaults_and_our_runs_turn_them_off(tmp_path):
    # What the fake's kubectl models (fakecloud/kuberc.py): ~/.kube/kuberc gives a command's flags their defaults
    # (on by default from kubectl 1.34; 1.33 behind KUBECTL_KUBERC=true), and KUBERC=off, which our runs set
    # (tools.TOOL_ENVIRONMENT), turns that off. Seen offline on `create configmap --dry-run=client`.
    from nemo_rl_gke.tools import tool_environment

    sdk = Path(os.path.realpath(shutil.which("gcloud") or "/nonexistent")).parent
    kubectl = next((str(p) for p in [Path(real_tool("kubectl")), *sorted(sdk.glob("kubectl.1.*"), reverse=True)]
                    if "--kuberc" in subprocess.run([str(p), "options"], capture_output=True, text=True,
                                                    env={**os.environ, "KUBECTL_KUBERC": "true"}).stdout), None)
    if kubectl is None:
        pytest.skip("no kubectl 1.33 or later here (kuberc came in 1.33)")
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "kuberc").write_text(KUBERC)
    users = {**os.environ, "HOME": str(tmp_path), "KUBECTL_KUBERC": "true"}
    argv = [kubectl, "create", "configmap", "x", "--from-literal=a=b", "--dry-run=client"]
    theirs = subprocess.run(argv, env=users, capture_output=True, text=True)
    assert theirs.returncode == 0 and '"kind": "ConfigMap"' in theirs.stdout, theirs
    ours = subprocess.run(argv, env=tool_environment("kubectl", users), capture_output=True, text=True)
    assert ours.returncode == 0 and ours.stdout.strip() == "configmap/x created (dry run)", ours


def test_the_real_helm_under_helm_debug_ends_an_error_with_a_stack_trace_and_our_runs_do_not(tmp_path):
    # We show and read a failure's last lines: under HELM_DEBUG they were Go's stack, not helm's words.
    from nemo_rl_gke.runner import last_lines
    from nemo_rl_gke.tools import tool_environment

    helm = real_tool("helm")
    version = subprocess.run([helm, "version", "--short"], capture_output=True, text=True).stdout
    if not version.startswith("v3."):
        pytest.skip(f"helm {version.strip()}: helm 4 logs its debug lines without a stack trace")
    users = {**os.environ, "HELM_DEBUG": "true", "HOME": str(tmp_path), "HELM_CACHE_HOME": str(tmp_path)}
    argv = [helm, "template", "x", str(tmp_path / "no-chart")]
    theirs = subprocess.run(argv, env=users, capture_output=True, text=True)
    assert theirs.returncode == 1 and "runtime" in last_lines(theirs.stderr, 1), theirs.stderr[-500:]
    ours = subprocess.run(argv, env=tool_environment("helm", users), capture_output=True, text=True)
    assert ours.returncode == 1 and ours.stderr.strip() == f'Error: path "{tmp_path / "no-chart"}" not found', ours
