{{/* The base name of every object: the release name, with "sluice" unless it already says so. */}}
{{- define "sluice.fullname" -}}
{{- if contains "sluice" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-sluice" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sluice.labels" -}}
app.kubernetes.io/name: sluice
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: include with (dict "root" $ "component" "console"). */}}
{{- define "sluice.selector" -}}
app.kubernetes.io/name: sluice
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sluice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The environment every binary shares: MySQL and Redis. */}}
{{- define "sluice.storeEnv" -}}
- name: SLUICE_MYSQL_DSN
  valueFrom:
    secretKeyRef:
      name: {{ required "mysql.existingSecret is required: the name of a Secret holding the MySQL DSN" .Values.mysql.existingSecret }}
      key: {{ .Values.mysql.dsnKey }}
{{- with .Values.redis }}
{{- if .addr }}
- name: SLUICE_REDIS_ADDR
  value: {{ .addr | quote }}
{{- end }}
{{- if .sentinel.masterName }}
- name: SLUICE_REDIS_SENTINEL_MASTER
  value: {{ .sentinel.masterName | quote }}
- name: SLUICE_REDIS_SENTINEL_ADDRS
  value: {{ join "," .sentinel.addrs | quote }}
{{- end }}
{{- if .clusterAddrs }}
- name: SLUICE_REDIS_CLUSTER
  value: {{ join "," .clusterAddrs | quote }}
{{- end }}
{{- if .db }}
- name: SLUICE_REDIS_DB
  value: {{ .db | quote }}
{{- end }}
{{- if .existingSecret }}
- name: SLUICE_REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .passwordKey }}
{{- if .usernameKey }}
- name: SLUICE_REDIS_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .usernameKey }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Pod-level settings every component shares; include with (dict "root" $ "c" .Values.console). */}}
{{- define "sluice.podCommon" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
