{{/* The names every object of a release is made from. */}}
{{- define "nbjobs.fullname" -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "nbjobs.labels" -}}
app.kubernetes.io/name: nbjobs
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "nbjobs.selector" -}}
app.kubernetes.io/name: nbjobs
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: job-service
{{- end -}}

{{/* Where the jobs run: nbjobs.yaml's backend.kubernetes.namespace. */}}
{{- define "nbjobs.jobsNamespace" -}}
{{- $kube := (.Values.config.backend | default dict).kubernetes | default dict -}}
{{- $kube.namespace | default "nbjobs" -}}
{{- end -}}

{{- define "nbjobs.tokenSecret" -}}
{{- .Values.hub.existingTokenSecret | default (printf "%s-service-token" (include "nbjobs.fullname" .)) -}}
{{- end -}}

{{- define "nbjobs.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* "true" when some flavor spans nodes (flavors[].nodes > 1). */}}
{{- define "nbjobs.multiNode" -}}
{{- range .Values.config.flavors | default list -}}
{{- if gt (int (.nodes | default 1)) 1 }}true{{ end -}}
{{- end -}}
{{- end -}}

{{/* "true" when some flavor names a scheduler of its own (KAI, Volcano). */}}
{{- define "nbjobs.otherScheduler" -}}
{{- range .Values.config.flavors | default list -}}
{{- if .scheduler }}true{{ end -}}
{{- end -}}
{{- end -}}

{{/* "true" when Kueue admits jobs (backend.kubernetes.kueue, or a flavor's queue). */}}
{{- define "nbjobs.kueue" -}}
{{- $kube := (.Values.config.backend | default dict).kubernetes | default dict -}}
{{- if $kube.kueue }}true{{ end -}}
{{- range .Values.config.flavors | default list -}}
{{- if .queue }}true{{ end -}}
{{- end -}}
{{- end -}}

{{/* The hub's name for the job service (hub_config/setup.py SERVICE_NAME): /services/nbjobs/. */}}
{{- define "nbjobs.serviceName" -}}
nbjobs
{{- end -}}
