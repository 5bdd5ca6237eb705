"""The configuration of a deployment's compiled data path: HAProxy in front of its replicas,
rendered from what the gateway knows (pure: no process, no file).

What HAProxy does per request, with no call-out to Python:
  - the caller's credential: the bearer token's SHA-256 looked up in a map the gateway keeps
    (`access.map`: hash → an index of whose it is), or the deployment public (`flags.map`);
    passed requests lose their credentials (Authorization, Proxy-Authorization, Cookie) before a
    replica sees them;
  - the track: the canary's share by weight (`flags.map`: its share in ten-thousandths), the
    rest to the main version, least-request balancing over each track's ready replicas;
  - fair admission: each replica takes `per_replica` requests at once (server maxconn), the rest
    wait in the backend's first-come line at most `queue_timeout_s`, and past the line's length
    (`flags.map`) a request gets 503 with Retry-After at once;
  - a replica that fails before answering: the request is sent once more, to another.
Everything else goes to the gateway's own (Python) endpoint, unchanged, credentials included:
an unknown token (the gateway reads the rules again, and answers 401 or serves it: a key just
made works at once), the health and metrics paths, and any request while no replica of the
deployment is ready (the gateway holds it and wakes the deployment from zero). The gateway adds
and removes the replicas (`add server`, over the admin socket) and follows HAProxy's log lines
(status, track, whose, microseconds) for its counters and histogram; for a watched deployment
(drift, outliers, payload log) a line also carries the request's body and, for the payload
log's sample, the response's, which the gateway passes to its monitor: watching costs the
request path a copy into the log, never a wait.

The same for V2 gRPC over HTTP/2, to each replica's own gRPC socket, through server slots
declared in the configuration (HAProxy 2.6 opens a new HTTP/2 connection per call to a server
added at run time, never reusing one: a call then cost the replica 5x its CPU). A slot's
address is a symbolic link in the socket folder, which the gateway points at a ready replica's
gRPC socket before it turns the slot on; replicas past the slots are added at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

REST, GRPC = "rest", "grpc"
MAIN, CANARY = "main", "canary"
GATEWAY = "gateway"  # the gateway's own endpoint, behind the proxy
PUBLIC = "-public-"  # whose a request of a public deployment is, in the log
OWN_PATHS = ("/", "/metrics", "/v2/health/live", "/v2/health/ready")
# the log line of each request: status, backend, whose (an index of the access map), µs, path,
# and for a watched deployment's inference requests: whether the payload log samples it, the
# request's body and (sampled) the response's, in base64 ("-" where there is none)
LOG_FORMAT = (
    "%ST %b %[var(txn.whose)] %[date(0,us),sub(txn.t0)] %HP "
    "%[var(txn.sample)] %[var(txn.reqb)] %[var(txn.resb)]"
)
# Bodies the proxy copies into its log for monitoring; a watched request with a larger body
# goes to the gateway, which answers and watches it itself. Both fit one log line (65535).
WATCHED_REQUEST = 24 * 1024
WATCHED_RESPONSE = 16 * 1024
INFER_PATHS = ("/infer", ":predict")
MALFORMED = '{"error": "malformed HTTP request"}'
MAX_REQUEST = 64 * 2**20  # bytes of body, as the gateway's own limit
SLOTS = 16  # gRPC server slots per track (each a few hundred bytes of HAProxy's memory)
SLOT = "s"  # a slot's server name: s0, s1, …


@dataclass(frozen=True)
class ProxyPlan:
    """What the proxy is configured with; paths are relative to the deployment's folder (the
    proxy's working directory), the unix sockets' addresses too."""

    host: str
    port: int
    grpc_port: int | None
    admin_socket: str
    access_map: str
    flags_map: str
    gateway_socket: str  # the gateway's REST endpoint
    gateway_grpc_socket: str  # its gRPC endpoint
    queue_timeout_s: float
    ready_timeout_s: float
    sockets: str = "run"  # the folder of the gRPC slots' links


def backend(protocol: str, track: str) -> str:
    """The name of a track's backend for a protocol: `main`, `canary`, `grpc_main`, …"""
    return track if protocol == REST else f"{protocol}_{track}"


