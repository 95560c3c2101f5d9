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

{{/*
sparkpulse.bytes: a Kubernetes quantity of bytes ("1Gi", "512Mi", "2G",
"1073741824") as an integer; anything else fails the render, naming the
value.
*/}}
{{- define "sparkpulse.bytes" -}}
{{- $q := .value -}}
{{- if kindIs "float64" $q -}}{{- $q = int64 $q | toString -}}{{- end -}}
{{- $q = toString $q -}}
{{- if not (regexMatch "^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$" $q) -}}
{{- fail (printf "%s %q: want a whole number of bytes with an optional unit (Ki, Mi, Gi, Ti, k, M, G, T)" .name $q) -}}
{{- end -}}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- mul (regexFind "^[0-9]+" $q | int64) (get $units (regexReplaceAll "^[0-9]+" $q "")) -}}
{{- end -}}

{{/*
sparkpulse.plan: the limits derived from the pod's memory limit and volume
size, as YAML (read with fromYaml). The one place they are worked out.

Memory: GOMEMLIMIT is 90 % of the limit. Out of it come each writer's
in-memory queue (1/32 of the limit, 1–64 MiB), the partial lines TCP holds
(the same), a fixed 96 MiB (the runtime, 4 096 idle connections, decoding
Spark's REST answers, read buffers), and the rest is for series: each
block (TCP, UDP) may cache as many series as half of it holds at
bytesPerSeries, and delta baselines are capped at the same number (a
quarter of it per application).

Disk: 90 % of the volume, less room for two copies of the delta baseline
file (40 bytes a series, while it is being replaced), shared equally among
the writers' disk queues.
*/}}
{{- define "sparkpulse.plan" -}}
{{- $mi := 1048576 -}}
{{- $bytesPerSeries := 1024 -}}
{{- $limit := (.Values.resources.limits | default dict).memory -}}
{{- if not $limit -}}
{{- fail "resources.limits.memory is required: GOMEMLIMIT, the queues and the series caps are derived from it" -}}
{{- end -}}
{{- $mem := include "sparkpulse.bytes" (dict "name" "resources.limits.memory" "value" $limit) | int64 -}}
{{- $goMemLimit := div (mul $mem 9) 10 -}}
{{- $writers := 3 -}}{{/* TCP, UDP and sparkpulse's own metrics */}}
{{- if .Values.annotate.urls -}}{{- $writers = 4 -}}{{- end -}}
{{- $queue := min (max (div $mem 32) $mi) (mul 64 $mi) -}}
{{- $held := min (max (div $mem 32) $mi) (mul 64 $mi) -}}
{{- $series := sub (sub (sub $goMemLimit (mul $writers $queue)) $held) (mul 96 $mi) -}}
{{- if lt $series (mul 64 $mi) -}}
{{- fail (printf "resources.limits.memory %v: too small; with %d writers it must be at least %dMi" $limit $writers (add (div (div (mul (add (mul $writers $queue) $held (mul 160 $mi)) 10) 9) $mi) 1)) -}}
{{- end -}}
{{- $cached := div (div $series 2) $bytesPerSeries -}}
{{- $size := include "sparkpulse.bytes" (dict "name" "persistence.size" "value" .Values.persistence.size) | int64 -}}
{{- $stateReserve := add (mul 2 $cached 40) (mul 16 $mi) -}}
{{- $disk := div (sub (div (mul $size 9) 10) $stateReserve) $writers -}}
{{- if lt $disk (mul 16 $mi) -}}
{{- fail (printf "persistence.size %v: too small; %d writers' disk queues of at least 16Mi each and the delta baselines need %dMi" .Values.persistence.size $writers (add (div (div (mul (add (mul $writers 16 $mi) $stateReserve) 10) 9) $mi) 1)) -}}
{{- end -}}
goMemLimit: {{ $goMemLimit }}
writers: {{ $writers }}
maxQueueBytes: {{ $queue }}
maxHeldBytes: {{ $held }}
maxCachedSeries: {{ $cached }}
maxSeries: {{ $cached }}
maxSeriesPerApp: {{ div $cached 4 }}
maxDiskQueueBytes: {{ $disk }}
{{- end -}}

{{/* The chart's own Secret is made when a secret is given as a value. */}}
{{- define "sparkpulse.ownSecret" -}}
{{- if or (and .Values.influxdb.token (not .Values.influxdb.existingSecret)) (and (or .Values.annotate.password .Values.annotate.token) (not .Values.annotate.existingSecret)) -}}
true
{{- end -}}
{{- end -}}
