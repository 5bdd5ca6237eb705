"""The Ray launcher: each attempt's gang is one placement group on a Ray cluster; its learners'
wrappers are started on the nodes Ray chose for its bundles by each node's long-lived agent
(`ray_node.NodeAgent`, made by the first learner placed there), or, for a learner given GPUs,
by a detached actor of its own in its bundle (`ray_node.LearnerHost`).

Loom stays the one queue: the capacity it schedules against is the cluster's. Nothing moves
through a shared folder: a learner's spec is moved under its node's scratch disk, and its code,
checkpoints and results go through the platform's API. Ray's errors are translated here.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from loom.domain import placement as placement_rules
from loom.domain.errors import LaunchError
from loom.domain.learner_env import MPI, Gang, hostfile
from loom.domain.resources import Resources
from loom.launchers.base import LearnerLaunch, LearnerStatus, Liveness, handle_parts, translated
from loom.launchers.confinement import SandboxPolicy
from loom.launchers.ray_node import (
    AGENT,
    ENDING,
    LearnerHost,
    NodeAgent,
    agent_name,
    gang_env,
)

log = logging.getLogger("loom.launchers.ray")

STRATEGIES = {
    "pack": "PACK",
    "spread": "SPREAD",
    "strict_pack": "STRICT_PACK",
    "strict_spread": "STRICT_SPREAD",
}
CALL_TIMEOUT_S = 10.0
AGENT_CONCURRENCY = 16  # calls an agent takes at once (a release waits on its learner)


def _names(handle: str) -> tuple[str, str, str]:
    """The learner's actor name, its attempt's placement group name and its job, from its
    handle."""
    job, learner, attempt = handle_parts(handle)
    group = f"loom-{job}-a{attempt}"
    return f"{group}-l{learner}", group, job


class RayLauncher:
    name = "ray"
    elastic = True  # nodes join and leave: nothing is refused for what is missing now

    def __init__(
        self,
        address: str,
        *,
        namespace: str = "loom",
        sandbox: SandboxPolicy | None = None,
        place_timeout_s: float = 30.0,
    ) -> None:
        import ray

        with translated("Ray", f"connect to the cluster at {address!r}"):
            ray.init(
                address=address,
                namespace=namespace,
                log_to_driver=False,
                logging_level=logging.WARNING,
                configure_logging=False,
            )
        self._ray = ray
        # Without token authentication, anything that reaches the cluster's ports (a learner
        # too: its sandbox shares the network) may run tasks there with Ray's rights.
        self.open_to_jobs = (
            None
            if _token_auth()
            else (
                f"the Ray cluster at {address} runs anyone's tasks (no token authentication: start "
                "it, and the platform, with RAY_AUTH_MODE=token and the cluster's RAY_AUTH_TOKEN)"
            )
        )
        self.sandbox = sandbox or SandboxPolicy()
        self.place_timeout_s = place_timeout_s
        self._host = ray.remote(LearnerHost)
        self._agent_class = ray.remote(NodeAgent)
        self._agents: dict[str, Any] = {}  # handle → the agent running it, once known
        self._nodes: dict[str, str] = {}  # handle → the node's address, once known
        self._releasing: dict[str, threading.Thread] = {}  # job → its last release
        self._lock = threading.Lock()

    # -- capacity ------------------------------------------------------------------------------
    def capacity(self) -> Resources:
        """What Loom may use of the cluster: its live nodes' resources, less what the cluster's
        other work holds (Loom's own gangs are counted by the scheduler, as on one machine)."""
        from ray.util import placement_group_table

        with translated("Ray", "read the cluster's resources"):
            total = self._ray.cluster_resources()
            free = self._ray.available_resources()
            groups = placement_group_table()
        ours: dict[str, float] = {}
        for group in groups.values():
            if group.get("state") == "CREATED" and str(group.get("name", "")).startswith("loom-"):
                for bundle in group.get("bundles", {}).values():
                    for key, amount in bundle.items():
                        ours[key] = ours.get(key, 0.0) + float(amount)

        def left(key: str) -> float:
            have = float(total.get(key, 0.0))
            others = have - float(free.get(key, 0.0)) - ours.get(key, 0.0)
            return max(have - max(others, 0.0), 0.0)

        return Resources(cpus=left("CPU"), memory=int(left("memory")), gpus=int(left("GPU")))

    def nodes(self) -> list[dict[str, Any]]:
        """Each node: its address, whether it is alive, what it has and what is free."""
        return [
            {
                "node": node["NodeManagerAddress"],
                "id": node["NodeID"][:12],
                "alive": bool(node.get("Alive")),
                "cpus": total.cpus,
                "gpus": total.gpus,
                "memory": total.memory,
                "free_cpus": free.cpus,
                "free_gpus": free.gpus,
                "free_memory": free.memory,
            }
            for node, total, free in self._node_view()
        ]

    def placeable(
        self, per_learner: Resources, learners: int, placement: str
    ) -> placement_rules.Verdict | None:
        """Whether Ray could place this gang on the live nodes now (None), or why not."""
        alive = [(total, free) for node, total, free in self._node_view() if node.get("Alive")]
        totals, now = [total for total, _ in alive], [free for _, free in alive]
        return placement_rules.check(per_learner, learners, placement, now, totals)

    def _node_view(self) -> list[tuple[dict[str, Any], Resources, Resources]]:
        """Each node as Ray lists it, with what it has and what is free on it."""
        from ray._private.state import state

        with translated("Ray", "read the cluster's nodes"):
            found = self._ray.nodes()
        try:
            free = state.available_resources_per_node()
        except Exception:  # a private API: without it, nothing is counted free
            free = {}
        return [
            (node, _resources(node.get("Resources", {})), _resources(free.get(node["NodeID"], {})))
            for node in found
        ]

    # -- launching -----------------------------------------------------------------------------
    def launch(self, learners: list[LearnerLaunch]) -> None:
        """Reserve the whole gang at once (one placement group), then start each learner on
        its bundle's node with the gang's addresses there."""
        if not learners:
            return
        _, group_name, job = _names(learners[0].handle)
        self._wait_released(job)
        group = self._place(group_name, learners)
        if any(_bundle(learner.spec).get("GPU") for learner in learners):
            hosts = [
                self._start_host(_names(learner.handle)[0], group, i, learner)
                for i, learner in enumerate(learners)
            ]
            agents = [False] * len(learners)
            where = self._where(hosts)
        else:  # each node's agent starts them: no worker process to wait for
            nodes = self._bundle_nodes(group, len(learners))
            hosts, where = self._agents_where(nodes)
            agents = [True] * len(learners)
            for learner, agent in zip(learners, hosts, strict=True):
                self._agents[learner.handle] = agent
        gang = Gang(
            host=where[0][0],
            coordinator_port=where[0][1][0],
            learner_ports=tuple(ports[-1] for _, ports, _ in where),
            hosts=tuple(address for address, _, _ in where),
        )
        mpi = str((learners[0].spec.get("gang") or {}).get("framework", "")).lower() in MPI
        started = []
        for rank, (learner, host) in enumerate(zip(learners, hosts, strict=True)):
            spec = {
                **learner.spec,
                "env": {**learner.spec["env"], **gang_env(learner.spec, gang, rank)},
            }
            self._nodes[learner.handle] = f"{gang.hosts[rank]} ({where[rank][2]})"
            args = (spec, learner.token, learner.secrets, hostfile(gang) if mpi else None)
            by_agent = (learner.handle,) if agents[rank] else ()
            started.append(host.start.remote(*by_agent, *args))
        with translated("Ray", "start the learners"):
            self._ray.get(started, timeout=self.place_timeout_s)

    def _where(self, hosts: list[Any]) -> list[Any]:
        """Each host's node address, free ports there (two for rank 0) and node id."""
        with translated("Ray", "reach the learners' nodes"):
            found: list[Any] = self._ray.get(
                [host.where.remote(2 if i == 0 else 1) for i, host in enumerate(hosts)],
                timeout=self.place_timeout_s,
            )
        return found

    def _agents_where(self, nodes: list[str]) -> tuple[list[Any], list[Any]]:
        """The nodes' agents and where each is. An agent another platform retired may be
        ended just as this launch finds it (it refuses, or is gone): nothing is started yet,
        so it is asked again, until its successor answers."""
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while True:
            hosts = [self._agent_on(node) for node in nodes]
            try:
                return hosts, self._where(hosts)
            except LaunchError as exc:
                ended = ENDING in exc.message or isinstance(
                    exc.__cause__, self._ray.exceptions.RayActorError
                )
                if not ended or time.monotonic() > deadline:
                    raise
            time.sleep(0.05)

    def _bundle_nodes(self, group: Any, count: int) -> list[str]:
        """The node each of the group's bundles was placed on, in the bundles' order."""
        from ray.util import placement_group_table

        with translated("Ray", "read where the gang was placed"):
            placed = placement_group_table(group).get("bundles_to_node_id", {})
        nodes = [str(placed.get(i) or placed.get(str(i)) or "") for i in range(count)]
        if not all(nodes):
            raise LaunchError(f"Ray placed the gang but did not say on which nodes: {placed}")
        return nodes

    def _agent_on(self, node_id: str) -> Any:
        """The node's agent: found by its name, else started there (once per node)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        name = agent_name(node_id, self.sandbox)
        with translated("Ray", f"reach the agent of node {node_id[:12]}"):
            try:
                return self._ray.get_actor(name)
            except ValueError:
                pass
            self._retire_others(name, node_id)
            return self._agent_class.options(
                name=name,
                lifetime="detached",
                get_if_exists=True,
                max_restarts=0,
                num_cpus=0,
                max_concurrency=AGENT_CONCURRENCY,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(self.sandbox)

    def _retire_others(self, name: str, node_id: str) -> None:
        """The node's agents of another Loom version or sandbox start nothing more; those
        idle are ended (those with learners once their last one is released)."""
        from ray.util import list_named_actors

        try:
            others = [n for n in list_named_actors() if n.startswith(AGENT + "-") and n != name]
        except Exception:  # nothing to retire now: asked again with the next new agent
            return
        for other in others:
            if not other.endswith("-" + node_id[:12]):
                continue
            try:
                agent = self._ray.get_actor(other)
                if self._ray.get(agent.retire.remote(), timeout=CALL_TIMEOUT_S):
                    self._ray.kill(agent)
            except Exception:  # gone already, or an agent too old to be asked: left as it is
                continue

    def _place(self, name: str, learners: list[LearnerLaunch]) -> Any:
        from ray.util.placement_group import placement_group, remove_placement_group

        spec = learners[0].spec
        placement = str((spec.get("gang") or {}).get("placement", "pack"))
        bundles = [_bundle(learner.spec) for learner in learners]
        share = _resources(bundles[0])
        with translated("Ray", "reserve the gang's resources"):
            group = placement_group(
                bundles,
                strategy=STRATEGIES.get(placement, "PACK"),
                name=name,
                lifetime="detached",
            )
            ready = group.wait(timeout_seconds=self.place_timeout_s)
        if not ready:
            remove_placement_group(group)
            raise LaunchError(
                f"the Ray cluster could not place {len(learners)} learners "
                f"({placement_rules.describe(share)} each, placement {placement}) within "
                f"{self.place_timeout_s:.0f} s: no set of nodes has that much free"
            )
        return group

    def _start_host(self, name: str, group: Any, index: int, learner: LearnerLaunch) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = _bundle(learner.spec)
        with translated("Ray", "start a learner's actor"):
            return self._host.options(
                name=name,
                lifetime="detached",
                max_restarts=0,
                num_cpus=bundle["CPU"],
                num_gpus=bundle.get("GPU", 0),
                memory=bundle.get("memory"),
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=group, placement_group_bundle_index=index
                ),
            ).remote(self.sandbox)

    # -- following -----------------------------------------------------------------------------
    def _actor(self, handle: str) -> Any | None:
        try:
            return self._ray.get_actor(_names(handle)[0])
        except ValueError:
            return None

    def _agent(self, handle: str) -> Any | None:
        """The agent running a learner: known since its launch, else (a platform started
        again) the one of the live nodes' agents that has it."""
        found = self._agents.get(handle)
        if found is not None:
            return found
        from ray.util import list_named_actors

        try:
            names = [n for n in list_named_actors() if n.startswith(AGENT + "-")]
        except Exception:  # the cluster is unreachable now: asked again next tick
            return None
        for name in names:
            try:
                agent = self._ray.get_actor(name)
                if self._ray.get(agent.has.remote(handle), timeout=CALL_TIMEOUT_S):
                    self._agents[handle] = agent
                    return agent
            except Exception:  # an agent lost with its node
                continue
        return None

    def _host_of(self, handle: str) -> tuple[Any, tuple[str, ...]] | None:
        """Who runs a learner, and what its calls start with (an agent: the handle)."""
        if handle in self._agents:
            return self._agents[handle], (handle,)
        actor = self._actor(handle)  # a learner with GPUs: its own actor
        if actor is not None:
            return actor, ()
        agent = self._agent(handle)
        return (agent, (handle,)) if agent is not None else None

    def _group_exists(self, handle: str) -> bool:
        from ray.util.placement_group import get_placement_group

        try:
            get_placement_group(_names(handle)[1])
        except ValueError:
            return False
        return True

    def status(self, handle: str) -> LearnerStatus:
        host = self._host_of(handle)
        if host is None:
            # Launched (its group exists), but who ran it is gone: lost with its node.
            if self._group_exists(handle):
                return LearnerStatus(Liveness.LOST, None, self._lost(handle))
            return LearnerStatus(Liveness.NOT_STARTED)
        actor, first = host
        try:
            found = self._ray.get(actor.status.remote(*first), timeout=CALL_TIMEOUT_S)
        except self._ray.exceptions.GetTimeoutError:
            return LearnerStatus(Liveness.RUNNING)  # busy or slow; asked again soon
        except self._ray.exceptions.ActorUnavailableError:
            return LearnerStatus(Liveness.RUNNING)  # reconnecting; Ray says when it is dead
        except self._ray.exceptions.RayActorError:
            self._agents.pop(handle, None)
            return LearnerStatus(Liveness.LOST, None, self._lost(handle))
        self._nodes[handle] = str(found.get("node") or self._nodes.get(handle, "?"))
        liveness = Liveness(found["liveness"])
        if first and liveness == Liveness.NOT_STARTED and self._group_exists(handle):
            # its node's agent does not know it: a new agent, the old one gone with the
            # learners it ran
            return LearnerStatus(Liveness.LOST, None, self._lost(handle))
        return LearnerStatus(liveness, found.get("report"))

    def _lost(self, handle: str) -> str:
        node = self._nodes.get(handle)
        return f"was lost with its Ray node {node}" if node else "was lost with its Ray node"

    def terminate(self, handle: str, grace_s: float) -> None:
        host = self._host_of(handle)
        if host is None:
            return
        actor, first = host
        try:
            self._ray.get(actor.terminate.remote(*first, grace_s), timeout=CALL_TIMEOUT_S)
        except Exception:  # its node is gone: so is the learner
            log.debug("terminating %s: its actor did not answer", handle)

    def spooled_lines(self, handle: str) -> list[dict[str, Any]]:
        host = self._host_of(handle)
        if host is None:
            return []
        actor, first = host
        try:
            return list(self._ray.get(actor.spooled.remote(*first), timeout=CALL_TIMEOUT_S))
        except Exception:  # lost with its node: what it spooled went with it
            return []

    def release(self, handles: list[str]) -> None:
        """In the background: each learner's node folder is cleaned (its own actor then
        ended; an agent stays), then the group goes. A new attempt of the same job waits for
        this first (`_wait_released`)."""
        if not handles:
            return
        _, group, job = _names(handles[0])
        with self._lock:
            running = self._releasing.get(job)
            if running is not None and running.is_alive():
                return
            thread = threading.Thread(
                target=self._release,
                args=(list(handles), group),
                name=f"release-{group}",
                daemon=True,
            )
            self._releasing[job] = thread
        thread.start()

    def _release(self, handles: list[str], group: str) -> None:
        from ray.util.placement_group import get_placement_group, remove_placement_group

        for handle in handles:
            host = self._host_of(handle)
            self._agents.pop(handle, None)
            self._nodes.pop(handle, None)
            if host is None:
                continue
            actor, first = host
            try:
                idle_and_retired = self._ray.get(actor.release.remote(*first, 10.0), timeout=30.0)
            except Exception:
                log.debug("releasing %s: its actor did not answer", handle)
                idle_and_retired = False
            if first and not idle_and_retired:
                continue  # the node's agent stays for its next learners
            try:
                self._ray.kill(actor)
            except Exception:
                log.debug("releasing %s: its actor is gone already", handle)
        try:
            remove_placement_group(get_placement_group(group))
        except Exception:
            log.debug("placement group %s is gone already", group)
        with self._lock:  # nothing kept of a release that is over
            job = _names(handles[0])[2]
            if self._releasing.get(job) is threading.current_thread():
                del self._releasing[job]

    def _wait_released(self, job: str) -> None:
        """A new attempt's group: the job's last one must be released first (it removes the
        job's folders on its nodes)."""
        with self._lock:
            pending = self._releasing.get(job)
        if pending is not None:
            pending.join(timeout=60.0)

    def close(self) -> None:
        """Disconnect; the learners (detached actors) keep running on the cluster."""
        with self._lock:
            pending = list(self._releasing.values())
        for thread in pending:
            thread.join(timeout=30.0)
        self._ray.shutdown()


def _token_auth() -> bool:
    """Whether this driver (and so the cluster it joined) uses Ray's token authentication."""
    try:
        from ray._private.authentication.authentication_utils import is_token_auth_enabled
    except ImportError:  # a private module: without it, assume the worst
        return False
    return bool(is_token_auth_enabled())


def _bundle(spec: dict[str, Any]) -> dict[str, float]:
    """One learner's share: its CPUs, GPUs and memory, as Ray counts them."""
    bundle: dict[str, float] = {"CPU": float(spec.get("cpus") or 1)}
    gpus = int(spec.get("env", {}).get("GPU_COUNT") or 0)
    if gpus:
        bundle["GPU"] = float(gpus)
    memory = int(spec.get("memory_limit") or 0)
    if memory:
        bundle["memory"] = float(memory)
    return bundle


def _resources(found: dict[str, float]) -> Resources:
    return Resources(
        cpus=float(found.get("CPU", 0.0)),
        memory=int(found.get("memory", 0)),
        gpus=int(found.get("GPU", 0)),
    )
