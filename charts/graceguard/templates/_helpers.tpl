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

{{/*
graceguard.goDuration: a duration value as a flag that reads Go durations
only takes it (--flush-interval, --reports-interval): whole seconds get
their unit. Usage: include "graceguard.goDuration" .Values.observer.flushInterval
*/}}
{{- define "graceguard.goDuration" -}}
{{- $text := toString . | trim -}}
{{- if regexMatch `^[0-9]+$` $text -}}{{ $text }}s{{- else -}}{{ $text }}{{- end -}}
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
    expression: {{ include "graceguard.cel.notMirrorPod" . | quote }}
{{- end -}}

{{/*
The longest timeoutSeconds of the three webhooks, in seconds: the webhook's
--webhook-timeout.
*/}}
{{- define "graceguard.webhookTimeout" -}}
{{- $h := .Values.webhooks -}}
{{- max (int $h.mutatePods.timeoutSeconds) (int $h.validatePods.timeoutSeconds) (int $h.validateWorkloads.timeoutSeconds) -}}
{{- end -}}

{{/*
The observer's own names and labels. Its Pods must not carry the webhook's
selector labels: the webhook Service, PodDisruptionBudget and spread
constraints select by those.
*/}}
{{- define "graceguard.observerName" -}}
{{- include "graceguard.hookName" (list . "observer") -}}
{{- end -}}

