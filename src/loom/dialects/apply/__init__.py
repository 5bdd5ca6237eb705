"""`loom apply -f`, `loom get`, `loom delete -f`: Kubernetes-style objects applied to Loom.

The generic machinery, kind-neutral: the documents of a request (`documents`), which handler
serves which kind (`registry`), the applied objects of a caller (`service`: create, unchanged or
update; get, list, delete), the REST routes (`router`), and Kubernetes' core objects that other
kinds read (`core`: ConfigMap, Secret, ServiceAccount). The dialects' handlers are listed in
`kinds`; their interface is `loom.dialects.kinds`.
"""
