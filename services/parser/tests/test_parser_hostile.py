"""Hostile files cannot stall or exhaust the parser (#30): each parse runs in a worker process under CPU, memory
and wall-clock limits; a file past one is refused for good (INVALID_ARGUMENT naming the limit) and its worker is
killed and replaced, while other parses go on. The generated corpus (ragmesh_dev.hostile) goes through the gRPC
path with the real Docling workers."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import psutil
import pytest

from ragmesh.parser.v1 import parser_pb2, parser_pb2_grpc
from ragmesh_common.testing import channel_as, user
from ragmesh_dev import hostile
from ragmesh_parser.config import Settings
from ragmesh_parser.server import build_service

sys.path.insert(0, str(Path(__file__).parent))  # tests run in importlib mode; workers import it by name
from parser_fakes import hostile_worker

CALLER = user("tester", "eng", ("employee",))
NORMAL = parser_pb2.ParseRequest(filename="normal.md", content=b"# Normal\n\nAn ordinary paragraph of text.")


# workers of parser services started before the one under test (the suite's shared parser): not counted
OTHERS: set[int] = set()


def worker_pids() -> set[int]:
    """The running worker processes of the parser under test (an exited one not yet reaped does not count)."""
    pids = set()
    for process in psutil.Process().children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and "ragmesh_parser.worker" in " ".join(process.cmdline()):
                pids.add(process.pid)
        except psutil.Error:  # it exited meanwhile
            continue
    return pids - OTHERS


def exclude_running_workers() -> None:
    OTHERS.clear()
    OTHERS.update(worker_pids())


@pytest.fixture
async def limited() -> AsyncIterator[parser_pb2_grpc.ParserServiceStub]:
    settings = Settings(
        host="127.0.0.1",
        port=0,
        max_bytes=1024 * 1024,
        timeout_seconds=30.0,
        max_cpu_seconds=1.0,
        max_memory_mb=256,
        concurrency=2,
        max_chunk_tokens=200,
    )
    exclude_running_workers()
    service = build_service(settings, worker=hostile_worker)
    port = await service.start()
    try:
        async with channel_as(f"127.0.0.1:{port}", CALLER) as channel:
            yield parser_pb2_grpc.ParserServiceStub(channel)
    finally:
        await service.stop()


async def refusal(call: asyncio.Future[parser_pb2.ParseResponse]) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value


@pytest.mark.parametrize(
    ("filename", "limit"), [("cpu.txt", "PARSER_MAX_CPU_SECONDS"), ("memory.txt", "PARSER_MAX_MEMORY_MB")]
)
async def test_a_parse_past_a_limit_is_refused_for_good_while_others_are_served(
    limited: parser_pb2_grpc.ParserServiceStub, filename: str, limit: str
) -> None:
    before = worker_pids()
    assert len(before) == 2
    hostile_call = asyncio.ensure_future(
        limited.Parse(parser_pb2.ParseRequest(filename=filename, content=b"x"), timeout=120)
    )
    normal_call = asyncio.ensure_future(limited.Parse(NORMAL, timeout=120))
    done, _ = await asyncio.wait({hostile_call, normal_call}, return_when=asyncio.FIRST_COMPLETED)
    assert normal_call in done  # the other worker served an ordinary file while the hostile one ran
    assert "ordinary paragraph" in (await normal_call).chunks[-1].text
    error = await refusal(hostile_call)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error  # permanent: the ingestion does not retry it
    assert filename in error.details() and limit in error.details()
    # the worker that hit the limit is gone (no abandoned parse keeps running) and a fresh one replaces it
    for _ in range(600):
        now = worker_pids()
        if len(now) == 2 and now != before:
            break
        await asyncio.sleep(0.1)
    assert len(now) == 2 and len(before - now) == 1
    assert (await limited.Parse(NORMAL, timeout=120)).chunks


async def test_a_hanging_parse_is_killed_at_the_timeout() -> None:
    settings = Settings(
        host="127.0.0.1", port=0, max_bytes=1024, timeout_seconds=1.0, concurrency=1, max_chunk_tokens=200
    )
    exclude_running_workers()
    service = build_service(settings, worker=hostile_worker)
    port = await service.start()
    try:
        async with channel_as(f"127.0.0.1:{port}", CALLER) as channel:
            stub = parser_pb2_grpc.ParserServiceStub(channel)
            first = worker_pids()
            error = await refusal(stub.Parse(parser_pb2.ParseRequest(filename="hang.txt", content=b"x"), timeout=120))
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "PARSER_TIMEOUT_SECONDS" in error.details()
            assert (await stub.Parse(NORMAL, timeout=120)).chunks  # served by the replacement
            assert not first & worker_pids()
    finally:
        await service.stop()
    assert not worker_pids()  # stopping the service ends its workers


async def test_a_parse_whose_caller_gave_up_is_killed(limited: parser_pb2_grpc.ParserServiceStub) -> None:
    """The caller's deadline passes long before PARSER_TIMEOUT_SECONDS (30 s here): its worker goes at once."""
    before = worker_pids()
    error = await refusal(limited.Parse(parser_pb2.ParseRequest(filename="hang.txt", content=b"x"), timeout=1))
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    for _ in range(100):  # 10 s, a third of the parse timeout
        if len(before - worker_pids()) == 1:
            break
        await asyncio.sleep(0.1)
    assert len(before - worker_pids()) == 1  # the abandoned parse's worker was killed, not left to run 30 s


@pytest.fixture(scope="module")
async def docling_parser() -> AsyncIterator[parser_pb2_grpc.ParserServiceStub]:
    settings = Settings(
        host="127.0.0.1",
        port=0,
        max_bytes=50 * 1024 * 1024,
        timeout_seconds=20.0,
        max_cpu_seconds=10.0,
        max_memory_mb=1536,
        concurrency=2,
        max_chunk_tokens=200,
    )
    exclude_running_workers()
    service = build_service(settings)
    port = await service.start()
    try:
        async with channel_as(f"127.0.0.1:{port}", CALLER) as channel:
            yield parser_pb2_grpc.ParserServiceStub(channel)
    finally:
        await service.stop()


CORPUS = [*hostile.zip_files(), *hostile.parser_files()]


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
async def test_the_hostile_corpus_gets_a_clean_answer_from_docling_workers(
    docling_parser: parser_pb2_grpc.ParserServiceStub, case: hostile.HostileFile
) -> None:
    """Every file of the corpus is parsed or refused with INVALID_ARGUMENT and a reason; never an internal error,
    never a hang past the limits; an ordinary file sent meanwhile is parsed."""
    hostile_call = asyncio.ensure_future(
        docling_parser.Parse(parser_pb2.ParseRequest(filename=case.filename, content=case.content), timeout=300)
    )
    normal = await docling_parser.Parse(NORMAL, timeout=300)
    assert normal.chunks
    try:
        reply = await hostile_call
    except grpc.aio.AioRpcError as exc:
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (case.description, exc.code(), exc.details())
        assert case.filename in exc.details()
    else:
        assert reply.chunks, case.description
    assert len(worker_pids()) <= 2  # killed workers are reaped, not left running
