"""The HTTP API: chat (SSE or JSON), documents, traces (admin), health, OpenAPI and the admin dashboard."""
from __future__ import annotations

import asyncio
import json
import logging
import mimetypes
import re
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, File, Form, HTTPException, Query, Request, Security, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from google.protobuf.json_format import MessageToDict
from grpc import aio
from opentelemetry import trace
from pydantic import BaseModel, Field, ValidationError
from redis.asyncio import Redis
from sse_starlette.sse import EventSourceResponse

from ragmesh.common.v1 import common_pb2
from ragmesh.parser.v1 import parser_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common import attributes as attr
from ragmesh_common.context import UserContext
from ragmesh_gateway.auth import Authenticator, require_admin
from ragmesh_gateway.config import Settings
from ragmesh_gateway.ingest import TASK_NAME, channel_name, create_celery
from ragmesh_gateway.mesh import Mesh, StepFailed
from ragmesh_gateway.orchestrator import ChatOptions, Orchestrator, source_payload
from ragmesh_gateway.traces import TraceStore

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

SSE_HEADERS = {"X-Accel-Buffering": "no", "Cache-Control": "no-cache"}
TERMINAL = {"ready", "failed", "deleted"}
FALLBACK_FORMATS = {".md", ".markdown", ".html", ".htm", ".docx", ".pptx", ".xlsx", ".csv", ".pdf", ".txt"}


class Turn(BaseModel):
    role: Literal["user", "assistant"]
    content: str = Field(max_length=8000)


class ChatRequest(BaseModel):
    question: str = Field(min_length=1, max_length=4000, description="The user's question")
    stream: bool = Field(False, description="Server-Sent Events when true, one JSON otherwise")
    history: list[Turn] = Field(default_factory=list, max_length=20)
    top_k: int = Field(5, ge=1, le=20, description="Sources given to the answerer")
    alpha: float | None = Field(None, ge=0, le=1, description="Hybrid weight: 1 = vector only, 0 = BM25 only")
    levels: list[Literal["document", "section", "paragraph"]] = Field(
        default_factory=list, description="Chunk levels to search (manual override); default paragraph")
    document_ids: list[uuid.UUID] = Field(default_factory=list, description="Restrict to these documents")
    rerank: bool = True
    graph: bool = True
    max_tokens: int = Field(0, ge=0, le=1024, description="0 = the answerer's default")
    strategy: Literal["direct", "summary_first"] | None = Field(None, description="Manual strategy override")
    context: ContextIn | None = Field(None, description="Context assembly override")
    relevance_gate: bool = Field(True, description="Answer only from chunks the relevance grade keeps")
    fusion: Literal["relative_score", "ranked", "distribution_based"] = "relative_score"
    routing: bool = Field(True, description="Let the query router pick levels, strategy and sub-queries")


class ContextIn(BaseModel):
    """Context assembly after the search (see retriever.proto ContextOptions); 0 = the service default."""
    enabled: bool = True
    document_expansion_threshold: float = Field(0.0, ge=0, le=1)
    max_chunks_per_document: int = Field(0, ge=0, le=100)
    sibling_expansion: bool = False
    thin_chunk_tokens: int = Field(0, ge=0, le=1000)
    coverage_boost: bool = False
    coverage_weight: float = Field(0.0, ge=0, le=10)
    mmr: bool = False
    mmr_lambda: float = Field(0.0, ge=0, le=1)
    token_budget: int = Field(0, ge=0, le=100000)


class SearchRequest(BaseModel):
    query: str = Field(min_length=1, max_length=4000)
    routing: bool = Field(False, description="Let the query router pick levels, strategy and sub-queries")
    strategy: Literal["direct", "summary_first"] | None = Field(None, description="Manual strategy override")
    fusion: Literal["relative_score", "ranked", "distribution_based"] = "relative_score"
    feedback_docs: int = Field(0, ge=0, le=50, description="Vector pseudo-relevance feedback from the top N (0 = off)")
    feedback_weight: float = Field(1.0, gt=0, le=10)
    context: ContextIn | None = None
    top_k: int = Field(10, ge=1, le=100)
    candidates: int | None = Field(None, ge=1, le=1000, description="Retrieved before rerank/gating")
    alpha: float | None = Field(None, ge=0, le=1)
    levels: list[Literal["document", "section", "paragraph"]] = Field(default_factory=list)
    document_ids: list[uuid.UUID] = Field(default_factory=list)
    rerank: bool = False
    relevance_gate: bool = Field(True, description="Keep only the chunks the relevance grade keeps")


