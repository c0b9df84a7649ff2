"""The retriever's health follows PostgreSQL: NOT_SERVING while the database does not answer, SERVING again after."""

from __future__ import annotations

import asyncio

from grpc_health.v1 import health_pb2

from ragmesh_common.server import GrpcService
from ragmesh_retriever.server import watch_database


class FlakyDatabase:
    def __init__(self, answers: list[str | None]) -> None:
        self.answers = answers
        self.calls = 0

    async def ping(self, timeout: float = 2.0) -> str | None:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        return answer


async def status(service: GrpcService) -> int:
    request = health_pb2.HealthCheckRequest(service="")

    class Context:
        async def abort(self, *args: object) -> None:  # pragma: no cover - the service is always registered
            raise AssertionError(args)

    return (await service.health.Check(request, Context())).status


def test_health_turns_not_serving_without_the_database_and_back() -> None:
    async def main() -> list[int]:
        service = GrpcService("retriever", lambda server: [])
        await service.health.set("", health_pb2.HealthCheckResponse.SERVING)
        db = FlakyDatabase([None, "OperationalError: connection refused", "PoolTimeout", None])
        task = asyncio.create_task(watch_database(db, service, interval=0.01))
        seen = []
        try:
            for _ in range(200):
                seen.append(await status(service))
                if db.calls >= 4 and seen[-1] == health_pb2.HealthCheckResponse.SERVING:
                    break
                await asyncio.sleep(0.005)
        finally:
            task.cancel()
        return seen

    seen = asyncio.run(main())
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    assert not_serving in seen
    assert seen[0] == serving and seen[-1] == serving
    assert seen.index(not_serving) < len(seen) - 1
