package externalworkload

// GroupName identifies the API Group name for an ExternalWorkload
const GroupName = "workload.linkerd.io"
