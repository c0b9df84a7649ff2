"""The community computation's schedule and state: recomputed in the background when the graph changed.

Every GRAPH_COMMUNITY_INTERVAL_SECONDS the graph's size (chunks/entities/relations, views.signature) is read;
when it differs from the last computation's, the whole graph is read and the hierarchy recomputed (Leiden runs
in a child process, stopped at GRAPH_COMMUNITY_RECOMPUTE_TIMEOUT_SECONDS: it holds no core or GIL of the
service's). So an ingest or a delete, on any replica, is reflected within an interval after it, and a
restarted service computes once at start. Admins see the state (GetCommunityStatus) and may force a run
(RecomputeCommunities). The hierarchy lives in memory: each replica computes its own (seeded, so the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from opentelemetry import trace

from ragmesh_common import attributes as attr
from ragmesh_graph import communities, views
from ragmesh_graph.communities import Hierarchy
from ragmesh_graph.config import CommunitySettings
from ragmesh_graph.store import GraphStore

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)


@dataclass
class Status:
    state: str = "never"  # never | running | ready | failed
    computed_at: str = ""
    duration_seconds: float = 0.0
    entities: int = 0
    edges: int = 0
    communities_per_level: list[int] = field(default_factory=list)
    error: str = ""
    signature: str = ""


class CommunityRunner:
    def __init__(self, store: GraphStore, settings: CommunitySettings) -> None:
        self.store = store
        self.settings = settings
        self.hierarchy = Hierarchy()
        self.status = Status()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    async def recompute(self, *, reason: str = "forced") -> Status:
        """Reads the whole graph and recomputes the hierarchy; one run at a time (a second caller waits)."""
        async with self._lock:
            previous = self.status.state
            self.status.state = "running"
            started = time.perf_counter()
            with tracer.start_as_current_span("graph community recompute") as span:
                try:
                    async with asyncio.timeout(self.settings.recompute_timeout_seconds):
                        signature = await views.signature(self.store)
                        whole = await views.whole_graph(self.store)
                        weights = communities.edge_weights(
                            whole.relations, whole.chunk_mentions.values(), self.settings.chunk_weight
                        )
                        graph = communities.build_graph(whole.entities, weights)
                        hierarchy = await communities.detect_in_child(
                            graph,
                            timeout=self.settings.recompute_timeout_seconds,
                            resolution=self.settings.resolution,
                            levels=self.settings.levels,
                            min_split=self.settings.min_split,
                            iterations=self.settings.leiden_iterations,
                        )
                except (TimeoutError, Exception) as exc:  # noqa: BLE001 - any failure keeps the last hierarchy
                    logger.warning("community recompute (%s) failed, keeping the last one: %s", reason, exc)
                    span.set_attribute(attr.RAG_DEGRADED, True)
                    span.add_event(
                        "degraded", {attr.RAG_STAGE: "graph communities", attr.RAG_DEGRADED_REASON: str(exc)}
                    )
                    self.status.state = "failed" if previous != "ready" or not self.hierarchy.communities else "ready"
                    self.status.error = f"{type(exc).__name__}: {exc}"
                    return self.status
                span.set_attribute(attr.RAG_GRAPH_ENTITIES, graph.vcount())
                span.set_attribute(attr.RAG_GRAPH_RELATIONS, graph.ecount())
            self.hierarchy = hierarchy
            levels = [len(hierarchy.level(level)) for level in range(self.settings.levels)]
            self.status = Status(
                state="ready",
                computed_at=datetime.now(UTC).isoformat(timespec="seconds"),
                duration_seconds=round(time.perf_counter() - started, 3),
                entities=graph.vcount(),
                edges=graph.ecount(),
                communities_per_level=levels,
                signature=signature,
            )
            logger.info(
                "communities recomputed (%s): %d entities, %d edges, per level %s, %.1fs",
                reason,
                graph.vcount(),
                graph.ecount(),
                levels,
                self.status.duration_seconds,
            )
            return self.status

    async def _loop(self) -> None:
        while True:
            try:
                if await views.signature(self.store) != self.status.signature:
                    await self.recompute(reason="graph changed")
            except Exception as exc:  # noqa: BLE001 - the schedule outlives a failed check
                logger.warning("community schedule: graph size check failed: %s", exc)
            await asyncio.sleep(self.settings.interval_seconds)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="community recompute")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