def render(plan: ProxyPlan) -> str:
    """The whole configuration file."""
    parts = [_global(plan), _defaults(plan), _frontend(plan, REST, f"{plan.host}:{plan.port}")]
    parts += [_track(REST, MAIN), _track(REST, CANARY)]
    parts.append(f"backend {GATEWAY}\n    server gateway unix@{plan.gateway_socket}\n")
    if plan.grpc_port is not None:
        parts.append(_frontend(plan, GRPC, f"{plan.host}:{plan.grpc_port} proto h2"))
        parts += [_track(GRPC, MAIN, plan.sockets), _track(GRPC, CANARY, plan.sockets)]
        parts.append(
            f"backend {GATEWAY}_grpc\n    server gateway unix@{plan.gateway_grpc_socket} proto h2\n"
        )
    return "\n".join(parts)


def _global(plan: ProxyPlan) -> str:
    return (
        "global\n"
        "    nbthread 1\n"  # beside the replicas on the same cores: one thread is plenty
        f"    stats socket unix@{plan.admin_socket} mode 600 level admin\n"
        "    log stdout len 65535 format raw daemon\n"  # read by the gateway from a pipe
        "    tune.bufsize 65536\n"  # a request that fits is kept for its one retry
    )


def _defaults(plan: ProxyPlan) -> str:
    busy = f'{{"error": "busy: no replica was free within {plan.queue_timeout_s:g} s; retry"}}'
    return (
        "defaults\n"
        "    mode http\n"
        "    log global\n"
        f'    log-format "{LOG_FORMAT}"\n'
        "    timeout connect 5s\n"
        "    timeout http-request 60s\n"
        "    timeout http-keep-alive 75s\n"
        "    timeout client 1h\n"
        "    timeout server 1h\n"  # a model may take long; the gateway never cut one either
        f"    timeout queue {_ms(plan.queue_timeout_s)}\n"
        # a request is read whole (up to a buffer) before it goes to a replica, so that one a
        # replica dropped as it died can be sent again to another (else the client's
        # keep-alive connection is closed without an answer)
        "    option http-buffer-request\n"
        "    retries 1\n"
        "    option redispatch 1\n"
        "    retry-on conn-failure empty-response\n"
        "    http-reuse always\n"
        "    http-error status 503 content-type application/json hdr retry-after 1 "
        f"string {_quoted(busy)}\n"
        f"    http-error status 400 content-type application/json string {_quoted(MALFORMED)}\n"
    )


def _frontend(plan: ProxyPlan, protocol: str, bind: str) -> str:
    main, canary = backend(protocol, MAIN), backend(protocol, CANARY)
    lines = [
        f"frontend {protocol}",
        f"    bind {bind}",
        "    http-request set-var(txn.t0) date(0,us)",
        "    http-request return status 413 content-type application/json string "
        + _quoted(f'{{"error": "the body is more than the limit of {MAX_REQUEST} bytes"}}')
        + f" if {{ req.hdr_val(content-length) gt {MAX_REQUEST} }}",
        # every value of the flags map is a number: map_str_int reads the whole map as such
        f"    http-request set-var(txn.whose) str({PUBLIC}) "
        f"if {{ str(public),map_str_int({plan.flags_map},0) gt 0 }}",
        "    http-request set-var(txn.whose) req.fhdr(authorization),"
        f'regsub("^bearer +","",i),sha2(256),hex,lower,map({plan.access_map}) '
        "unless { var(txn.whose) -m found }",
        f"    http-request set-var(txn.share) str(canary_share),map_str_int({plan.flags_map},0)",
        f"    http-request set-var(txn.line) str(max_queue),map_str_int({plan.flags_map},0)",
        "    acl passed var(txn.whose) -m found",
        f"    acl main_up nbsrv({main}) gt 0",
        f"    acl canary_up nbsrv({canary}) gt 0",
        "    acl to_canary rand(10000),sub(txn.share) lt 0",
    ]
    if protocol == REST:
        lines.append(f"    acl own path {' '.join(OWN_PATHS)}")
        passed = "passed !own"
    else:
        passed = "passed"
    lines += [
        f"    http-request set-var(txn.to) str({canary}) if {passed} canary_up to_canary "
        f"or {passed} canary_up !main_up",
        f"    http-request set-var(txn.to) str({main}) if {passed} main_up "
        "!{ var(txn.to) -m found }",
    ]
    if protocol == REST:
        lines += _watching(plan)
    else:  # a watched deployment's gRPC inferences: the gateway translates and watches them
        lines += [
            f"    http-request unset-var(txn.to) if {{ str(watch),map_str_int({plan.flags_map},0) "
            "gt 0 } { path_end /ModelInfer }",
        ]
    lines += [
        f"    acl main_full queue({main}),sub(txn.line) ge 0",
        f"    acl canary_full queue({canary}),sub(txn.line) ge 0",
    ]
    for track, full in ((main, "main_full"), (canary, "canary_full")):
        lines.append(
            "    http-request return status 503 content-type application/json hdr retry-after 1 "
            f'lf-string "{{\\"error\\": \\"busy: %[queue({track})] requests are waiting '
            f'already; retry\\"}}" if {{ var(txn.to) -m str {track} }} {full}'
        )
    for header in ("authorization", "proxy-authorization", "cookie"):
        lines.append(f"    http-request del-header {header} if {{ var(txn.to) -m found }}")
    gateway = GATEWAY if protocol == REST else f"{GATEWAY}_grpc"
    lines += [
        "    use_backend %[var(txn.to)] if { var(txn.to) -m found }",
        f"    default_backend {gateway}",
    ]
    return "\n".join(lines) + "\n"