class AclIn(BaseModel):
    public: bool = False
    departments: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    users: list[str] = Field(default_factory=list)


def document_json(doc: common_pb2.Document) -> dict[str, Any]:
    data = MessageToDict(doc, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    data["status"] = common_pb2.DocumentStatus.Name(doc.status).removeprefix("DOCUMENT_STATUS_").lower()
    data["size_bytes"] = doc.size_bytes  # int64 would otherwise be a JSON string
    return data


def safe_filename(name: str) -> str:
    base = Path(name.replace("\\", "/")).name
    cleaned = re.sub(r"[^A-Za-z0-9._ -]", "_", base).strip(" .")
    return cleaned[:200] or "upload"


GENERIC_MIME_TYPES = {"", "application/octet-stream", "binary/octet-stream"}


def upload_mime_type(filename: str, declared: str | None) -> str:
    """The client's content type; when it sent none or a generic one (curl and many browsers send
    application/octet-stream for .md or .csv), the type the file name's extension stands for."""
    if (declared or "").split(";", 1)[0].strip().lower() not in GENERIC_MIME_TYPES:
        return declared or ""
    return mimetypes.guess_type(filename, strict=False)[0] or declared or ""


def rpc_http_error(exc: aio.AioRpcError, step: str) -> HTTPException:
    failed = StepFailed.from_rpc(step, exc)
    return HTTPException(failed.http_status, failed.message)


_bearer = HTTPBearer(auto_error=False, description="JWT with claims sub, department, roles")


async def current_user(request: Request,
                       _: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)] = None) -> UserContext:
    """The authenticated caller (bearer JWT verified by the app's Authenticator). Async, so that FastAPI
    does not hand every request to its thread pool for a check that takes microseconds."""
    authenticator: Authenticator = request.app.state.authenticator
    return await authenticator.authenticate(request)


User = Annotated[UserContext, Depends(current_user)]


