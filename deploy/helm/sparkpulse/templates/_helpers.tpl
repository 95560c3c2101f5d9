{{- define "sparkpulse.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sparkpulse.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sparkpulse.labels" -}}
app.kubernetes.io/name: {{ include "sparkpulse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "sparkpulse.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sparkpulse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sparkpulse.secretName" -}}
{{- default (include "sparkpulse.fullname" .) .Values.influxdb.existingSecret -}}
{{- end -}}

{{/* The target keys of a [[graphite]] block. */}}
{{- define "sparkpulse.target" -}}
{{- if .Values.influxdb.bucket -}}
bucket = {{ .Values.influxdb.bucket | quote }}
{{- else -}}
database = {{ .Values.influxdb.database | quote }}
{{- end -}}
{{- end -}}