def _watching(plan: ProxyPlan) -> list[str]:
    """A watched deployment's inference requests (`watch` in the flags map): the body copied
    into the log line, and for the payload log's share (`payload_ppm`, in millionths) the
    response's too. A body too large for a log line goes to the gateway instead (as do gRPC
    inferences, whose protobuf the gateway translates for the detector)."""
    flag = f"map_str_int({plan.flags_map},0)"
    return [
        f"    acl watched str(watch),{flag} gt 0",
        f"    acl infer path_end {' '.join(INFER_PATHS)}",
        f"    acl fits req.body_size le {WATCHED_REQUEST}",
        "    http-request unset-var(txn.to) if watched infer !fits",
        "    acl to_replica var(txn.to) -m found",
        f"    http-request set-var(txn.ppm) str(payload_ppm),{flag} if watched infer to_replica",
        "    http-request set-var(txn.sample) int(1) "
        "if watched infer to_replica { rand(1000000),sub(txn.ppm) lt 0 }",
        "    http-request set-var(txn.reqb) req.body,base64 if watched infer to_replica",
        "    http-response wait-for-body time 1s if { var(txn.sample) -m found }",
        "    http-response set-var(txn.resb) res.body,base64 "
        f"if {{ var(txn.sample) -m found }} {{ res.body_len le {WATCHED_RESPONSE} }}",
    ]


def _track(protocol: str, track: str, sockets: str = "") -> str:
    """A track's backend; its servers (the replicas) come and go over the admin socket: REST
    servers added and deleted, gRPC slots turned on and off (and added past the slots)."""
    name = backend(protocol, track)
    lines = [f"backend {name}", "    balance leastconn"]
    if protocol == GRPC:
        lines += [
            f"    server {SLOT}{k} {server_line(slot_link(sockets, name, k), 1, GRPC)} disabled"
            for k in range(SLOTS)
        ]
    return "\n".join(lines) + "\n"


def slot_link(sockets: str, backend_name: str, slot: int) -> str:
    """The address of a gRPC slot: a link the gateway points at a replica's socket."""
    return f"{sockets}/{backend_name}-{SLOT}{slot}.sock"


def server_line(socket: str, per_replica: int, protocol: str) -> str:
    """The arguments of a server for one replica's socket (`add server`, or a slot's line)."""
    h2 = " proto h2" if protocol == GRPC else ""
    # HAProxy keeps no idle connection to a server added at run time unless told to: each
    # request then opened a connection of its own to the replica (twice the replica's CPU)
    return f"unix@{socket} maxconn {per_replica} pool-max-conn -1 pool-purge-delay 1s{h2}"


def flags(
    public: bool, canary_percent: float, max_queue: int, watch: bool = False, payloads: float = 0
) -> dict[str, str]:
    """The contents of `flags.map`: whether the deployment is public, the canary's share in
    ten-thousandths, the line's length, whether its requests are watched (their bodies logged
    for the detector) and the payload log's share in millionths."""
    found = {"canary_share": str(round(canary_percent * 100)), "max_queue": str(max_queue)}
    if public:
        found["public"] = "1"
    if watch:
        found["watch"] = "1"
        found["payload_ppm"] = str(round(payloads * 1_000_000))
    return found


def _ms(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def _quoted(text: str) -> str:
    """A string as HAProxy's configuration reads one between double quotes."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
