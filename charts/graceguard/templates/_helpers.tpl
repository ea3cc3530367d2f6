{{/*
Names. fullname is shared by the Deployment, Service, ServiceAccount, RBAC and
both webhook configurations (distinct kinds, so one name serves both).
*/}}
{{- define "graceguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "graceguard.fullname" -}}
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

{{- define "graceguard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "graceguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "graceguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "graceguard.labels" -}}
helm.sh/chart: {{ include "graceguard.chart" . }}
{{ include "graceguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: graceguard
{{- end -}}

{{/*
The label that marks graceguard's own Pods; the Pod webhooks' objectSelector
excludes it. A graceguard.io key, so no user workload carries it by accident
(app.kubernetes.io/name=graceguard could be anyone's).
*/}}

{{- define "graceguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "graceguard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false: name an existing ServiceAccount in the release namespace" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "graceguard.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding tls.crt and tls.key, mounted at the cert dir, per certificates.mode. */}}
{{- define "graceguard.certSecretName" -}}
{{- $mode := .Values.certificates.mode -}}
{{- if eq $mode "self-managed" -}}
{{- printf "%s-cert" (include "graceguard.fullname" .) -}}
{{- else if eq $mode "cert-manager" -}}
{{- printf "%s-tls" (include "graceguard.fullname" .) -}}
{{- else -}}
{{- required "certificates.secret.name is required when certificates.mode is secret: the name of a kubernetes.io/tls Secret in the release namespace" .Values.certificates.secret.name -}}
{{- end -}}
{{- end -}}

{{- define "graceguard.certDir" -}}/tmp/k8s-webhook-server/serving-certs{{- end -}}

{{- define "graceguard.serviceHost" -}}
{{- printf "%s.%s.svc" (include "graceguard.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/*
Namespaces the API server never sends to graceguard: kube-system, the release
namespace (graceguard would otherwise review its own Pods and could block its
own start) and config.excludedNamespaces. The same list, minus the release
namespace (which the server learns from POD_NAMESPACE), is --excluded-namespaces.
*/}}
{{- define "graceguard.excludedNamespaces" -}}
{{- $ns := concat (list "kube-system") .Values.config.excludedNamespaces -}}
{{- join "," (uniq $ns) -}}
{{- end -}}

{{/*
Webhook configuration parts shared by the three webhooks.
*/}}
{{- define "graceguard.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: graceguard.io/inject
      operator: In
      values: ["enabled"]
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- range uniq (concat (list "kube-system" .Release.Namespace) .Values.config.excludedNamespaces) }}
        - {{ . | quote }}
        {{- end }}
{{- end -}}

{{- define "graceguard.clientConfig" -}}
{{- $root := index . 0 -}}
{{- $path := index . 1 -}}
clientConfig:
  service:
    name: {{ include "graceguard.fullname" $root }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ $path }}
    port: {{ $root.Values.service.port }}
  {{- if eq $root.Values.certificates.mode "secret" }}
  caBundle: {{ $root.Values.certificates.secret.caBundle }}
  {{- end }}
{{- end -}}

{{/*
Annotations of the webhook configurations. self-managed: none, and no caBundle
in the template either: graceguard's rotator writes it (field manager
graceguard-cert-rotator) and Helm neither owns nor sends the field, so an
upgrade (client-side three-way merge, or server-side apply) leaves it alone.
*/}}
{{- define "graceguard.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s-serving" .Release.Namespace (include "graceguard.fullname" .) }}
{{- end -}}
{{- end -}}

{{/*
graceguard.seconds: the number of seconds (a float, as text) in a duration
value, read as the webhook's budget.ParseDuration reads it: a Go duration
("10s", "1m30s", "1500ms", ".5s", "+5s") or whole seconds (10, "10"),
surrounding spaces ignored. Fails naming the key otherwise (a negative
duration too). Usage:
  include "graceguard.seconds" (list "shutdown.delay" .Values.shutdown.delay)
Templates cannot call Go; test/chart holds this to budget.ParseDuration on
one table of inputs (TestChartReadsDurationsAsTheWebhookDoes).
*/}}
{{- define "graceguard.seconds" -}}
{{- $key := index . 0 -}}
{{- $text := toString (index . 1) | trim -}}
{{- $number := `([0-9]+(\.[0-9]*)?|\.[0-9]+)` -}}
{{- $unit := `(ns|us|µs|μs|ms|s|m|h)` -}}
{{- if regexMatch `^[0-9]+$` $text -}}
{{- $text -}}
{{- else if regexMatch `^[+]?0$` $text -}}
0
{{- else if regexMatch (printf `^[+]?(%s%s)+$` $number $unit) $text -}}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "μs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll (printf `%s%s` $number $unit) $text -1 -}}
{{- $n := regexFind (printf `^%s` $number) . -}}
{{- $total = addf $total (mulf (float64 $n) (get $units (trimPrefix $n .))) -}}
{{- end -}}
{{- $total -}}
{{- else -}}
{{- fail (printf "%s: %q is not a duration; want a Go duration (30s, 1m30s, 1500ms) or whole seconds (30)" $key $text) -}}
{{- end -}}
{{- end -}}

{{/* graceguard.ceilSeconds: graceguard.seconds rounded up to whole seconds, as text. */}}
{{- define "graceguard.ceilSeconds" -}}
{{- include "graceguard.seconds" . | float64 | ceil | int -}}
{{- end -}}

{{/*
graceguard.checkRange: fails unless min <= duration <= max (seconds). Usage:
  include "graceguard.checkRange" (list "shutdown.delay" .Values.shutdown.delay 0 300 "0 to 5m")
*/}}
{{- define "graceguard.checkRange" -}}
{{- $key := index . 0 -}}
{{- $s := include "graceguard.seconds" (list $key (index . 1)) | float64 -}}
{{- if or (lt $s (float64 (index . 2))) (gt $s (float64 (index . 3))) -}}
{{- fail (printf "%s: %v is out of range; want %s" $key (index . 1) (index . 4)) -}}
{{- end -}}
{{- end -}}

{{/*
Mirror Pods (static Pods as the API server shows them) belong to the kubelet,
which ignores changes to them; objectSelector cannot test annotations, CEL can.
*/}}
{{- define "graceguard.mirrorPodCondition" -}}
matchConditions:
  - name: not-a-mirror-pod
    expression: >-
      !has(object.metadata.annotations) ||
      !('kubernetes.io/config.mirror' in object.metadata.annotations)
{{- end -}}

{{/*
The longest timeoutSeconds of the three webhooks, in seconds: the webhook's
--webhook-timeout.
*/}}
{{- define "graceguard.webhookTimeout" -}}
{{- $h := .Values.webhooks -}}
{{- max (int $h.mutatePods.timeoutSeconds) (int $h.validatePods.timeoutSeconds) (int $h.validateWorkloads.timeoutSeconds) -}}
{{- end -}}
