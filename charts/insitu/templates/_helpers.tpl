{{/* The labels every object of deploy/ carries. */}}
{{- define "insitu.labels" -}}
app.kubernetes.io/name: insitu
{{- end -}}

{{/* The controller pods' labels (Deployment selector, Service selector, anti-affinity). */}}
{{- define "insitu.controllerLabels" -}}
app.kubernetes.io/name: insitu
app.kubernetes.io/component: controller
{{- end -}}

{{/* The port of an `host:port` address value, as a number. */}}
{{- define "insitu.port" -}}
{{- . | splitList ":" | last | int -}}
{{- end -}}