{{- define "graceguard.observerSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-observer" (include "graceguard.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "graceguard.observerLabels" -}}
helm.sh/chart: {{ include "graceguard.chart" . }}
{{ include "graceguard.observerSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: graceguard
app.kubernetes.io/component: observer
{{- end -}}

{{/*
The namespaces whose Pods the mode webhooks get: graceguard.modeSelector
(list . "enforce") are those in enforce mode (and those with a mode label
graceguard refuses, which its mutating webhook denies), (list . "warn") those
in warn mode; together every namespace, each once. A namespace without the
label is in config.defaultMode.
*/}}
{{- define "graceguard.modeExpression" -}}
{{- $root := index . 0 -}}
{{- $want := index . 1 -}}
{{- $defaultWarn := eq $root.Values.config.defaultMode "warn" -}}
- key: graceguard.io/mode
{{- if $defaultWarn }}
  operator: {{ if eq $want "enforce" }}In{{ else }}NotIn{{ end }}
  values: ["enforce"]
{{- else }}
  operator: {{ if eq $want "enforce" }}NotIn{{ else }}In{{ end }}
  values: ["warn"]
{{- end }}
{{- end -}}

{{/*
The matchCondition that sends a Pod to the validating webhook only when CEL
cannot prove, on the Pod as it is about to be stored (after every mutating
webhook, reinvocation included), what the webhook would check. pkg/cel
builds it from the webhook's own tables (make generate);
docs/admission.md says why each part holds, and test/harness/chart holds it
to pkg/mutate.Validate and its cost to the API server's limit.
*/}}
{{- define "graceguard.provenCondition" -}}
- name: not-proven-by-cel
  expression: |-
    {{- include "graceguard.cel.proven" . | nindent 4 }}
{{- end -}}

{{/*
graceguard.clusterDefaultArgs: the cluster defaults (pkg/optionflags), as
the webhook takes them; the observer takes the same when it writes policy
reports, so both decide alike.
*/}}
{{- define "graceguard.clusterDefaultArgs" -}}
- --default-routing-delay={{ .Values.config.defaultRoutingDelay }}
- --default-max-work={{ .Values.config.defaultMaxWork }}
- --default-cleanup={{ .Values.config.defaultCleanup }}
- --default-safety-margin={{ .Values.config.defaultSafetyMargin }}
- --max-grace-period={{ .Values.config.maxGracePeriod }}
- --prestop-handler={{ .Values.config.prestopHandler }}
- --default-mode={{ .Values.config.defaultMode }}
- --untreated-pods={{ if eq .Values.webhooks.validatePods.failurePolicy "Ignore" }}admit{{ else }}deny{{ end }}
- --excluded-namespaces={{ include "graceguard.excludedNamespaces" . }}
{{- range $name, $p := .Values.config.routingProfiles }}
- --routing-profile={{ $name }}={{ $p.routingDelay }}{{ with $p.graceFloor }},grace-floor={{ . }}{{ end }}
{{- end }}
- --default-routing-profile={{ .Values.config.defaultRoutingProfile }}
- --karpenter-termination-grace-period={{ .Values.config.karpenterTerminationGracePeriod }}
- --karpenter-ceiling-action={{ .Values.config.karpenterCeilingAction }}
- --node-shutdown-grace-period={{ .Values.config.nodeShutdownGracePeriod }}
- --node-shutdown-grace-period-critical-pods={{ .Values.config.nodeShutdownGracePeriodCriticalPods }}
- --node-shutdown-ceiling-action={{ .Values.config.nodeShutdownCeilingAction }}
{{- end -}}

{{/*
The Helm hooks' names, labels and Pod spec (templates/tests/,
templates/pre-delete.yaml). Like the observer's, their Pods must not carry
the webhook's selector labels, or its Service would send the API server's
calls to them. A name (the observer's too) keeps its suffix whatever the
fullname's length, so it never becomes the fullname of the webhook's own
objects. Usage:
  include "graceguard.hookName" (list . "pre-delete")
  include "graceguard.hookLabels" (list . "pre-delete")
*/}}
{{- define "graceguard.hookName" -}}
{{- $suffix := index . 1 -}}
{{- $base := include "graceguard.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-" -}}
{{- printf "%s-%s" $base $suffix -}}
{{- end -}}

{{- define "graceguard.hookLabels" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
helm.sh/chart: {{ include "graceguard.chart" $root }}
app.kubernetes.io/name: {{ printf "%s-%s" (include "graceguard.name" $root) $component | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: graceguard
app.kubernetes.io/component: {{ $component }}
{{- end -}}

{{/*
graceguard.hookPodSpec: the spec of a hook's Pod, from the chart's image
under the chart's security contexts, in the release namespace (which
graceguard never reviews), running `/webhook ARGS`. Usage:
  include "graceguard.hookPodSpec" (dict "root" . "serviceAccount" NAME "resources" R "args" (list ...))
*/}}
{{- define "graceguard.hookPodSpec" -}}
{{- $root := .root -}}
serviceAccountName: {{ .serviceAccount }}
automountServiceAccountToken: true
enableServiceLinks: false
restartPolicy: Never
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
containers:
  - name: {{ .container }}
    image: {{ include "graceguard.image" $root | quote }}
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    args:
      {{- toYaml .args | nindent 6 }}
    env:
      # --namespace defaults to it: the release namespace.
      - name: POD_NAMESPACE
        valueFrom:
          fieldRef:
            fieldPath: metadata.namespace
    resources:
      {{- toYaml .resources | nindent 6 }}
    securityContext:
      {{- toYaml $root.Values.securityContext | nindent 6 }}
{{- end -}}

{{/*
graceguard.floorWholeSeconds: the whole seconds of duration value (list key
value), failing with the key when it has a fraction: the mutating floor
reads every term in whole seconds (pkg/cel). Usage:
  include "graceguard.floorWholeSeconds" (list "config.defaultMaxWork" .Values.config.defaultMaxWork)
*/}}
{{- define "graceguard.floorWholeSeconds" -}}
{{- $s := include "graceguard.seconds" . | float64 -}}
{{- if ne $s (floor $s) -}}
{{- fail (printf "%s: %v is not whole seconds, which nativeFloor.mutate needs (it writes graceguard's record in whole seconds); round it, or set nativeFloor.mutate=false" (index . 0) (index . 1)) -}}
{{- end -}}
{{- $s | int64 -}}
{{- end -}}

{{/*
graceguard.floorChartVariables: the mutating floor's variables written from
the chart's values (pkg/cel MutationChartVariables), as YAML.
*/}}
{{- define "graceguard.floorChartVariables" -}}
{{- $c := .Values.config -}}
{{- $terms := list -}}
{{- range $k, $v := dict "graceguard.io/routing-delay" (list "config.defaultRoutingDelay" $c.defaultRoutingDelay) "graceguard.io/max-work" (list "config.defaultMaxWork" $c.defaultMaxWork) "graceguard.io/cleanup" (list "config.defaultCleanup" $c.defaultCleanup) "graceguard.io/safety-margin" (list "config.defaultSafetyMargin" $c.defaultSafetyMargin) }}
{{- $terms = append $terms (printf "'%s': %s" $k (include "graceguard.floorWholeSeconds" $v)) -}}
{{- end }}
{{- $profiles := fromYaml (include "graceguard.builtinProfiles" .) -}}
{{- range $name, $p := $c.routingProfiles }}
{{- $_ := set $profiles $name (dict "routingDelay" $p.routingDelay "graceFloor" (default 0 $p.graceFloor)) -}}
{{- end }}
{{- $ps := list -}}
{{- range $name, $p := $profiles }}
{{- $ps = append $ps (printf "'%s': [%s, %s]" $name (include "graceguard.floorWholeSeconds" (list (printf "config.routingProfiles.%s.routingDelay" $name) $p.routingDelay)) (include "graceguard.floorWholeSeconds" (list (printf "config.routingProfiles.%s.graceFloor" $name) $p.graceFloor))) -}}
{{- end }}
{{- $deny := list -}}
{{- if and (eq $c.karpenterCeilingAction "deny") (gt (include "graceguard.seconds" (list "config.karpenterTerminationGracePeriod" $c.karpenterTerminationGracePeriod) | float64) 0.0) }}
{{- $deny = append $deny (include "graceguard.seconds" (list "config.karpenterTerminationGracePeriod" $c.karpenterTerminationGracePeriod) | float64 | floor | int64) -}}
{{- end }}
{{- if and (eq $c.nodeShutdownCeilingAction "deny") (gt (include "graceguard.seconds" (list "config.nodeShutdownGracePeriod" $c.nodeShutdownGracePeriod) | float64) 0.0) }}
{{- $deny = append $deny (subf (include "graceguard.seconds" (list "config.nodeShutdownGracePeriod" $c.nodeShutdownGracePeriod) | float64) (include "graceguard.seconds" (list "config.nodeShutdownGracePeriodCriticalPods" $c.nodeShutdownGracePeriodCriticalPods) | float64) | floor | int64) -}}
{{- end -}}
- name: clusterTerms
  expression: {{ printf "{%s}" (join ", " $terms) | quote }}
- name: clusterHandler
  expression: {{ printf "'%s'" $c.prestopHandler | quote }}
- name: profiles
  expression: {{ printf "{%s}" (join ", " $ps) | quote }}
- name: clusterProfile
  expression: {{ printf "'%s'" $c.defaultRoutingProfile | quote }}
- name: maxGrace
  expression: {{ include "graceguard.ceilSeconds" (list "config.maxGracePeriod" $c.maxGracePeriod) | quote }}
- name: denyCeiling
  expression: {{ if $deny }}{{ min (index $deny 0) (last $deny) | toString | quote }}{{ else }}"-1"{{ end }}
{{- end -}}

{{/*
Whether to register Argo Rollouts' Rollouts with the workload webhook and the
native floor (webhooks.validateWorkloads.argoRollouts): "true" or "".
*/}}
{{- define "graceguard.argoRollouts" -}}
{{- $v := .Values.webhooks.validateWorkloads.argoRollouts | default "auto" -}}
{{- if or (eq $v "always") (and (eq $v "auto") (.Capabilities.APIVersions.Has "argoproj.io/v1alpha1/Rollout")) -}}
true
{{- end -}}
{{- end }}
