{{/* The objects' name: the release's, as podset-host's own manifests name them. */}}
{{- define "podset-host.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "podset-host.selectorLabels" -}}
app.kubernetes.io/name: podset-host
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "podset-host.labels" -}}
{{ include "podset-host.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "podset-host.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}
