"""`kubectl exec -i POD [-c C] -- bash`: run the piped script LOCALLY with bash, against a pod root.

The pod root ($FAKECLOUD_STATE/podfs/<context>/) stands for the pod's `/` and is shared by the cluster's
pods like the Lustre volume at /data: it is seeded from tests/fakecloud/pod/root (a stand-in NeMo RL
checkout at opt/nemo-rl with NeMo RL v0.5.0's real example configs, a GSM8K-shaped sample at
opt/gsm8k-sample). The script sees what a Ray head
container would: NRG_POD_ROOT (the only difference from a real pod; empty there), PATH with the stand-in
`uv` first, PYTHONPATH with the stand-in `datasets`, the container's `env`, the Secret named by `envFrom`
(or, for pods made by the fake helm, our chart's Secret) as variables, and Kubernetes service links. Test
knobs NRG_STANDIN_* and NRG_SUPERVISOR_* pass through from the caller, and the fake cloud's own knobs reach
the stand-ins under NRG_STANDIN_ names (the driver keeps NRG_* in its small environment):
FAKECLOUD_PREEMPT_AT_STEP=N (a Spot node lost at step N, once per run; FAKECLOUD_PREEMPT_TIMES=K for K
times), FAKECLOUD_JOB_ERROR_AT_STEP=N (a Python error of the job's own at step N, every attempt),
FAKECLOUD_WORKER_RETURN_SECONDS (how long KubeRay takes to bring the worker back, default 2) and
FAKECLOUD_HF_NO_ACCESS=repo[,repo] (gated models the token may not download). The pod's identity (state
directory, context, namespace, Ray cluster) is written to var/fakecloud/pod.json in the pod root, where the
stand-ins for `ray` and the NeMo RL driver find the fake cloud.

Unlike a real exec session, the script's processes die with the client (same process group; SIGTERM and
SIGHUP to the fake kubectl are forwarded); only what the script detaches itself (setsid) survives. In a real pod
the script goes on when kubectl goes (kubernetes/kubernetes#89031): here that would leave it holding the caller's
pipes. FAKECLOUD_FAIL kind `dropped` plays the real case: the call runs to its end, then its stream is cut.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from .. import pod_configs
from ..core import Ctx, Fail, pod_command
from .kubectl_objects import key_of

POD = Path(__file__).resolve().parents[2] / "pod"
OUR_SECRET = "nemo-rl-secrets"


def pod_root(ctx: Ctx) -> Path:
    context = str(ctx.flag("--context"))
    root = ctx.state.root / "podfs" / "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in context)
    if not (root / "opt").exists():
        root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(POD / "root", root, dirs_exist_ok=True)
        pod_configs.write(root / "opt" / "nemo-rl" / "examples" / "configs")
        (root / "data").mkdir(exist_ok=True)
        (root / "root").mkdir(exist_ok=True)
    return root


def _secret_env(ctx: Ctx, namespace: str, name: str) -> dict[str, str]:
    secret = ctx.state.get(f"k8s:{ctx.flag('--context')}", key_of("Secret", namespace, name))
    if secret is None:
        return {}
    env = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    env.update({k: str(v) for k, v in (secret.get("stringData") or {}).items()})
    return env


def pod_env(ctx: Ctx, pod: dict[str, Any], container: str, root: Path) -> dict[str, str]:
    namespace = pod["metadata"].get("namespace", "default")
    spec = next((c for c in pod.get("spec", {}).get("containers", []) if c.get("name") == container), {})
    env = {
        "PATH": f"{POD / 'bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHONPATH": str(POD / "site"),
        "HOME": str(root / "root"),
        "HOSTNAME": pod["metadata"]["name"],
        "LANG": "C.UTF-8",
        "NRG_POD_ROOT": str(root),
        # Service links Kubernetes puts in every container; the driver's environment must not carry them.
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_PORT_443_TCP": "tcp://10.0.0.1:443",
        "NEMO_RL_HEAD_SVC_SERVICE_HOST": "10.0.0.7",
        "NEMO_RL_HEAD_SVC_PORT_8265_TCP": "tcp://10.0.0.7:8265",
        "RAY_HEAD_PORT": "tcp://10.0.0.8:6379",
        "RAY_ADDRESS": "127.0.0.1:6379",
    }
    sources = spec.get("envFrom")
    if sources is None:
        sources = [{"secretRef": {"name": OUR_SECRET}}]
    for source in sources:
        if "secretRef" in source:
            env.update(_secret_env(ctx, namespace, source["secretRef"]["name"]))
    for item in spec.get("env", []) or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
    env.update({k: v for k, v in os.environ.items() if k.startswith(("NRG_STANDIN_", "NRG_SUPERVISOR_"))})
    for knob in ("PREEMPT_AT_STEP", "PREEMPT_TIMES", "JOB_ERROR_AT_STEP", "WORKER_RETURN_SECONDS", "HF_NO_ACCESS",
                 "TIME_SCALE"):
        if os.environ.get(f"FAKECLOUD_{knob}"):
            env[f"NRG_STANDIN_{knob}"] = os.environ[f"FAKECLOUD_{knob}"]
    return env


def write_identity(ctx: Ctx, pod: dict[str, Any], root: Path) -> None:
    identity = {"state": str(ctx.state.root), "context": str(ctx.flag("--context")),
                "namespace": pod["metadata"].get("namespace", "default"),
                "cluster": (pod["metadata"].get("labels") or {}).get("ray.io/cluster", "")}
    path = root / "var" / "fakecloud" / "pod.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".pod.{os.getpid()}.json")
    tmp.write_text(json.dumps(identity))
    os.replace(tmp, path)


@pod_command("bash")
def bash(ctx: Ctx, pod: dict[str, Any], container: str, argv: list[str]) -> int:
    if not ctx.flag("--stdin") and len(argv) == 1:
        raise Fail(1, "fakecloud bash: pipe the script with `kubectl exec -i ... -- bash`")
    root = pod_root(ctx)
    script = ctx.stdin() if ctx.flag("--stdin") else ""
    sys.stdout.flush()
    env = pod_env(ctx, pod, container, root)
    write_identity(ctx, pod, root)
    child = subprocess.Popen(["bash", *argv[1:]], stdin=subprocess.PIPE, env=env, cwd=root / "root")

    def forward(signum: int, _frame: Any) -> None:
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, forward)
    try:
        assert child.stdin is not None
        child.stdin.write(script.encode())
        child.stdin.close()
    except BrokenPipeError:
        pass
    return child.wait()
