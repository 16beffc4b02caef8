{{/* The RayCluster's name: the release name (nemo-rl), never a hard-coded string. */}}
{{- define "ray-cluster.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "ray-cluster.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nemo-rl-gke
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Pod labels stay stable across chart versions, so an upgrade does not restart the pods for nothing. */}}
{{- define "ray-cluster.podLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: nemo-rl-gke
{{- end -}}

{{- define "ray-cluster.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else if .Values.image.tag -}}
{{- printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- else -}}
{{- fail "image.tag and image.digest are empty: pin the image (e.g. v0.5.0), never rely on :latest" -}}
{{- end -}}
{{- end -}}

{{/* Environment of every Ray container: shared values, the Hugging Face cache and logs on /data. */}}
{{- define "ray-cluster.env" -}}
- name: HF_HOME
  value: {{ .Values.data.hfHome | quote }}
- name: NRG_LOG_DIR
  value: {{ .Values.data.logDir | quote }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{- define "ray-cluster.envFrom" -}}
- secretRef:
    name: {{ .Values.secretName }}
{{- end -}}

{{- define "ray-cluster.dataVolume" -}}
- name: data
  persistentVolumeClaim:
    claimName: {{ .Values.data.claimName }}
{{- end -}}

{{- define "ray-cluster.shmVolume" -}}
- name: dshm
  emptyDir:
    medium: Memory
    sizeLimit: {{ . }}
{{- end -}}

{{/*
The head's start command. KubeRay leaves command/args alone because of ray.io/overwrite-container-cmd and
puts its generated `ray start ...` in $KUBERAY_GEN_RAY_START_CMD; the inner bash keeps any quoting KubeRay
put in it (an unquoted ${VAR} would pass quotes through literally).
*/}}
{{- define "ray-cluster.headScript" -}}
set -euo pipefail
# Ray opens many files: raise the soft limit, as far as the container's hard limit allows.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
mkdir -p "${HF_HOME}" "${NRG_LOG_DIR}"
echo "nemo-rl-gke: starting the Ray head on $(hostname)"
{{ include "ray-cluster.runRay" . }}
{{- end -}}

{{/*
Ray, with its session logs kept. Ray writes worker and actor tracebacks under its temp dir in the pod
(/tmp/ray/session_latest/logs), which vanishes with the pod; `ray start --temp-dir` works only on the head in
Ray 2.49 and a Lustre path would exceed the 107-byte AF_UNIX socket limit. So a loop copies the logs to
/data/ray-logs/<pod>/ every logShipSeconds, and once more when the pod is told to stop (a Spot node gets
30 s of notice): SIGTERM goes to Ray, then the last copy is made.
*/}}
{{- define "ray-cluster.runRay" -}}
RAY_LOGS_SRC={{ printf "%s/session_latest/logs" .Values.rayTmpDir | quote }}
RAY_LOGS_DST="{{ .Values.data.rayLogDir }}/$(hostname)"
ship_ray_logs() {
  if [[ -d "${RAY_LOGS_SRC}" ]]; then
    mkdir -p "${RAY_LOGS_DST}"
    cp -rLu "${RAY_LOGS_SRC}/." "${RAY_LOGS_DST}/" 2>/dev/null || true
  fi
}
( trap - TERM INT; while sleep {{ .Values.logShipSeconds }}; do ship_ray_logs; done ) < /dev/null > /dev/null 2>&1 &
shipper=$!
/bin/bash -c "${KUBERAY_GEN_RAY_START_CMD:?KubeRay did not set KUBERAY_GEN_RAY_START_CMD}" &
ray_pid=$!
trap 'kill -TERM "${ray_pid}" 2>/dev/null || true' TERM INT
set +e
wait "${ray_pid}"
code=$?
while kill -0 "${ray_pid}" 2>/dev/null; do
  wait "${ray_pid}"
  code=$?
done
set -e
kill "${shipper}" 2>/dev/null || true
ship_ray_logs
exit "${code}"
{{- end -}}

{{/*
The workers' start command: NVIDIA's libraries and the gIB NCCL plugin from the host (installed by the
NCCL RDMA installer), then Ray. No package installs: nothing here needs egress. Every step fails the pod
(set -e holds: no `&&` chains, no pipes that hide a failure) so a node without the plugin never joins Ray
with a silently broken NCCL.
*/}}
{{- define "ray-cluster.workerScript" -}}
{{- $nvidia := .Values.hostPaths.nvidia.mountPath -}}
{{- $gib := .Values.hostPaths.gib.mountPath -}}
set -euo pipefail
# Ray opens many files: raise the soft limit, as far as the container's hard limit allows.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
echo "nemo-rl-gke: preparing GPU worker $(hostname)"
ldconfig {{ $nvidia }}/lib64
export LD_LIBRARY_PATH="{{ $gib }}/lib64:${LD_LIBRARY_PATH:-}"
# NVIDIA's script is not written for `set -u`; a missing file still fails the pod.
set +u
source {{ $gib }}/scripts/set_nccl_env.sh
set -u
# Ours, after theirs: the tuner file of this GPU type wins over any default the script sets.
export NCCL_TUNER_CONFIG_PATH={{ .Values.worker.ncclTunerConfig | quote }}
if [[ ! -f "${NCCL_TUNER_CONFIG_PATH}" ]]; then
  echo "nemo-rl-gke: NCCL tuner file ${NCCL_TUNER_CONFIG_PATH} is missing on this node" >&2
  exit 1
fi
echo "nemo-rl-gke: starting the Ray worker"
{{ include "ray-cluster.runRay" . }}
{{- end -}}
