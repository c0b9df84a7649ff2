"""The shared request check: an in-process GrpcService (the real bootstrap and its interceptors) serving a small
answerer and retriever whose handlers record what reached them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import pytest
from grpc import aio

from ragmesh.answerer.v1 import answerer_pb2, answerer_pb2_grpc
from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common import limits
from ragmesh_common.server import GrpcService, insecure_channel
from ragmesh_common.testing import channel_as
from ragmesh_common.testing import user as local_user
from ragmesh_common.validation import RequestProblem, check_message, check_text

CALLER = local_user("tester", "eng", ("employee",))
reached: list[Any] = []


class _Answerer(answerer_pb2_grpc.AnswererServiceServicer):
    async def Rewrite(self, request: answerer_pb2.RewriteRequest, context: Any) -> answerer_pb2.RewriteResponse:
        reached.append(request)
        return answerer_pb2.RewriteResponse(question=request.question[:10])

    async def Answer(
        self, request: answerer_pb2.AnswerRequest, context: Any
    ) -> AsyncIterator[answerer_pb2.AnswerEvent]:
        reached.append(request)
        yield answerer_pb2.AnswerEvent(token="ok")


class _Retriever(retriever_pb2_grpc.RetrieverServiceServicer):
    async def UpdateDocument(
        self, request: retriever_pb2.UpdateDocumentRequest, context: Any
    ) -> retriever_pb2.UpdateDocumentResponse:
        reached.append(request)
        return retriever_pb2.UpdateDocumentResponse()


def _add(server: aio.Server) -> Sequence[str]:
    answerer_pb2_grpc.add_AnswererServiceServicer_to_server(_Answerer(), server)
    retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(_Retriever(), server)
    return ["ragmesh.answerer.v1.AnswererService", "ragmesh.retriever.v1.RetrieverService"]


@pytest.fixture(scope="module")
async def address() -> AsyncIterator[str]:
    service = GrpcService("validation-test", _add)
    port = await service.start()
    yield f"127.0.0.1:{port}"
    await service.stop()


async def _refusal(call: Any) -> aio.AioRpcError:
    with pytest.raises(aio.AioRpcError) as caught:
        result = await call if not hasattr(call, "__aiter__") else [e async for e in call]
        raise AssertionError(f"not refused: {result}")
    return caught.value


async def test_a_question_at_the_limit_reaches_the_service_and_one_over_it_is_refused_naming_the_field(
    address: str,
) -> None:
    at_limit = "q" * limits.QUESTION.value
    async with channel_as(address, CALLER) as channel:
        stub = answerer_pb2_grpc.AnswererServiceStub(channel)
        reached.clear()
        assert (await stub.Rewrite(answerer_pb2.RewriteRequest(question=at_limit), timeout=10)).question == "q" * 10
        assert [e.token async for e in stub.Answer(answerer_pb2.AnswerRequest(question=at_limit), timeout=10)] == ["ok"]
        assert len(reached) == 2
        for call in (
            stub.Rewrite(answerer_pb2.RewriteRequest(question=at_limit + "q"), timeout=10),
            stub.Answer(answerer_pb2.AnswerRequest(question=at_limit + "q"), timeout=10),
        ):
            error = await _refusal(call)
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert (
                error.details() == f"question has {limits.QUESTION.value + 1} characters; the limit is 4000 (question)"
            )
    assert len(reached) == 2  # the refused calls never reached a handler


async def test_nul_history_and_turn_limits_name_the_nested_field(address: str) -> None:
    turns = [answerer_pb2.ChatTurn(role="user", content="fine")] * (limits.HISTORY_TURNS.value + 1)
    cases = {
        "history[1].content contains a NUL character at position 2": [
            answerer_pb2.ChatTurn(role="user", content="hi"),
            answerer_pb2.ChatTurn(role="assistant", content="ok\x00"),
        ],
        "history has 21 items; the limit is 20 (history turns)": turns,
        "history[0].content has 8001 characters; the limit is 8000 (history turn)": [
            answerer_pb2.ChatTurn(role="user", content="x" * (limits.TURN.value + 1))
        ],
    }
    async with channel_as(address, CALLER) as channel:
        stub = answerer_pb2_grpc.AnswererServiceStub(channel)
        reached.clear()
        for message, history in cases.items():
            error = await _refusal(stub.Rewrite(answerer_pb2.RewriteRequest(question="and?", history=history)))
            assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
    assert reached == []


async def test_acl_limits_apply_inside_a_nested_message(address: str) -> None:
    too_many = common_pb2.Acl(users=[f"u{i}" for i in range(limits.ACL_ENTRIES.value + 1)])
    too_long = common_pb2.Acl(roles=["ok", "r" * (limits.IDENTIFIER.value + 1)])
    async with channel_as(address, CALLER) as channel:
        stub = retriever_pb2_grpc.RetrieverServiceStub(channel)
        for acl, message in (
            (too_many, "acl.users has 257 items; the limit is 256 (ACL entries)"),
            (too_long, "acl.roles[1] has 129 characters; the limit is 128 (identifier)"),
        ):
            error = await _refusal(stub.UpdateDocument(retriever_pb2.UpdateDocumentRequest(document_id="d", acl=acl)))
            assert (error.code(), error.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
        title = "t" * (limits.TITLE.value + 1)
        error = await _refusal(stub.UpdateDocument(retriever_pb2.UpdateDocumentRequest(document_id="d", title=title)))
        assert error.details() == "title has 501 characters; the limit is 500 (title)"


async def test_undecodable_bytes_are_invalid_argument_not_internal(address: str) -> None:
    # field 1 (question), length 3, bytes ED A0 80: the UTF-8 encoding of the lone surrogate U+D800
    raw = b"\x0a\x03\xed\xa0\x80"
    async with channel_as(address, CALLER) as channel:
        rewrite = channel.unary_unary("/ragmesh.answerer.v1.AnswererService/Rewrite")
        error = await _refusal(rewrite(raw, timeout=10))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "could not be decoded" in (error.details() or "")


async def test_identity_is_checked_before_the_request(address: str) -> None:
    async with insecure_channel(address) as channel:  # no token
        stub = answerer_pb2_grpc.AnswererServiceStub(channel)
        error = await _refusal(stub.Rewrite(answerer_pb2.RewriteRequest(question="x\x00"), timeout=10))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED


def test_the_check_walks_maps_repeated_messages_and_catches_lone_surrogates() -> None:
    request = retriever_pb2.IndexChunksRequest(
        chunks=[common_pb2.Chunk(text="ok, 信息检索 \U0001f600"), common_pb2.Chunk(section_path=["a", "b\x00"])]
    )
    with pytest.raises(RequestProblem, match=r"chunks\[1\]\.section_path\[1\] contains a NUL character"):
        check_message(request)
    with pytest.raises(RequestProblem, match="query contains a lone surrogate at position 1"):
        check_text("query", "a\ud800b")  # protobuf refuses to hold one; text checked before it is built
    check_message(retriever_pb2.SearchRequest(query="fine", query_vector=[0.5]))
