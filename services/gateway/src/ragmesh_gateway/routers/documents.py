"""Document routes: thin over the DocumentLifecycle (documents.py), which does the work.

The upload's body limit depends on the settings, so app.py sets it when it includes this router
(`max_body_size`); the form limits are fixed here."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, HTTPException, Query, Response, UploadFile
from sse_starlette.sse import EventSourceResponse

from ragmesh_common import limits
from ragmesh_common.formats import accepted_extensions
from ragmesh_gateway.auth import require_admin
from ragmesh_gateway.deps import Documents, User
from ragmesh_gateway.documents import document_json
from ragmesh_gateway.models import (
    DOCUMENT_EVENTS,
    INT32_MAX,
    MAX_ACL_JSON_CHARS,
    MAX_TITLE_CHARS,
    AuditList,
    ChunkList,
    DeleteResponse,
    DocumentList,
    DocumentLookup,
    DocumentOut,
    DocumentPatch,
    FormatList,
    NewVersionResponse,
    ProblemList,
    UploadResponse,
    error_responses,
)
from ragmesh_gateway.routers.chat import SSE_HEADERS
from ragmesh_gateway.validation import StrictJSONRoute, Text

router = APIRouter(route_class=StrictJSONRoute)

StatusName = Literal["queued", "parsing", "embedding", "indexing", "ready", "failed"]
Cursor = Annotated[Text, Query(max_length=limits.CURSOR.value, description="next_cursor of the previous page")]


@router.post(
    "/api/v1/documents",
    tags=["documents"],
    status_code=202,
    summary="Upload a document; ingestion runs in the background",
    response_model=UploadResponse,
    form_limits={"max_fields": 8, "max_files": 1, "max_part_size": MAX_ACL_JSON_CHARS * 4},
    responses={
        200: {
            "model": UploadResponse,
            "description": "You already have a document with these bytes (`duplicate`: true); nothing was queued",
        },
        **error_responses(400, 401, 413, 415, 422, 503),
    },
)
async def upload(
    user: User,
    documents: Documents,
    response: Response,
    file: UploadFile = File(...),
    title: Annotated[Text, Form(max_length=MAX_TITLE_CHARS, description="default: the file name")] = "",
    acl: Annotated[
        Text,
        Form(
            max_length=MAX_ACL_JSON_CHARS,
            description='JSON, e.g. {"departments": ["eng"], "users": ["bob"]}; default: the uploader\'s department',
        ),
    ] = "",
) -> Any:
    reply = await documents.upload(user, file, title=title, acl=acl)
    if reply["duplicate"]:
        response.status_code = 200
    return reply


@router.get(
    "/api/v1/documents",
    tags=["documents"],
    summary="Documents you may read, newest change first",
    response_model=DocumentList,
    responses=error_responses(400, 401, 422, 503),
)
async def list_documents(
    user: User,
    documents: Documents,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=INT32_MAX, description="not with cursor"),
    status: Annotated[list[StatusName], Query(max_length=6, description="any of these")] = [],  # noqa: B006 - FastAPI copies parameter defaults per request
    owner: Annotated[Text, Query(max_length=200, description="owner user id")] = "",
    mine: Annotated[bool, Query(description="only your own documents (as owner=<your user id>)")] = False,
    format: Annotated[
        Text,
        Query(
            max_length=200,
            description="extension (pdf) or MIME type "  # the API's name
            "(application/pdf, or text/ for a prefix)",
        ),
    ] = "",
    updated_since: Annotated[datetime | None, Query(description="ISO 8601 with a time zone")] = None,
    cursor: Cursor = "",
    stale: Annotated[
        bool,
        Query(
            description="only documents an older parser read (their parser_version is below the parser's "
            "current one): worth re-ingesting"
        ),
    ] = False,
) -> Any:
    parsed_before = 0
    if stale:
        parsed_before = await documents.parser_version(user)
        if not parsed_before:
            raise HTTPException(
                503,
                "the parser did not say which reading it gives, so which documents are stale is unknown; retry shortly",
                headers={"Retry-After": "2"},
            )
    return await documents.list_readable(
        user,
        limit=limit,
        offset=offset,
        statuses=list(status),
        owner=user.user_id if mine else owner,
        fmt=format,
        updated_since=updated_since,
        cursor=cursor,
        parsed_before=parsed_before,
    )


@router.post(
    "/api/v1/documents/lookup",
    tags=["documents"],
    summary="Which of these contents (SHA-256) are already documents you may read (resumable bulk uploads)",
    response_model=DocumentList,
    responses=error_responses(400, 401, 413, 422, 503),
)
async def lookup_documents(lookup: DocumentLookup, user: User, documents: Documents) -> Any:
    """Documents you may read whose visible version has one of the hashes (every match, in one page); a hash
    of a document you may not read is not matched, as if it did not exist. With `mine`, your own only: the
    bytes an upload would answer as a duplicate, unless that document failed."""
    return await documents.list_readable(
        user,
        limit=1000,
        offset=0,
        owner=user.user_id if lookup.mine else "",
        content_sha256=[sha.lower() for sha in lookup.content_sha256],
    )


@router.get(
    "/api/v1/formats",
    tags=["documents"],
    summary="File types an upload may have",
    response_model=FormatList,
    responses=error_responses(401, 422),
)
async def formats(user: User, documents: Documents) -> Any:
    return {"extensions": sorted(accepted_extensions()), "parser_version": await documents.parser_version(user)}


@router.get(
    "/api/v1/admin/documents/problems",
    tags=["admin"],
    summary="Failed and stuck documents of every owner, with reasons (admin only)",
    response_model=ProblemList,
    responses=error_responses(401, 403, 422, 503),
)
async def problem_documents(
    user: User,
    documents: Documents,
    limit: int = Query(100, ge=1, le=1000),
    stuck_after_seconds: float = Query(0, ge=0, le=10**7, description="0 = the service default"),
) -> Any:
    require_admin(user)
    return await documents.problems(user, limit=limit, stuck_after_seconds=stuck_after_seconds)


@router.get(
    "/api/v1/documents/{document_id}",
    tags=["documents"],
    summary="One document you may read",
    response_model=DocumentOut,
    responses=error_responses(401, 404, 422, 503),
)
async def document(document_id: uuid.UUID, user: User, documents: Documents) -> Any:
    return document_json(await documents.get(user, document_id))


@router.patch(
    "/api/v1/documents/{document_id}",
    tags=["documents"],
    summary="Change a document's title and/or ACL (owner only; audited; applies to the next request)",
    response_model=DocumentOut,
    responses=error_responses(400, 401, 403, 404, 413, 422, 503),
)
async def update_document(document_id: uuid.UUID, patch: DocumentPatch, user: User, documents: Documents) -> Any:
    return await documents.update(user, document_id, patch)


@router.put(
    "/api/v1/documents/{document_id}/content",
    tags=["documents"],
    status_code=202,
    summary="New content for a document (owner only): ingested as its next version, which replaces the "
    "current one's chunks at once when ready",
    response_model=NewVersionResponse,
    form_limits={"max_fields": 8, "max_files": 1, "max_part_size": MAX_ACL_JSON_CHARS * 4},
    responses={
        200: {
            "model": NewVersionResponse,
            "description": "The content is the current version's (`unchanged`): nothing queued",
        },
        **error_responses(400, 401, 403, 404, 413, 415, 422, 503),
    },
)
async def replace_content(
    document_id: uuid.UUID, user: User, documents: Documents, response: Response, file: UploadFile = File(...)
) -> Any:
    reply = await documents.new_version(user, document_id, file)
    if reply["unchanged"]:
        response.status_code = 200
    return reply


@router.post(
    "/api/v1/documents/{document_id}/reingest",
    tags=["documents"],
    status_code=202,
    summary="Ingest the current version's stored file again (owner only); it stays searchable meanwhile",
    response_model=NewVersionResponse,
    responses=error_responses(401, 403, 404, 409, 422, 503),
)
async def reingest(document_id: uuid.UUID, user: User, documents: Documents) -> Any:
    return await documents.reingest(user, document_id)


@router.get(
    "/api/v1/documents/{document_id}/audit",
    tags=["documents"],
    summary="Who changed what, oldest first (the owner and admins)",
    response_model=AuditList,
    responses=error_responses(400, 401, 403, 404, 422, 503),
)
async def document_audit(
    document_id: uuid.UUID,
    user: User,
    documents: Documents,
    limit: int = Query(100, ge=1, le=1000),
    cursor: Cursor = "",
) -> Any:
    return await documents.audit(user, document_id, limit=limit, cursor=cursor)


@router.get(
    "/api/v1/documents/{document_id}/chunks",
    tags=["documents"],
    summary="A document's chunks, by level then position (its readers)",
    response_model=ChunkList,
    responses=error_responses(400, 401, 404, 422, 503),
)
async def document_chunks(
    document_id: uuid.UUID,
    user: User,
    documents: Documents,
    level: Literal["document", "section", "paragraph"] | None = Query(None, description="default: all"),
    limit: int = Query(100, ge=1, le=1000),
    cursor: Cursor = "",
) -> Any:
    return await documents.chunks(user, document_id, level=level or "", limit=limit, cursor=cursor)


@router.get(
    "/api/v1/documents/{document_id}/events",
    tags=["documents"],
    summary="Ingestion progress as Server-Sent Events, until ready or failed",
    response_class=EventSourceResponse,
    responses={
        200: {
            "description": "`status` events: {document_id, status, error}",
            "content": {"text/event-stream": {"schema": DOCUMENT_EVENTS}},
        },
        **error_responses(401, 404, 422, 503),
    },
)
async def document_events(document_id: uuid.UUID, user: User, documents: Documents) -> EventSourceResponse:
    return EventSourceResponse(await documents.events(user, document_id), headers=SSE_HEADERS, ping=15)


@router.delete(
    "/api/v1/documents/{document_id}",
    tags=["documents"],
    summary="Delete a document you own",
    response_model=DeleteResponse,
    responses=error_responses(401, 403, 404, 422, 503),
)
async def delete_document(document_id: uuid.UUID, user: User, documents: Documents) -> Any:
    return await documents.delete(user, document_id)
