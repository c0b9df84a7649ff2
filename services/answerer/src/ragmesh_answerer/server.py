"""The AnswererService servicer and its server."""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence

from grpc import aio
from ragmesh.answerer.v1 import answerer_pb2, answerer_pb2_grpc
from ragmesh_common.errors import InvalidArgument, grpc_errors
from ragmesh_common.server import GrpcService

from ragmesh_answerer.answering import AnswerInput, Answerer, AnswerResult
from ragmesh_answerer.config import Settings
from ragmesh_answerer.llm import OllamaChat
from ragmesh_answerer.prompting import Source
from ragmesh_answerer.rewriting import rewrite_followup

logger = logging.getLogger(__name__)

SERVICE_NAME = answerer_pb2.DESCRIPTOR.services_by_name["AnswererService"].full_name


def _final(result: AnswerResult) -> answerer_pb2.AnswerFinal:
    return answerer_pb2.AnswerFinal(
        answer=result.answer,
        citations=[answerer_pb2.Citation(source_index=c.source_index, chunk_id=c.chunk_id, support=c.support)
                   for c in result.citations],
        grounding_score=result.grounding_score, grounded=result.grounded, warnings=result.warnings,
        model=result.model, prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
    )


class AnswererServicer(answerer_pb2_grpc.AnswererServiceServicer):
    def __init__(self, answerer: Answerer) -> None:
        self._answerer = answerer

    @grpc_errors
    async def CheckInput(self, request: answerer_pb2.CheckInputRequest,
                         context: aio.ServicerContext) -> answerer_pb2.CheckInputResponse:
        verdict = self._answerer.check_input(request.question)
        if not verdict.allowed:
            logger.info("question refused by %s", ",".join(verdict.rules))
        return answerer_pb2.CheckInputResponse(allowed=verdict.allowed, reason=verdict.reason, rules=verdict.rules)

    @grpc_errors
    async def Answer(self, request: answerer_pb2.AnswerRequest,
                     context: aio.ServicerContext) -> AsyncIterator[answerer_pb2.AnswerEvent]:
        answer_input = AnswerInput(
            question=request.question,
            sources=[Source.from_proto(s) for s in request.sources],
            graph_facts=list(request.graph_facts),
            history=[(turn.role, turn.content) for turn in request.history],
            max_tokens=request.max_tokens,
            temperature=request.temperature if request.has_temperature else None,
        )
        async for item in self._answerer.answer(answer_input):
            if isinstance(item, str):
                yield answerer_pb2.AnswerEvent(token=item)
            else:
                logger.info("answered: grounding %.2f, %d citations, %d tokens", item.grounding_score,
                            len(item.citations), item.completion_tokens)
                yield answerer_pb2.AnswerEvent(final=_final(item))

    @grpc_errors
    async def Rewrite(self, request: answerer_pb2.RewriteRequest,
                      context: aio.ServicerContext) -> answerer_pb2.RewriteResponse:
        if not request.question.strip():
            raise InvalidArgument("question must not be empty")
        result = await rewrite_followup(self._answerer.llm, request.question[:self._answerer.settings.max_question_chars],
                                        [(turn.role, turn.content) for turn in request.history])
        return answerer_pb2.RewriteResponse(question=result.question, rewritten=result.rewritten, model=result.model)


def build_service(settings: Settings, llm: OllamaChat | None = None) -> GrpcService:
    """The answerer server; SERVING once the model is listed by Ollama (retried until it is)."""
    chat = llm or OllamaChat(settings.ollama_host, settings.model, settings.timeout_seconds)
    answerer = Answerer(settings, chat)

    def add(server: aio.Server) -> Sequence[str]:
        answerer_pb2_grpc.add_AnswererServiceServicer_to_server(AnswererServicer(answerer), server)
        return [SERVICE_NAME]

    return GrpcService("answerer", add, host=settings.host, port=settings.port, warmup=chat.wait_ready,
                       on_stop=chat.close)