def create_app(settings: Settings, *, mesh: Mesh | None = None) -> FastAPI:
    auth = Authenticator(secret=settings.jwt_secret, issuer=settings.jwt_issuer, audience=settings.jwt_audience,
                         jwks_url=settings.jwks_url, cache_size=settings.token_cache_size,
                         cache_seconds=settings.token_cache_seconds)
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state["mesh"] = mesh or Mesh(parser=settings.parser_addr, embedder=settings.embedder_addr,
                                     retriever=settings.retriever_addr, reranker=settings.reranker_addr,
                                     graph=settings.graph_addr, answerer=settings.answerer_addr)
        state["orchestrator"] = Orchestrator(state["mesh"], settings.deadlines, min_relevance=settings.min_relevance,
                                             graph_enabled=settings.graph_enabled, relevance=settings.relevance,
                                             corrective_alpha=settings.corrective_alpha,
                                             corrective_candidates=settings.corrective_candidates)
        state["redis"] = Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5)
        state["celery"] = create_celery(settings.redis_url)
        state["traces"] = TraceStore(settings.traces_dsn) if settings.traces_dsn else None
        if state["traces"]:
            await state["traces"].open()
        settings.upload_dir.mkdir(parents=True, exist_ok=True)
        yield
        if state["traces"]:
            await state["traces"].close()
        await state["redis"].aclose()
        await state["mesh"].close()

    # FastAPI's native OpenTelemetry support traces each HTTP request once, as a server span named
    # "POST /api/v1/chat" that continues an incoming traceparent. It needs a configured tracer provider
    # (setup_telemetry), and otherwise it stays off. There are no child spans for dependency resolution or
    # serialization, and none per ASGI send/receive, which would mean one per streamed SSE event. This
    # replaced opentelemetry-instrumentation-fastapi, whose ASGI middleware cost ~0.3 ms more per request
    # in a side-by-side micro-benchmark. Probes are not traced.
    app = FastAPI(title="ragmesh", version="0.1.0", lifespan=lifespan,
                  description="Enterprise RAG over a gRPC mesh: permission-aware chat with sources.",
                  telemetry={"operation_spans": False,
                             "exclude": lambda scope: scope.get("path") in ("/healthz", "/readyz")})
    app.state.authenticator = auth

    async def rate_limit(user: UserContext) -> None:
        if settings.rate_limit_per_minute <= 0:
            return
        key = f"ragmesh:rate:{user.user_id}:{int(time.time() // 60)}"
        try:
            count = await state["redis"].incr(key)
            if count == 1:
                await state["redis"].expire(key, 90)
        except Exception:  # noqa: BLE001 - a down Redis must not stop chat
            logger.warning("rate limiter unavailable; request allowed", exc_info=True)
            return
        if count > settings.rate_limit_per_minute:
            raise HTTPException(429, f"rate limit: at most {settings.rate_limit_per_minute} requests per minute",
                                headers={"Retry-After": "60"})

    # ---------- chat ----------
    @app.post("/api/v1/chat", tags=["chat"], summary="Ask a question over the documents you may read",
              responses={200: {"description": "JSON answer, or text/event-stream when stream=true"}})
    async def chat(body: ChatRequest, user: User) -> Any:
        await rate_limit(user)
        options = ChatOptions(question=body.question, history=[(t.role, t.content) for t in body.history],
                              top_k=body.top_k, candidates=max(settings.candidates, body.top_k), alpha=body.alpha,
                              levels=list(body.levels), document_ids=[str(d) for d in body.document_ids],
                              rerank=body.rerank, graph=body.graph, max_tokens=body.max_tokens,
                              strategy=body.strategy, context=body.context.model_dump() if body.context else None,
                              relevance_gate=body.relevance_gate, fusion=body.fusion, routing=body.routing)
        orchestrator: Orchestrator = state["orchestrator"]
        span = tracer.start_span("chat", attributes={attr.RAG_USER: user.user_id, attr.RAG_DEPARTMENT: user.department})
        try:
            with trace.use_span(span, end_on_exit=False):
                prepared = await orchestrator.prepare(user, options)
        except StepFailed as exc:
            span.set_status(trace.Status(trace.StatusCode.ERROR, exc.message))
            span.end()
            raise HTTPException(exc.http_status, {"step": exc.step, "message": exc.message}) from exc
        except BaseException:
            span.end()
            raise

        async def events() -> AsyncIterator[dict[str, Any]]:
            try:
                with trace.use_span(span, end_on_exit=False):
                    async for item in orchestrator.run(prepared):
                        yield item
            finally:
                span.end()

        if body.stream:
            async def sse() -> AsyncIterator[dict[str, str]]:
                async for item in events():
                    yield {"event": item["event"], "data": json.dumps(item["data"])}

            return EventSourceResponse(sse(), headers=SSE_HEADERS, ping=15)
        tokens: list[str] = []
        progress: list[dict[str, Any]] = []
        async for item in events():
            if item["event"] == "token":
                tokens.append(item["data"]["text"])
            elif item["event"] == "progress":
                progress.append(item["data"])
            elif item["event"] == "error":
                return JSONResponse({"detail": item["data"]}, status_code=item["data"]["status"])
            elif item["event"] == "final":
                return JSONResponse({**item["data"], "progress": progress})  # JSON-native, as the SSE events
        raise HTTPException(503, "the chat ended without an answer")

    @app.post("/api/v1/search", tags=["chat"], summary="Permission-aware hybrid search without an answer")
    async def search(body: SearchRequest, user: User) -> Any:
        await rate_limit(user)
        options = ChatOptions(question=body.query, top_k=body.top_k, candidates=body.candidates or max(body.top_k, 10),
                              alpha=body.alpha, levels=list(body.levels),
                              document_ids=[str(d) for d in body.document_ids], rerank=body.rerank, graph=False,
                              relevance_gate=body.relevance_gate, routing=body.routing, strategy=body.strategy,
                              fusion=body.fusion, context=body.context.model_dump() if body.context else None,
                              feedback_docs=body.feedback_docs, feedback_weight=body.feedback_weight)
        # the HTTP server span is the search's span (a child span of the same extent would cost ~60 µs)
        trace.get_current_span().set_attribute(attr.RAG_USER, user.user_id)
        try:
            prepared, items = await state["orchestrator"].search(user, options)
        except StepFailed as exc:
            raise HTTPException(exc.http_status, {"step": exc.step, "message": exc.message}) from exc
        # Built of str/int/float/bool/None/list/dict only, so it goes straight to json.dumps: FastAPI's
        # jsonable_encoder walk of a returned dict cost ~0.9 ms per 10-result reply (~2% of a search).
        return JSONResponse({"results": [source_payload(i, item, snippet=False) for i, item in enumerate(items)],
                             "accessible_documents": prepared.accessible, "degraded": prepared.degraded,
                             "progress": prepared.stages})

    # ---------- documents ----------
    async def accepted_formats() -> set[str]:
        if "formats" not in state:
            try:
                reply = await state["mesh"].parser.ListFormats(parser_pb2.ListFormatsRequest(), timeout=5)
                state["formats"] = {e if e.startswith(".") else f".{e}" for e in reply.extensions}
            except aio.AioRpcError:
                logger.warning("parser unreachable for ListFormats; using the built-in list")
                return FALLBACK_FORMATS
        return state["formats"]

    @app.post("/api/v1/documents", tags=["documents"], status_code=202,
              summary="Upload a document; ingestion runs in the background")
    async def upload(user: User, file: UploadFile = File(...), title: str = Form(""),
                     acl: str = Form("", description='JSON, e.g. {"departments": ["eng"], "users": ["bob"]}; '
                                                     "default: the uploader's department")) -> Any:
        filename = safe_filename(file.filename or "")
        if Path(filename).suffix.lower() not in await accepted_formats():
            raise HTTPException(415, f"unsupported file type {Path(filename).suffix or '(none)'}; accepted: "
                                     f"{', '.join(sorted(await accepted_formats()))}")
        try:
            acl_in = AclIn.model_validate_json(acl) if acl.strip() else AclIn()
        except ValidationError as exc:
            raise HTTPException(400, f"acl must be JSON like {{\"departments\": [\"eng\"]}}: {exc.errors()[0]['msg']}") from exc
        content = await file.read(settings.max_upload_bytes + 1)
        if not content:
            raise HTTPException(400, f"{filename} is empty")
        if len(content) > settings.max_upload_bytes:
            raise HTTPException(413, f"{filename} is larger than {settings.max_upload_bytes} bytes")
        mesh: Mesh = state["mesh"]
        mime_type = upload_mime_type(filename, file.content_type)
        try:
            doc = await mesh.retriever.CreateDocument(retriever_pb2.CreateDocumentRequest(
                title=title or Path(filename).stem, filename=filename, mime_type=mime_type,
                acl=common_pb2.Acl(**acl_in.model_dump()), size_bytes=len(content)),
                metadata=user.metadata(), timeout=settings.deadlines.retrieve)
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        folder = settings.upload_dir / doc.document_id
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / filename
        await asyncio.to_thread(path.write_bytes, content)
        user_json = json.dumps({"user_id": user.user_id, "department": user.department, "roles": list(user.roles)})
        try:
            state["celery"].send_task(TASK_NAME, args=[doc.document_id, user_json, str(path), filename, mime_type])
        except Exception as exc:  # noqa: BLE001 - the broker is down: say so, keep the file
            logger.error("could not enqueue ingestion of %s: %s", doc.document_id, exc)
            await mesh.retriever.UpdateDocumentStatus(retriever_pb2.UpdateDocumentStatusRequest(
                document_id=doc.document_id, status=common_pb2.DOCUMENT_STATUS_FAILED,
                error="ingestion queue unavailable; upload again later"), metadata=user.metadata(), timeout=5)
            raise HTTPException(503, "ingestion queue unavailable; the document was not queued") from exc
        return {**document_json(doc), "events_url": f"/api/v1/documents/{doc.document_id}/events"}

    @app.get("/api/v1/documents", tags=["documents"], summary="Documents you may read")
    async def list_documents(user: User, limit: int = Query(100, ge=1, le=1000), offset: int = Query(0, ge=0)) -> Any:
        try:
            reply = await state["mesh"].retriever.ListDocuments(
                retriever_pb2.ListDocumentsRequest(limit=limit, offset=offset), metadata=user.metadata(),
                timeout=settings.deadlines.retrieve)
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        return {"documents": [document_json(d) for d in reply.documents], "total": reply.total}

    async def get_document(user: UserContext, document_id: uuid.UUID) -> common_pb2.Document:
        try:
            return await state["mesh"].retriever.GetDocument(
                retriever_pb2.GetDocumentRequest(document_id=str(document_id)), metadata=user.metadata(),
                timeout=settings.deadlines.retrieve)
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc

    @app.get("/api/v1/documents/{document_id}", tags=["documents"])
    async def document(document_id: uuid.UUID, user: User) -> Any:
        return document_json(await get_document(user, document_id))

    @app.get("/api/v1/documents/{document_id}/events", tags=["documents"],
             summary="Ingestion progress as Server-Sent Events, until ready or failed")
    async def document_events(document_id: uuid.UUID, user: User) -> EventSourceResponse:
        doc = await get_document(user, document_id)  # 404 for documents the user may not read
        redis: Redis = state["redis"]

        async def stream() -> AsyncIterator[dict[str, str]]:
            current = document_json(doc)
            yield {"event": "status", "data": json.dumps({"document_id": current["document_id"],
                                                          "status": current["status"], "error": current["error"]})}
            if current["status"] in TERMINAL:
                return
            pubsub = redis.pubsub()
            await pubsub.subscribe(channel_name(str(document_id)))
            try:
                deadline = time.monotonic() + 900
                while time.monotonic() < deadline:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5.0)
                    if message is None:
                        latest = await get_document(user, document_id)  # the worker may have finished already
                        status = document_json(latest)["status"]
                        if status in TERMINAL:
                            yield {"event": "status", "data": json.dumps({"document_id": str(document_id),
                                                                          "status": status, "error": latest.error})}
                            return
                        continue
                    data = message["data"].decode() if isinstance(message["data"], bytes) else message["data"]
                    yield {"event": "status", "data": data}
                    if json.loads(data).get("status") in TERMINAL:
                        return
            finally:
                await pubsub.unsubscribe()
                await pubsub.aclose()

        return EventSourceResponse(stream(), headers=SSE_HEADERS, ping=15)

    @app.delete("/api/v1/documents/{document_id}", tags=["documents"], summary="Delete a document you own")
    async def delete_document(document_id: uuid.UUID, user: User) -> Any:
        mesh: Mesh = state["mesh"]
        try:
            await mesh.retriever.DeleteDocument(retriever_pb2.DeleteDocumentRequest(document_id=str(document_id)),
                                                metadata=user.metadata(), timeout=settings.deadlines.retrieve)
        except aio.AioRpcError as exc:
            raise rpc_http_error(exc, "catalogue") from exc
        warnings = []
        try:
            from ragmesh.graph.v1 import graph_pb2

            await mesh.graph.DeleteDocument(graph_pb2.DeleteDocumentRequest(document_id=str(document_id)),
                                            metadata=user.metadata(), timeout=settings.deadlines.graph)
        except aio.AioRpcError as exc:
            logger.warning("graph cleanup of %s failed: %s", document_id, exc.code().name)
            warnings.append(f"graph cleanup pending: {exc.code().name}")
        shutil.rmtree(settings.upload_dir / str(document_id), ignore_errors=True)
        return {"document_id": str(document_id), "deleted": True, "warnings": warnings}

    # ---------- traces (admin) ----------
    def trace_store() -> TraceStore:
        if state.get("traces") is None:
            raise HTTPException(503, "trace storage is not configured (GATEWAY_TRACES_DSN)")
        return state["traces"]

    @app.get("/api/v1/traces", tags=["admin"], summary="Recent request traces (admin only)")
    async def list_traces(user: User, limit: int = Query(50, ge=1, le=500), hours: int = Query(24, ge=1, le=24 * 30),
                          name: str | None = Query(None, max_length=100)) -> Any:
        require_admin(user)
        return {"traces": await trace_store().list(limit=limit, hours=hours, name=name)}

    @app.get("/api/v1/traces/{trace_id}", tags=["admin"], summary="All spans of one trace (admin only)")
    async def get_trace(trace_id: str, user: User) -> Any:
        require_admin(user)
        if not re.fullmatch(r"[0-9a-f]{32}", trace_id):
            raise HTTPException(400, "trace_id must be 32 lower-case hex characters")
        spans = await trace_store().spans(trace_id)
        if not spans:
            raise HTTPException(404, f"trace {trace_id} not found")
        return {"trace_id": trace_id, "spans": spans}

    @app.get("/admin", include_in_schema=False, response_class=HTMLResponse)
    async def dashboard() -> str:
        return files("ragmesh_gateway").joinpath("static/admin.html").read_text()

    # ---------- health ----------
    @app.get("/healthz", tags=["health"], summary="Liveness")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Readiness: every service SERVING and Redis reachable")
    async def readyz() -> JSONResponse:
        services = await state["mesh"].health()
        try:
            await state["redis"].ping()
            services["redis"] = "SERVING"
        except Exception as exc:  # noqa: BLE001
            services["redis"] = f"UNREACHABLE ({type(exc).__name__})"
        required = {k: v for k, v in services.items() if k not in ("reranker", "graph")}
        ready = all(v == "SERVING" for v in required.values())
        return JSONResponse({"ready": ready, "services": services}, status_code=200 if ready else 503)

    @app.get("/", include_in_schema=False)
    async def root(request: Request) -> dict[str, str]:
        base = str(request.base_url).rstrip("/")
        return {"name": "ragmesh", "docs": f"{base}/docs", "openapi": f"{base}/openapi.json", "admin": f"{base}/admin"}

    return app
