{{/* The operator's image reference: repository:tag, the tag defaulting to appVersion. */}}
{{- define "valkey-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
