"""A file the parser refuses for a limit (time, CPU, memory: INVALID_ARGUMENT naming it) fails the document at once,
on the first attempt: it would hit the limit again, so it is not retried as transient (#30)."""

from __future__ import annotations

import sys
from pathlib import Path

import grpc

from ragmesh_ingestion.config import Deadlines
from ragmesh_ingestion.pipeline import Ingestor

sys.path.insert(0, str(Path(__file__).parent))  # the pipeline tests' fakes (tests run in importlib mode)
from test_ingestion_pipeline import DOC, USER, FakeClients, FakeRedis, catalogue_statuses, rpc_error


async def test_a_parse_limit_fails_the_document_on_the_first_attempt(tmp_path: Path) -> None:
    limit = "rows.xlsx: parsing took longer than 120s (PARSER_TIMEOUT_SECONDS); the file is too large or too complex"
    clients = FakeClients(parse=rpc_error(grpc.StatusCode.INVALID_ARGUMENT, limit))
    path = tmp_path / "rows.xlsx"
    path.write_bytes(b"PK")
    redis = FakeRedis()
    # not the final attempt: a transient error would raise TransientIngestError here and be retried
    await Ingestor(clients, redis, Deadlines()).run(DOC, USER, path, "rows.xlsx", "", final_attempt=False)
    assert catalogue_statuses(clients) == ["parsing", "failed"]
    assert [name for name, _ in clients.calls].count("Parse") == 1
    last = redis.published[-1][1]
    assert last["status"] == "failed" and "PARSER_TIMEOUT_SECONDS" in last["error"]
