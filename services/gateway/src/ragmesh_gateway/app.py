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
from datetime import UTC
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from fastapi import Depends, FastAPI, File, Form, HTTPException, Query, Request, Security, UploadFile
from fastapi import Path as FastAPIPath
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from google.protobuf.json_format import MessageToDict
from grpc import aio
from opentelemetry import trace
import psycopg
from pydantic import ValidationError
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
from ragmesh_gateway.models import (CHAT_EVENTS, DOCUMENT_EVENTS, INT32_MAX, MAX_ACL_JSON_CHARS, MAX_FILENAME_CHARS, MAX_TITLE_CHARS, AclIn,
                                    ChatRequest, ChatResponse, ContextIn, DeleteResponse, DocumentList, DocumentOut,
                                    Health, Readiness, SearchRequest, SearchResponse, TraceDetail,
                                    TraceList, Turn, UploadResponse, error_responses)

__all__ = ["AclIn", "ChatRequest", "ContextIn", "SearchRequest", "Turn", "create_app"]  # the models live in models.py
from ragmesh_gateway.orchestrator import ChatOptions, Orchestrator, source_payload
from ragmesh_gateway.shutdown import SHUTDOWN_GRACE_SECONDS, until_shutdown
from ragmesh_gateway.traces import Retention, TraceStore
from ragmesh_gateway.validation import (HeaderLimitMiddleware, StrictJSONRoute, Text, text_problem,
                                        validation_error_handler)

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

SSE_HEADERS = {"X-Accel-Buffering": "no", "Cache-Control": "no-cache"}
TERMINAL = {"ready", "failed", "deleted"}
TRACE_ID_PATTERN = "^[0-9a-f]{32}$"
# /readyz: without these no chat can be answered; the others only degrade it
REQUIRED_FOR_CHAT = ("retriever", "answerer")
FALLBACK_FORMATS = {".md", ".markdown", ".html", ".htm", ".docx", ".pptx", ".xlsx", ".csv", ".pdf", ".txt"}


