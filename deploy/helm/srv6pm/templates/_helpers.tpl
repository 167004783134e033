{{/* Names, labels, images, and the choices every template shares. */}}

{{- define "srv6pm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Object names are "<fullname>-<component>": 63 characters at most, so the base is cut to 40. */}}
{{- define "srv6pm.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "srv6pm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of a component: (dict "ctx" $ "component" "controller"). */}}
{{- define "srv6pm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "srv6pm.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "srv6pm.labels" -}}
helm.sh/chart: {{ include "srv6pm.chart" .ctx }}
{{ include "srv6pm.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: srv6pm
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* An image reference: (dict "ctx" $ "image" .Values.controller.image). */}}
{{- define "srv6pm.image" -}}
{{- $registry := default .ctx.Values.image.registry .image.registry -}}
{{- $tag := default (default .ctx.Chart.AppVersion .ctx.Values.image.tag) .image.tag -}}
{{- $ref := ternary (printf "%s/%s" $registry .image.repository) .image.repository (ne $registry "") -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $ref .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $ref (toString $tag) -}}
{{- end -}}
{{- end -}}

{{- define "srv6pm.imagePullSecrets" -}}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The restricted Pod Security profile, for every container but the node manager's. */}}
{{- define "srv6pm.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
fsGroup: {{ .uid }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "srv6pm.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Settings as SRV6PM_* environment variables (a ConfigMap's data): maps become JSON. */}}
{{- define "srv6pm.settingsEnv" -}}
{{- range $name, $value := . }}
SRV6PM_{{ upper $name }}: {{ ternary (toJson $value) (toString $value) (kindIs "map" $value) | quote }}
{{- end }}
{{- end -}}

{{/* "true" when the chart issues certificates through cert-manager. */}}
{{- define "srv6pm.tls.certManager" -}}
{{- $enabled := .Values.tls.certManager.enabled -}}
{{- if and (not (include "srv6pm.tls.existing" .)) (or (eq (toString $enabled) "true") (and (eq (toString $enabled) "auto") (.Capabilities.APIVersions.Has "cert-manager.io/v1"))) -}}
true
{{- end -}}
{{- end -}}

{{/* "true" when both certificates come from Secrets of the user's. */}}
{{- define "srv6pm.tls.existing" -}}
{{- $s := .Values.tls.existingSecrets -}}
{{- if and $s.controller $s.nodeManager -}}
true
{{- else if or $s.controller $s.nodeManager -}}
{{- fail "tls.existingSecrets: set both controller and nodeManager, or neither" -}}
{{- end -}}
{{- end -}}

{{- define "srv6pm.tls.controllerSecret" -}}
{{- default (printf "%s-controller-tls" (include "srv6pm.fullname" .)) .Values.tls.existingSecrets.controller -}}
{{- end -}}

{{- define "srv6pm.tls.nodeManagerSecret" -}}
{{- default (printf "%s-node-manager-tls" (include "srv6pm.fullname" .)) .Values.tls.existingSecrets.nodeManager -}}
{{- end -}}

{{/* Kafka brokers: the bundled one's Service, else kafka.bootstrapServers. */}}
{{- define "srv6pm.kafka.bootstrap" -}}
{{- if .Values.kafka.bundled.enabled -}}
{{- if .Values.kafka.bootstrapServers -}}
{{- fail "kafka: set bootstrapServers or bundled.enabled, not both" -}}
{{- end -}}
{{- printf "%s-kafka.%s.svc:9092" (include "srv6pm.fullname" .) .Release.Namespace -}}
{{- else if .Values.kafka.bootstrapServers -}}
{{- .Values.kafka.bootstrapServers -}}
{{- else -}}
{{- fail "kafka: set bootstrapServers (external brokers) or bundled.enabled" -}}
{{- end -}}
{{- end -}}

{{- define "srv6pm.influxdb.url" -}}
{{- if .Values.influxdb.bundled.enabled -}}
{{- if .Values.influxdb.url -}}
{{- fail "influxdb: set url or bundled.enabled, not both" -}}
{{- end -}}
{{- printf "http://%s-influxdb.%s.svc:8086" (include "srv6pm.fullname" .) .Release.Namespace -}}
{{- else if .Values.influxdb.url -}}
{{- .Values.influxdb.url -}}
{{- else -}}
{{- fail "influxdb: set url (external server) or bundled.enabled" -}}
{{- end -}}
{{- end -}}

{{/* The Secret and key holding the InfluxDB token; empty when the external server has none. */}}
{{- define "srv6pm.influxdb.tokenSecret" -}}
{{- if .Values.influxdb.bundled.enabled -}}
{{- printf "%s-influxdb" (include "srv6pm.fullname" .) -}}
{{- else if .Values.influxdb.existingSecret -}}
{{- .Values.influxdb.existingSecret -}}
{{- else if .Values.influxdb.token -}}
{{- printf "%s-influxdb" (include "srv6pm.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "srv6pm.influxdb.tokenKey" -}}
{{- ternary .Values.influxdb.existingSecretKey "token" (and (not .Values.influxdb.bundled.enabled) (ne .Values.influxdb.existingSecret "")) -}}
{{- end -}}

{{/* sqlite, bundled or external: where the controller keeps its desired state. */}}
{{- define "srv6pm.database" -}}
{{- $pg := .Values.postgresql -}}
{{- $external := or $pg.external.existingSecret $pg.external.url -}}
{{- if and $external $pg.bundled.enabled -}}
{{- fail "postgresql: set external or bundled.enabled, not both" -}}
{{- else if $external -}}
external
{{- else if $pg.bundled.enabled -}}
bundled
{{- else -}}
sqlite
{{- end -}}
{{- end -}}

{{/* The Secret and key holding SRV6PM_DATABASE_URL (PostgreSQL only). */}}
{{- define "srv6pm.database.urlSecret" -}}
{{- if .Values.postgresql.external.existingSecret -}}
{{- .Values.postgresql.external.existingSecret -}}
{{- else -}}
{{- printf "%s-database" (include "srv6pm.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "srv6pm.database.urlKey" -}}
{{- ternary .Values.postgresql.external.existingSecretKey "url" (ne .Values.postgresql.external.existingSecret "") -}}
{{- end -}}

{{/*
A secret value: the one given, else the one already in the cluster (lookup, so upgrades keep
it), else a new one. (dict "ctx" $ "name" SECRET "key" KEY "given" VALUE "new" NEW)
*/}}
{{- define "srv6pm.secretValue" -}}
{{- if .given -}}
{{- .given -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" .ctx.Release.Namespace .name -}}
{{- if and $existing (hasKey (default dict $existing.data) .key) -}}
{{- index $existing.data .key | b64dec -}}
{{- else -}}
{{- .new -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The STAMP key file and the Secret it comes from. */}}
{{- define "srv6pm.stampKey.secret" -}}
{{- default (printf "%s-stamp-key" (include "srv6pm.fullname" .)) .Values.controller.stampKey.existingSecret -}}
{{- end -}}

{{- define "srv6pm.bootstrapToken.secret" -}}
{{- default (printf "%s-bootstrap-token" (include "srv6pm.fullname" .)) .Values.controller.bootstrapToken.existingSecret -}}
{{- end -}}
