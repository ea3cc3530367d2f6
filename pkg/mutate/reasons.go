package mutate

// reasonDocs explains each reason for people; the table in
// docs/annotations.md is generated from it (make generate), so the docs,
// the metrics labels and the responses never disagree.
var reasonDocs = map[Reason]struct{ kind, text string }{
	SkipNotOptedIn:          {"skip", "The namespace lacks the label `graceguard.io/inject=enabled`; nothing is changed or checked."},
	SkipExcluded:            {"skip", "The namespace is excluded (`kube-system`, graceguard's own, `--excluded-namespaces`)."},
	SkipMirrorPod:           {"skip", "A mirror Pod (static Pod seen through the API): the kubelet owns it."},
	SkipOptedOut:            {"skip", "The Pod set `graceguard.io/inject: \"false\"`: no mutation, no budget check; hooks are still checked against grace."},
	SkipNotApplicable:       {"skip", "An operation graceguard does not act on (Pod UPDATE/DELETE, a workload update that leaves the template alone, a Rollout with `spec.workloadRef`, which has no template)."},
	ChangePreStop:           {"change", "A preStop hook sleeping the routing delay (whole seconds, rounded up) was added to a container without one."},
	ChangeGrace:             {"change", "`terminationGracePeriodSeconds` was raised to the budget's sum, or to the routing profile's grace floor (never lowered)."},
	ChangeReadiness:         {"change", "A readiness probe from `graceguard.io/readiness-path` was added where none existed."},
	ChangeLiveness:          {"change", "A liveness probe from `graceguard.io/liveness-path` was added where none existed."},
	ChangeBudget:            {"change", "The `graceguard.io/budget` annotation records the terms and the grace."},
	ChangeTreated:           {"change", "The label `graceguard.io/treated: \"true\"` marks the Pod for the shutdown observer, whose watch selects this label and no other Pod (added when absent; Pods only, never templates)."},
	WarnShellForm:           {"warning", "The container runs through `sh -c` without `exec`: the shell may not forward SIGTERM."},
	WarnLivenessIsReadiness: {"warning", "Liveness and readiness probe the same endpoint: a draining app would fail liveness and be restarted."},
	WarnNoReadiness:         {"warning", "A container declares ports but has no readiness probe."},
	WarnHookUnknownLength:   {"warning", "An existing preStop hook's length cannot be read (HTTP, or a script doing more than sleep); the budget counts the routing delay or its known sleeps."},
	WarnNoProbePort:         {"warning", "A probe path was asked for but no treated container has a port to probe."},
	WarnWouldChange:         {"warning", "Warn mode: what enforce mode would have changed."},
	WarnZeroGraceRaised:     {"warning", "The spec set `terminationGracePeriodSeconds: 0`, which kills the containers at once (some CNI DaemonSets ask for it): no routing window, no drain, the admitted work cut. graceguard raises it to the budget like any other grace, and the warning names 0 and the new value. To keep 0, opt the Pod out (`graceguard.io/inject: \"false\"`)."},
	WarnHookBinaryMissing:   {"warning", "An exec preStop hook runs a bare command (looked up on PATH) or one under `/bin`, `/sbin`, `/usr/bin`, `/usr/sbin`, in an image whose name says it ships no distribution (`distroless` in the name or tag, except `debug` tags; `chainguard/static`): the binary may be missing, and then the hook fails and SIGTERM comes at once, before the routing delay. Use a sleep or httpGet hook, or the absolute path of a binary the image has."},
	WarnWindowsSleepAction:  {"warning", "The preStop handler is `exec` (`--prestop-handler` or `graceguard.io/prestop`) on a Windows Pod (`spec.os.name: windows`, or a node selector `kubernetes.io/os: windows`), whose images have no `sleep` command: graceguard wrote the sleep action (`lifecycle.preStop.sleep`, run by the kubelet itself) instead of `exec sleep N`, which would fail at every deletion."},
	WarnAutoWork:            {"warning", "`graceguard.io/max-work: auto`: the work term graceguard chose, and from what (the workload's ShutdownReport, its floor or its ceiling)."},
	WarnUntreated:           {"warning", "The Pod validating webhook admitted a Pod that graceguard's mutating webhook did not treat (it carries no `graceguard.io/budget`: the mutating call failed or was shed, and its failure policy is `Ignore`). With `--untreated-pods=admit` (the chart's default, with `webhooks.validatePods.failurePolicy: Ignore`) such a Pod is judged only as an opted-out Pod is (its hooks against its grace, its stop signals, its annotations) and admitted without graceguard's budget, so an overloaded graceguard never refuses Pods; counted in `graceguard_webhook_decisions_total` and listed by `kubectl graceguard audit`."},
	DenyHookExceedsGrace:    {"denial", "A preStop hook lasts as long as or longer than the grace period it runs in (the Pod's, or a liveness/startup probe's): the kubelet would kill it."},
	DenyBudgetExceedsGrace:  {"denial", "routing + work + cleanup (+ mesh proxy) + margin, or the routing profile's grace floor, is more than `terminationGracePeriodSeconds`."},
	DenyBudgetOverCap:       {"denial", "The budget (or its routing profile's grace floor) needs more grace than `--max-grace-period` (default 10m, the cluster autoscaler's cap)."},
	DenyInvalidAnnotation:   {"denial", "A `graceguard.io/*` annotation on the Pod (or template) does not parse, is negative, over 1h, longer than 4096 bytes, names no container, or names an unknown routing profile."},
	DenyInvalidNamespace:    {"denial", "A `graceguard.io/*` label or annotation on the namespace does not parse or names an unknown routing profile."},
	ChangeProxyWait:         {"change", "A classic mesh proxy sidecar (`istio-proxy`, `linkerd-proxy`) got a preStop wait as long as the app's whole shutdown (routing + work + cleanup), so it exits after the app (a Pod of proxies alone, a gateway or waypoint, has no app: the wait is the routing window); for Linkerd in the injector's own `/bin/sleep N` shape. Istio's native sidecar got Istio's own drain request after the routing window instead of at deletion (docs/meshes.md)."},
	ChangeSidecarWait:       {"change", "A container `graceguard.io/sidecars` names got a preStop sleep as long as the app's whole shutdown (routing + work + cleanup, whole seconds), so its SIGTERM comes after the app is done (the sleep action; `exec` where the handler asks for it)."},
	DenySidecarExitsEarly:   {"denial", "A container `graceguard.io/sidecars` names has a preStop of its own that ends before the app's shutdown does: it would get SIGTERM and cut the app's last requests. Lengthen the hook, or remove it and graceguard adds one."},
	ChangeMeshAnnotation:    {"change", "`config.alpha.linkerd.io/proxy-wait-before-exit-seconds` was set to the app's whole shutdown, so Linkerd's injector gives its proxy that wait."},
	WarnMeshProbes:          {"warning", "An Istio Pod asked for probes (`graceguard.io/readiness-path`, `liveness-path`): none are added, because Istio rewrites probes at injection and only one webhook order would see them; declare them in the spec."},
	WarnMeshSettingIgnored:  {"warning", "A mesh setting the mesh itself ignores, so graceguard does too: Linkerd's `proxy-wait-before-exit-seconds` on a native sidecar, a Linkerd `config.*` value Linkerd cannot parse, an `EXIT_ON_ZERO_ACTIVE_CONNECTIONS` or `MINIMUM_DRAIN_DURATION` pilot-agent cannot parse (it uses its default)."},
	WarnMeshProxyNamed:      {"warning", "`graceguard.io/containers` or `graceguard.io/sidecars` names a mesh proxy (`istio-proxy`, `linkerd-proxy`), or a Knative Pod's `queue-proxy`: graceguard never treats one as an app container, and makes it outlive the app as its mesh needs (docs/meshes.md) or leaves it to Knative (docs/annotations.md#knative-serving); the name is skipped, in both webhook orders."},
	WarnKnativeTimeout:      {"warning", "A Knative Pod's work term is the cluster default (`--default-max-work`), shorter than the Revision's `timeoutSeconds` (queue-proxy's `REVISION_TIMEOUT_SECONDS`), the longest Knative lets a request run: the budget does not cover the requests Knative admits. Set `graceguard.io/max-work` on the Revision template to the longest request you serve (docs/annotations.md#knative-serving)."},
	WarnScaleDownEarly:      {"warning", "An Argo Rollouts Rollout's `scaleDownDelaySeconds` (blue-green; canary with `trafficRouting`; Argo's default 30 s when unset) is shorter than its Pods' routing term: the old ReplicaSet's Pods are deleted, and start their preStop sleep, before the traffic router has moved off them, so requests still sent to them fail (argo-rollouts#4926, #3617, #4534). Raise it to at least the routing term."},
	WarnOverCeiling:         {"warning", "The budget needs more grace than a platform ceiling grants (Karpenter's `terminationGracePeriod`, graceful node shutdown's share for regular Pods): the Pod is cut short in that event."},
	DenyProxyExitsEarly:     {"denial", "A mesh proxy's own wait (its preStop, or Linkerd's `proxy-wait-before-exit-seconds`) ends before the app's shutdown does: the proxy would exit and cut the app's last requests."},
	DenyInvalidMeshSetting:  {"denial", "`proxy.istio.io/config` that Istio's injector refuses as well (not YAML, a duration that is not one, a `proxyMetadata` value that is not a string): the Pod cannot be injected either way."},
	DenyOverCeiling:         {"denial", "The budget needs more grace than a platform ceiling configured to deny grants (`--karpenter-ceiling-action=deny`, `--node-shutdown-ceiling-action=deny`)."},
	DenyNotMutated:          {"denial", "Enforce mode, and a treated container lacks the preStop sleep graceguard adds: the mutating webhook did not run (its `Ignore` failure policy during an outage). The controller's retry is mutated. With `--untreated-pods=admit` (the chart's default) a Pod without graceguard's record is admitted instead (`admitted-untreated`)."},
	DenyStopSignalKills:     {"denial", "A container's `lifecycle.stopSignal` is one no process can catch: `SIGKILL` kills it at once, `SIGSTOP` freezes it until the kubelet's SIGKILL at the end of the grace period; either way its admitted work is lost. Checked even for opted-out Pods, like the hooks."},
	DenyTooManyContainers:   {"denial", "More than 32 containers to treat in one Pod (the bound that keeps every answer small): name the ones that serve traffic in `graceguard.io/containers`, or opt the Pod out. Also more than 256 containers in one list, more than the webhook reads of any Pod."},
	DenyTooLarge:            {"denial", "More of the object than the webhook reads: over 256 ports in a container, or over 4 MiB of what graceguard decides on (containers, hooks, probes, ports, its annotations). graceguard cannot check what it has not read."},
}

// Describe explains a reason in one sentence.
func Describe(r Reason) string { return reasonDocs[r].text }

// KindOf says what a reason is: "skip", "change", "warning" or "denial".
func KindOf(r Reason) string { return reasonDocs[r].kind }