def document_json(doc: common_pb2.Document) -> dict[str, Any]:
    data = MessageToDict(doc, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    data["status"] = common_pb2.DocumentStatus.Name(doc.status).removeprefix("DOCUMENT_STATUS_").lower()
    data["size_bytes"] = doc.size_bytes  # int64 would otherwise be a JSON string
    for name in ("created_at", "updated_at"):  # ISO 8601 as datetime.isoformat() writes it, "" when unset
        stamp = getattr(doc, name)
        data[name] = stamp.ToDatetime(tzinfo=UTC).isoformat() if doc.HasField(name) else ""
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


def error_response(data: dict[str, Any]) -> JSONResponse:
    """A chat's error event as an HTTP error; a busy answerer's carries Retry-After."""
    headers = {"Retry-After": str(data["retry_after"])} if data.get("retry_after") else None
    return JSONResponse({"detail": data}, status_code=data["status"], headers=headers)


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
        retention = Retention.from_env()
        background: list[asyncio.Task[None]] = []
        if state["traces"]:
            await state["traces"].open()
            if retention.enabled:
                background.append(asyncio.create_task(state["traces"].keep_bounded(retention)))
        settings.upload_dir.mkdir(parents=True, exist_ok=True)
        yield
        for task in background:
            task.cancel()
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
    app.router.route_class = StrictJSONRoute  # JSON bodies without NaN/Infinity or lone surrogates (validation.py)
    app.state.max_json_bytes = settings.max_json_bytes
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_middleware(HeaderLimitMiddleware, max_bytes=settings.max_header_bytes)

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
              response_model=None,
              responses={200: {"model": ChatResponse, "description": "JSON answer, or text/event-stream when "
                               "stream=true (events: progress, token, final, error)",
                               "content": {"text/event-stream": {"schema": CHAT_EVENTS}}},
                         **error_responses(400, 401, 413, 422, 429, 503)})
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
            shutdown = anyio.Event()  # set by sse-starlette when the server stops (SIGTERM)
            # Read up to the answerer's admission before the status line goes out: a busy answerer
            # (queue full, wait over budget) is then a real 503 with Retry-After, not an error event in a 200.
            stream = until_shutdown(events(), shutdown)
            head: list[dict[str, Any]] = []
            try:
                async for item in stream:
                    head.append(item)
                    if item["event"] != "progress" or (item["data"].get("stage"), item["data"].get("status")) == (
                            "answer", "started"):
                        break
            except BaseException:
                await stream.aclose()  # the handler failed or was cancelled before the response began
                raise
            if head and head[-1]["event"] == "error":
                await stream.aclose()
                return error_response(head[-1]["data"])

            async def sse() -> AsyncIterator[dict[str, str]]:
                try:
                    for item in head:
                        yield {"event": item["event"], "data": json.dumps(item["data"])}
                    async for item in stream:
                        yield {"event": item["event"], "data": json.dumps(item["data"])}
                finally:
                    await stream.aclose()  # a client that left cancels the answer at once (its slot frees)

            return EventSourceResponse(sse(), headers=SSE_HEADERS, ping=15, shutdown_event=shutdown,
                                       shutdown_grace_period=SHUTDOWN_GRACE_SECONDS)
        tokens: list[str] = []
        progress: list[dict[str, Any]] = []
        async for item in events():
            if item["event"] == "token":
                tokens.append(item["data"]["text"])
            elif item["event"] == "progress":
                progress.append(item["data"])
            elif item["event"] == "error":
                return error_response(item["data"])
            elif item["event"] == "final":
                return JSONResponse({**item["data"], "progress": progress})  # JSON-native, as the SSE events
        raise HTTPException(503, "the chat ended without an answer")

    @app.post("/api/v1/search", tags=["chat"], summary="Permission-aware hybrid search without an answer",
              response_model=SearchResponse,
              responses=error_responses(400, 401, 413, 422, 429, 503))
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
    async def accepted_formats(user: UserContext) -> set[str]:
        if "formats" not in state:
            try:
                reply = await state["mesh"].parser.ListFormats(parser_pb2.ListFormatsRequest(),
                                                               metadata=user.metadata(), timeout=5)
                state["formats"] = {e if e.startswith(".") else f".{e}" for e in reply.extensions}
            except aio.AioRpcError:
                logger.warning("parser unreachable for ListFormats; using the built-in list")
                return FALLBACK_FORMATS
        return state["formats"]

    @app.post("/api/v1/documents", tags=["documents"], status_code=202,
              summary="Upload a document; ingestion runs in the background", response_model=UploadResponse,
              max_body_size=settings.max_upload_bytes + settings.max_json_bytes,
              form_limits={"max_fields": 8, "max_files": 1, "max_part_size": MAX_ACL_JSON_CHARS * 4},
              responses=error_responses(400, 401, 413, 415, 422, 503))
    async def upload(user: User, file: UploadFile = File(...),
                     title: Annotated[Text, Form(max_length=MAX_TITLE_CHARS, description="default: the file name")] = "",
                     acl: Annotated[Text, Form(max_length=MAX_ACL_JSON_CHARS,
                                               description='JSON, e.g. {"departments": ["eng"], "users": ["bob"]}; '
                                                           "default: the uploader's department")] = "") -> Any:
        raw_name = file.filename or ""
        problem = text_problem(raw_name) or (f"is longer than {MAX_FILENAME_CHARS} characters"
                                             if len(raw_name) > MAX_FILENAME_CHARS else None)
        if problem:
            raise HTTPException(400, f"file name {problem}")
        filename = safe_filename(raw_name)
        if Path(filename).suffix.lower() not in await accepted_formats(user):
            raise HTTPException(415, f"unsupported file type {Path(filename).suffix or '(none)'}; accepted: "
                                     f"{', '.join(sorted(await accepted_formats(user)))}")
        try:
            acl_in = AclIn.model_validate_json(acl) if acl.strip() else AclIn()
        except ValidationError as exc:
            first = exc.errors(include_input=False)[0]
            where = ".".join(str(part) for part in first["loc"])
            raise HTTPException(400, f"acl must be JSON like {{\"departments\": [\"eng\"]}}: "
                                     f"{where + ': ' if where else ''}{first['msg']}") from exc
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
            try:
                await mesh.retriever.UpdateDocumentStatus(retriever_pb2.UpdateDocumentStatusRequest(
                    document_id=doc.document_id, status=common_pb2.DOCUMENT_STATUS_FAILED,
                    error="ingestion queue unavailable; upload again later"), metadata=user.metadata(), timeout=5)
            except aio.AioRpcError as status_exc:
                logger.error("could not mark %s failed: %s", doc.document_id, status_exc.code().name)
            raise HTTPException(503, "ingestion queue unavailable; the document was not queued") from exc
        return {**document_json(doc), "events_url": f"/api/v1/documents/{doc.document_id}/events"}

    @app.get("/api/v1/documents", tags=["documents"], summary="Documents you may read", response_model=DocumentList,
             responses=error_responses(401, 422, 503))
    async def list_documents(user: User, limit: int = Query(100, ge=1, le=1000),
                             offset: int = Query(0, ge=0, le=INT32_MAX)) -> Any:
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

    @app.get("/api/v1/documents/{document_id}", tags=["documents"], summary="One document you may read",
             response_model=DocumentOut, responses=error_responses(401, 404, 422, 503))
    async def document(document_id: uuid.UUID, user: User) -> Any:
        return document_json(await get_document(user, document_id))

    @app.get("/api/v1/documents/{document_id}/events", tags=["documents"],
             summary="Ingestion progress as Server-Sent Events, until ready or failed",
             response_class=EventSourceResponse,
             responses={200: {"description": "`status` events: {document_id, status, error}",
                              "content": {"text/event-stream": {"schema": DOCUMENT_EVENTS}}},
                        **error_responses(401, 404, 422, 503)})
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

    @app.delete("/api/v1/documents/{document_id}", tags=["documents"], summary="Delete a document you own",
                response_model=DeleteResponse, responses=error_responses(401, 403, 404, 422, 503))
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
    def trace_storage_error(exc: Exception) -> HTTPException:
        logger.error("trace storage query failed: %s", exc)
        return HTTPException(503, f"trace storage is unavailable ({type(exc).__name__})")

    def trace_store() -> TraceStore:
        if state.get("traces") is None:
            raise HTTPException(503, "trace storage is not configured (GATEWAY_TRACES_DSN)")
        return state["traces"]

    @app.get("/api/v1/traces", tags=["admin"], summary="Recent request traces (admin only)", response_model=TraceList,
             responses=error_responses(401, 403, 422, 503))
    async def list_traces(user: User, limit: int = Query(50, ge=1, le=500), hours: int = Query(24, ge=1, le=24 * 30),
                          name: Annotated[Text | None, Query(max_length=100)] = None) -> Any:
        require_admin(user)
        try:
            return {"traces": await trace_store().list(user.roles, limit=limit, hours=hours, name=name)}
        except (psycopg.Error, OSError) as exc:
            raise trace_storage_error(exc) from exc

    @app.get("/api/v1/traces/{trace_id}", tags=["admin"], summary="All spans of one trace (admin only)",
             response_model=TraceDetail, responses=error_responses(401, 403, 404, 422, 503))
    async def get_trace(trace_id: Annotated[str, FastAPIPath(pattern=TRACE_ID_PATTERN,
                                                             description="32 lower-case hex characters")],
                        user: User) -> Any:
        require_admin(user)
        try:
            spans = await trace_store().spans(user.roles, trace_id)
        except (psycopg.Error, OSError) as exc:
            raise trace_storage_error(exc) from exc
        if not spans:
            raise HTTPException(404, f"trace {trace_id} not found")
        return {"trace_id": trace_id, "spans": spans}

    @app.get("/admin", include_in_schema=False, response_class=HTMLResponse)
    async def dashboard() -> str:
        return files("ragmesh_gateway").joinpath("static/admin.html").read_text()

    # ---------- health ----------
    @app.get("/healthz", tags=["health"], summary="Liveness", response_model=Health)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Readiness: can this gateway answer chat",
             description="503 naming the missing parts when a part chat needs (retriever, answerer) is not "
                         "SERVING; 200 otherwise, with the optional parts that are down (embedder, reranker, "
                         "graph, parser, Redis) listed in `degraded`.",
             response_model=Readiness, responses={503: {"model": Readiness, "description": "Not ready"}})
    async def readyz() -> JSONResponse:
        services = await state["mesh"].health(timeout=1.0)
        try:
            await asyncio.wait_for(state["redis"].ping(), timeout=1.0)
            services["redis"] = "SERVING"
        except Exception as exc:  # noqa: BLE001 - Redis is optional for chat
            services["redis"] = f"UNREACHABLE ({type(exc).__name__})"
        missing = [name for name in REQUIRED_FOR_CHAT if services.get(name) != "SERVING"]
        degraded = [name for name, status in services.items() if name not in REQUIRED_FOR_CHAT and status != "SERVING"]
        body: dict[str, Any] = {"ready": not missing, "services": services, "degraded": degraded}
        if missing:
            body["reason"] = "chat needs " + ", ".join(f"{name} ({services.get(name)})" for name in missing)
            return JSONResponse(body, status_code=503)
        return JSONResponse(body)

    @app.get("/", include_in_schema=False)
    async def root(request: Request) -> dict[str, str]:
        base = str(request.base_url).rstrip("/")
        return {"name": "ragmesh", "docs": f"{base}/docs", "openapi": f"{base}/openapi.json", "admin": f"{base}/admin"}

    return app
