{{- define "sparkpulse.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sparkpulse.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The headless Service: the StatefulSet's governing Service, and the one the ServiceMonitor scrapes. */}}
{{- define "sparkpulse.headlessName" -}}
{{- printf "%s-headless" (include "sparkpulse.fullname" . | trunc 54 | trimSuffix "-") -}}
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

{{- define "sparkpulse.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sparkpulse.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Where the state volume is mounted: sparkpulse's state-dir. */}}
{{- define "sparkpulse.stateDir" -}}
/var/lib/sparkpulse
{{- end -}}

{{/* There is no public image: the repository is the one the user pushed to. */}}
{{- define "sparkpulse.image" -}}
{{- $repo := required "image.repository is required: sparkpulse publishes no image. Build and push it from the repository: docker build -t REGISTRY/sparkpulse:$(cat VERSION) . && docker push REGISTRY/sparkpulse:$(cat VERSION), then install with --set image.repository=REGISTRY/sparkpulse" .Values.image.repository -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
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
sparkpulse.configSource: where sparkpulse.toml comes from. "existing": a
ConfigMap or Secret of the user's (existingConfig), which the chart cannot
read; "config": the config value, verbatim; "chart": written by the chart
from the influxdb, annotate and deltas values.
*/}}
{{- define "sparkpulse.configSource" -}}
{{- if and .Values.existingConfig.configMap .Values.existingConfig.secret -}}
{{- fail "existingConfig: give configMap or secret, not both" -}}
{{- end -}}
{{- if or .Values.existingConfig.configMap .Values.existingConfig.secret -}}
{{- if .Values.config -}}
{{- fail "config and existingConfig are both set: give one" -}}
{{- end -}}
existing
{{- else if .Values.config -}}
config
{{- else -}}
chart
{{- end -}}
{{- end -}}

{{/*
sparkpulse.settings: what the chart needs to know of the config, as YAML
(read with fromYaml): its enabled [[graphite]] blocks (protocol, port,
whether it sets its caps), whether it polls Spark ([annotate] urls), and
the keys of [influxdb], [deltas], [log] and [annotate] it sets, which the
chart then does not give by environment.
The config value and the chart's own config are read with fromToml; an
existing config is described by the existingConfig.listeners and
annotate.urls values.
*/}}
{{- define "sparkpulse.settings" -}}
{{- $source := include "sparkpulse.configSource" . -}}
{{- $blocks := list -}}
{{- $annotate := false -}}
{{- $sets := list -}}
{{- if eq $source "existing" -}}
{{- range $i, $l := .Values.existingConfig.listeners -}}
{{- $p := lower (toString (default "TCP" $l.protocol)) -}}
{{- $blocks = append $blocks (dict "protocol" $p "port" (int64 $l.port) "index" (add $i 1) "cached" true "held" true) -}}
{{- end -}}
{{- $annotate = not (empty .Values.annotate.urls) -}}
{{- else -}}
{{- $text := .Values.config -}}
{{- if eq $source "chart" -}}{{- $text = include "sparkpulse.chartConfig" (dict "top" . "plan" dict) -}}{{- end -}}
{{- $cfg := fromToml $text -}}
{{- if hasKey $cfg "Error" -}}
{{- fail (printf "config: not valid TOML: %s" $cfg.Error) -}}
{{- end -}}
{{- range $i, $g := (get $cfg "graphite" | default list) -}}
{{- if ne (toString (get $g "enabled")) "false" -}}
{{- $bind := toString (get $g "bind-address" | default ":2003") -}}
{{- $port := regexFind "[0-9]+$" $bind -}}
{{- if not (regexMatch ":[0-9]+$" $bind) -}}
{{- fail (printf "config: [[graphite]] #%d bind-address %q: want host:port or :port" (add $i 1) $bind) -}}
{{- end -}}
{{- $p := lower (toString (get $g "protocol" | default "tcp")) -}}
{{- $blocks = append $blocks (dict "protocol" $p "port" ($port | int64) "index" (add $i 1) "cached" (hasKey $g "max-cached-series") "held" (or (eq $p "udp") (hasKey $g "max-held-bytes"))) -}}
{{- end -}}
{{- end -}}
{{- $annotate = not (empty (get (get $cfg "annotate" | default dict) "urls")) -}}
{{- if eq $source "config" -}}{{- $annotate = or $annotate (not (empty .Values.annotate.urls)) -}}{{- end -}}
{{- range $section := list "influxdb" "deltas" "log" "annotate" -}}
{{- range $k, $_ := (get $cfg $section | default dict) -}}
{{- $sets = append $sets (printf "%s.%s" $section $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $blocks -}}
{{- fail "config: no enabled [[graphite]] block: nothing to listen on" -}}
{{- end -}}
{{- toYaml (dict "source" $source "blocks" $blocks "annotate" $annotate "sets" $sets) -}}
{{- end -}}

{{/*
sparkpulse.listeners: the pod's Graphite ports, one per port and protocol
of the enabled blocks, as YAML; the Services and the network policy use
the same. The first TCP and the first UDP one are named graphite-tcp and
graphite-udp, the others tcp-PORT and udp-PORT.
*/}}
{{- define "sparkpulse.listeners" -}}
{{- $s := include "sparkpulse.settings" . | fromYaml -}}
{{- $seen := dict -}}
{{- $out := list -}}
{{- range $s.blocks -}}
{{- $key := printf "%s-%d" .protocol (int64 .port) -}}
{{- if not (hasKey $seen $key) -}}
{{- $name := printf "graphite-%s" .protocol -}}
{{- if hasKey $seen .protocol -}}{{- $name = $key -}}{{- end -}}
{{- $_ := set $seen $key true -}}
{{- $_ := set $seen .protocol true -}}
{{- $out = append $out (dict "name" $name "port" (int64 .port) "protocol" (upper .protocol)) -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "listeners" $out) -}}
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

Writers: one per enabled [[graphite]] block, one for sparkpulse's own
metrics, one for annotations when [annotate] has urls.

Memory: GOMEMLIMIT is 90 % of the limit. Out of it come each writer's
in-memory queue (1/32 of the limit, 1–64 MiB), the partial lines each TCP
block holds (the same), a fixed 96 MiB (the runtime, 4 096 idle
connections, decoding Spark's REST answers, read buffers), and the rest is
for series: each block may cache as many series as its equal share of it
holds at bytesPerSeries, and delta baselines are capped at the same number
(a quarter of it per application).

Disk: 90 % of the volume, less room for two copies of the delta baseline
file (40 bytes a series, while it is being replaced) and for the ingest
log (an eighth of the volume, 128 MiB–1 GiB), shared equally among the
writers' disk queues.
*/}}
{{- define "sparkpulse.plan" -}}
{{- $mi := 1048576 -}}
{{- $bytesPerSeries := 1024 -}}
{{- $s := include "sparkpulse.settings" . | fromYaml -}}
{{- $limit := (.Values.resources.limits | default dict).memory -}}
{{- if not $limit -}}
{{- fail "resources.limits.memory is required: GOMEMLIMIT, the queues and the series caps are derived from it" -}}
{{- end -}}
{{- $mem := include "sparkpulse.bytes" (dict "name" "resources.limits.memory" "value" $limit) | int64 -}}
{{- $goMemLimit := div (mul $mem 9) 10 -}}
{{- $blocks := len $s.blocks -}}
{{- $tcp := 0 -}}
{{- range $s.blocks -}}{{- if eq .protocol "tcp" -}}{{- $tcp = add $tcp 1 -}}{{- end -}}{{- end -}}
{{- $writers := add $blocks 1 -}}
{{- if $s.annotate -}}{{- $writers = add $writers 1 -}}{{- end -}}
{{- $queue := min (max (div $mem 32) $mi) (mul 64 $mi) -}}
{{- $held := min (max (div $mem 32) $mi) (mul 64 $mi) -}}
{{- $fixed := add (mul $writers $queue) (mul $tcp $held) -}}
{{- $series := sub (sub $goMemLimit $fixed) (mul 96 $mi) -}}
{{- if lt $series (mul 64 $mi) -}}
{{- fail (printf "resources.limits.memory %v: too small; with %d writers and %d TCP blocks it must be at least %dMi" $limit $writers $tcp (add (div (div (mul (add $fixed (mul 160 $mi)) 10) 9) $mi) 1)) -}}
{{- end -}}
{{- $cached := div (div $series $blocks) $bytesPerSeries -}}
{{- $size := include "sparkpulse.bytes" (dict "name" "persistence.size" "value" .Values.persistence.size) | int64 -}}
{{- $ingestLog := min (max (div $size 8) (mul 128 $mi)) (mul 1024 $mi) -}}
{{- $stateReserve := add (mul 2 $cached 40) (mul 16 $mi) $ingestLog -}}
{{- $disk := div (sub (div (mul $size 9) 10) $stateReserve) $writers -}}
{{- if lt $disk (mul 16 $mi) -}}
{{- fail (printf "persistence.size %v: too small; %d writers' disk queues of at least 16Mi each, the delta baselines and the ingest log need %dMi" .Values.persistence.size $writers (add (div (div (mul (add (mul $writers 16 $mi) $stateReserve) 10) 9) $mi) 1)) -}}
{{- end -}}
goMemLimit: {{ $goMemLimit }}
writers: {{ $writers }}
maxQueueBytes: {{ $queue }}
maxHeldBytes: {{ $held }}
maxCachedSeries: {{ $cached }}
maxSeries: {{ $cached }}
maxSeriesPerApp: {{ div $cached 4 }}
maxDiskQueueBytes: {{ $disk }}
maxIngestLogBytes: {{ $ingestLog }}
{{- end -}}

{{/*
sparkpulse.chartConfig: the sparkpulse.toml the chart writes when the
config value is empty (dict "top" . "plan" $plan; an empty plan writes the
shape without the derived figures, which sparkpulse.settings reads). The
admin endpoint and state-dir are the environment's (sparkpulse.env).
*/}}
{{- define "sparkpulse.chartConfig" -}}
{{- $v := .top.Values -}}
{{- $plan := .plan -}}
# Limits marked "derived" come from resources.limits.memory and
# persistence.size (templates/_helpers.tpl, sparkpulse.plan).
[influxdb]
url = {{ $v.influxdb.url | quote }}
{{- if $v.influxdb.org }}
org = {{ $v.influxdb.org | quote }}
{{- end }}
create-database = {{ $v.influxdb.createDatabase }}
{{- if $plan }}
max-queue-bytes = {{ $plan.maxQueueBytes | int64 }}  # derived
max-disk-queue-bytes = {{ $plan.maxDiskQueueBytes | int64 }}  # derived: {{ $plan.writers | int64 }} writers
{{- end }}

[deltas]
idle-ttl = {{ $v.deltas.idleTTL | quote }}
first-sample-grace = {{ $v.deltas.firstSampleGrace | quote }}
{{- if $plan }}
max-series = {{ $plan.maxSeries | int64 }}  # derived
max-series-per-app = {{ $plan.maxSeriesPerApp | int64 }}  # derived
max-ingest-log-bytes = {{ $plan.maxIngestLogBytes | int64 }}  # derived: an eighth of the volume
{{- end }}
{{- with $v.annotate.urls }}

[annotate]
urls = [{{ range $i, $u := . }}{{ if $i }}, {{ end }}{{ $u | quote }}{{ end }}]
{{- with $v.annotate.username }}
username = {{ . | quote }}
{{- end }}
{{- end }}
{{- range $protocol := list "tcp" "udp" }}

[[graphite]]
bind-address = {{ printf ":%d" (int64 $v.service.port) | quote }}
protocol = {{ $protocol | quote }}
{{ include "sparkpulse.target" $.top }}
{{- if $plan }}
max-cached-series = {{ $plan.maxCachedSeries | int64 }}  # derived
{{- if eq $protocol "tcp" }}
max-held-bytes = {{ $plan.maxHeldBytes | int64 }}  # derived
{{- end }}
{{- end }}
{{- end }}
{{ end -}}

{{/* sparkpulse.configText: sparkpulse.toml as the ConfigMap carries it. */}}
{{- define "sparkpulse.configText" -}}
{{- if eq (include "sparkpulse.configSource" .) "config" -}}
{{- .Values.config -}}
{{- else -}}
{{- include "sparkpulse.chartConfig" (dict "top" . "plan" (include "sparkpulse.plan" . | fromYaml)) -}}
{{- end -}}
{{- end -}}

{{/*
sparkpulse.env: the settings the chart gives by environment, which
sparkpulse lays over the file: the admin endpoint and state-dir always
(the probes and the volume depend on them); JSON logs unless the config
says otherwise; with a pasted config, the values and derived limits it
leaves out (a block's are SPARKPULSE_GRAPHITE_<N>_<KEY>, N its position
in the file from 1); with an existing config, which the chart cannot
read, the derived limits.
*/}}
{{- define "sparkpulse.env" -}}
{{- $plan := include "sparkpulse.plan" . | fromYaml -}}
{{- $s := include "sparkpulse.settings" . | fromYaml -}}
- name: SPARKPULSE_ADMIN_BIND_ADDRESS
  value: {{ printf ":%d" (int64 .Values.adminPort) | quote }}
- name: SPARKPULSE_STATE_DIR
  value: {{ include "sparkpulse.stateDir" . }}
{{- if and (ne $s.source "existing") (not (has "log.format" $s.sets)) }}
- name: SPARKPULSE_LOG_FORMAT
  value: json
{{- end }}
{{- if ne $s.source "chart" }}
{{- $byKey := dict
  "influxdb.max-queue-bytes" (dict "env" "SPARKPULSE_INFLUXDB_MAX_QUEUE_BYTES" "value" (int64 $plan.maxQueueBytes))
  "influxdb.max-disk-queue-bytes" (dict "env" "SPARKPULSE_INFLUXDB_MAX_DISK_QUEUE_BYTES" "value" (int64 $plan.maxDiskQueueBytes))
  "deltas.max-series" (dict "env" "SPARKPULSE_DELTAS_MAX_SERIES" "value" (int64 $plan.maxSeries))
  "deltas.max-series-per-app" (dict "env" "SPARKPULSE_DELTAS_MAX_SERIES_PER_APP" "value" (int64 $plan.maxSeriesPerApp))
  "deltas.max-ingest-log-bytes" (dict "env" "SPARKPULSE_DELTAS_MAX_INGEST_LOG_BYTES" "value" (int64 $plan.maxIngestLogBytes)) -}}
{{- if eq $s.source "config" }}
{{- $_ := set $byKey "influxdb.url" (dict "env" "SPARKPULSE_INFLUXDB_URL" "value" .Values.influxdb.url) -}}
{{- $_ := set $byKey "influxdb.create-database" (dict "env" "SPARKPULSE_INFLUXDB_CREATE_DATABASE" "value" .Values.influxdb.createDatabase) -}}
{{- $_ := set $byKey "deltas.idle-ttl" (dict "env" "SPARKPULSE_DELTAS_IDLE_TTL" "value" .Values.deltas.idleTTL) -}}
{{- $_ := set $byKey "deltas.first-sample-grace" (dict "env" "SPARKPULSE_DELTAS_FIRST_SAMPLE_GRACE" "value" .Values.deltas.firstSampleGrace) -}}
{{- with .Values.influxdb.org }}
{{- $_ := set $byKey "influxdb.org" (dict "env" "SPARKPULSE_INFLUXDB_ORG" "value" .) -}}
{{- end }}
{{- with .Values.annotate.urls }}
{{- $_ := set $byKey "annotate.urls" (dict "env" "SPARKPULSE_ANNOTATE_URLS" "value" (toJson .)) -}}
{{- end }}
{{- with .Values.annotate.username }}
{{- $_ := set $byKey "annotate.username" (dict "env" "SPARKPULSE_ANNOTATE_USERNAME" "value" .) -}}
{{- end }}
{{- end }}
{{- range $k := keys $byKey | sortAlpha }}
{{- if not (has $k $s.sets) }}
{{- $e := get $byKey $k }}
- name: {{ $e.env }}
  value: {{ $e.value | toString | quote }}
{{- end }}
{{- end }}
{{- if eq $s.source "config" }}
{{- range $s.blocks }}
{{- if not .cached }}
- name: SPARKPULSE_GRAPHITE_{{ int64 .index }}_MAX_CACHED_SERIES
  value: {{ int64 $plan.maxCachedSeries | toString | quote }}
{{- end }}
{{- if not .held }}
- name: SPARKPULSE_GRAPHITE_{{ int64 .index }}_MAX_HELD_BYTES
  value: {{ int64 $plan.maxHeldBytes | toString | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The chart's own Secret is made when a secret is given as a value. */}}
{{- define "sparkpulse.ownSecret" -}}
{{- if or (and .Values.influxdb.token (not .Values.influxdb.existingSecret)) (and (or .Values.annotate.password .Values.annotate.token) (not .Values.annotate.existingSecret)) -}}
true
{{- end -}}
{{- end -}}
