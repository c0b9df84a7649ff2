"""The HTTP API: chat (SSE or JSON), documents, traces (admin), health, OpenAPI and the admin dashboard.

`create_app` assembles the routers (routers/) over one Runtime per app (runtime.py), built in the lifespan and
reached by handlers through the dependencies in deps.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from opentelemetry.instrumentation.utils import suppress_instrumentation
from starlette.types import ASGIApp, Receive, Scope, Send

from ragmesh_common.tokens import TokenSigner
from ragmesh_gateway.auth import Authenticator
from ragmesh_gateway.config import Settings
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.messages import RequestLanguageMiddleware
from ragmesh_gateway.metrics import GatewayMetrics, MetricsMiddleware
from ragmesh_gateway.models import with_event_schemas
from ragmesh_gateway.routers import admin, chat, connectors, conversations, documents, graph, health, openai, session
from ragmesh_gateway.runtime import open_runtime
from ragmesh_gateway.sessions import AdminSessions
from ragmesh_gateway.validation import HeaderLimitMiddleware, StrictJSONRoute, validation_error_handler

# probes, scrapes and the dashboard's own reads: traced, they would flood the trace list the dashboard shows
UNTRACED_PATHS = ("/healthz", "/readyz", "/metrics", "/admin")
UNTRACED_PREFIXES = ("/api/v1/traces", "/api/v1/admin/", "/admin/", "/docs", "/redoc", "/openapi.json")


def untraced(scope: Scope) -> bool:
    path = str(scope.get("path", ""))
    return path in UNTRACED_PATHS or path.startswith(UNTRACED_PREFIXES)


class UntracedCalls:
    """What an untraced request calls is not traced either: without the request's server span, each Redis,
    database or gRPC call it makes would start a trace of its own (a readiness probe's Redis PING every few
    seconds filled the trace list with one-span "PING" traces, and the dashboard's cache page with "ZCARD")."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and untraced(scope):
            with suppress_instrumentation():
                await self.app(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _listed(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def add_cors(app: FastAPI, settings: Settings) -> None:
    """CORS for a frontend on another origin: GATEWAY_CORS_ORIGINS (none by default: no CORS header is sent and
    a browser keeps other origins' pages from reading any reply), _METHODS, _HEADERS, _MAX_AGE. Credentials
    (cookies) are never allowed cross-origin: such a frontend sends its user's bearer token. Added last, so it
    is the outermost middleware and answers a preflight before authentication."""
    origins = _listed(settings.cors_origins)
    if not origins:
        return
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_methods=_listed(settings.cors_methods),
        allow_headers=_listed(settings.cors_headers),
        allow_credentials=False,
        expose_headers=["Retry-After", "Content-Language"],
        max_age=settings.cors_max_age,
    )


DOCS_ASSETS = "/docs-assets"


def add_offline_docs(app: FastAPI) -> None:
    """`/docs` (Swagger UI) and `/redoc` (ReDoc) with their JavaScript and CSS from the pinned fastapi-offline
    package, so both work where the browser cannot reach a CDN."""
    assets = Path(fastapi_offline.__file__).parent / "static"
    app.mount(DOCS_ASSETS, StaticFiles(directory=assets), name="docs-assets")

    async def swagger(_: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} · API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
        )

    async def redoc(_: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} · API",
            redoc_js_url=f"{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            with_google_fonts=False,
        )

    app.add_route("/docs", swagger, include_in_schema=False)
    app.add_route("/redoc", redoc, include_in_schema=False)


def create_app(settings: Settings, *, mesh: Mesh | None = None, signer: TokenSigner | None = None) -> FastAPI:
    """The app for `settings`; `mesh` replaces the configured services (tests). `signer` signs the internal
    identity token of every hop for the authenticated user (default: RAGMESH_INTERNAL_SIGNING_KEY, required)."""
    if signer is None:
        signer = TokenSigner.from_env("gateway")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime(settings, mesh, signer) as runtime:
            app.state.runtime = runtime
            if runtime.cache is not None:
                runtime.cache.observer = app.state.metrics.cache_counted  # /metrics counts the cache (metrics.py)
            yield

    # FastAPI's native OpenTelemetry support traces each HTTP request once, as a server span named
    # "POST /api/v1/chat" that continues an incoming traceparent. It needs a configured tracer provider
    # (setup_telemetry), and otherwise it stays off. There are no child spans for dependency resolution or
    # serialization, and none per ASGI send/receive, which would mean one per streamed SSE event. This
    # replaced opentelemetry-instrumentation-fastapi, whose ASGI middleware cost ~0.3 ms more per request
    # in a side-by-side micro-benchmark. Probes are not traced.
    app = FastAPI(
        docs_url=None,  # /docs and /redoc below, with their assets served from a package (offline), not a CDN
        redoc_url=None,
        title="ragmesh",
        version="0.1.0",
        lifespan=lifespan,
        description="Enterprise RAG over a gRPC mesh: permission-aware chat with sources.",
        telemetry={
            "operation_spans": False,
            "exclude": untraced,
        },
    )
    app.state.authenticator = Authenticator(
        secret=settings.jwt_secret,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        jwks_url=settings.jwks_url,
        cache_size=settings.token_cache_size,
        cache_seconds=settings.token_cache_seconds,
        signer=signer,
    )
    app.state.settings = settings
    app.state.sessions = AdminSessions(  # the dashboard's sign-in (sessions.py)
        settings.session_key, settings.session_seconds, secure=settings.session_cookie_secure, signer=signer
    )
    app.router.route_class = StrictJSONRoute  # JSON bodies without NaN/Infinity or lone surrogates (validation.py)
    app.state.max_json_bytes = settings.max_json_bytes
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_middleware(HeaderLimitMiddleware, max_bytes=settings.max_header_bytes)
    app.state.metrics = metrics = GatewayMetrics()  # GET /metrics, Prometheus' text format (metrics.py)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_route("/metrics", metrics.scrape, include_in_schema=False)
    app.add_middleware(RequestLanguageMiddleware)  # Accept-Language for the messages a user reads (messages.py)
    app.add_middleware(UntracedCalls)
    add_cors(app, settings)
    app.include_router(chat.router)
    app.include_router(openai.router)  # /v1: the OpenAI-compatible chat
    app.include_router(documents.router, max_body_size=settings.max_upload_bytes + settings.max_json_bytes)
    app.include_router(conversations.router)
    app.include_router(admin.router)
    app.include_router(connectors.router)
    app.include_router(session.router)
    app.include_router(graph.router)
    app.include_router(health.router)
    add_offline_docs(app)
    app.openapi = with_event_schemas(app.openapi)  # type: ignore[method-assign]  # the chat events' models
    return app
