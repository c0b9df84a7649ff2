"""Document routes: thin over the DocumentLifecycle (documents.py), which does the work.

The upload's body limit depends on the settings, so app.py sets it when it includes this router
(`max_body_size`); the form limits are fixed here."""
from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Query, UploadFile
from sse_starlette.sse import EventSourceResponse

from ragmesh_gateway.deps import Documents, User
from ragmesh_gateway.documents import document_json
from ragmesh_gateway.models import (DOCUMENT_EVENTS, INT32_MAX, MAX_ACL_JSON_CHARS, MAX_TITLE_CHARS, DeleteResponse,
                                    DocumentList, DocumentOut, UploadResponse, error_responses)
from ragmesh_gateway.routers.chat import SSE_HEADERS
from ragmesh_gateway.validation import StrictJSONRoute, Text

router = APIRouter(route_class=StrictJSONRoute)


@router.post("/api/v1/documents", tags=["documents"], status_code=202,
             summary="Upload a document; ingestion runs in the background", response_model=UploadResponse,
             form_limits={"max_fields": 8, "max_files": 1, "max_part_size": MAX_ACL_JSON_CHARS * 4},
             responses=error_responses(400, 401, 413, 415, 422, 503))
async def upload(user: User, documents: Documents, file: UploadFile = File(...),
                 title: Annotated[Text, Form(max_length=MAX_TITLE_CHARS, description="default: the file name")] = "",
                 acl: Annotated[Text, Form(max_length=MAX_ACL_JSON_CHARS,
                                           description='JSON, e.g. {"departments": ["eng"], "users": ["bob"]}; '
                                                       "default: the uploader's department")] = "") -> Any:
    return await documents.upload(user, file, title=title, acl=acl)


@router.get("/api/v1/documents", tags=["documents"], summary="Documents you may read", response_model=DocumentList,
            responses=error_responses(401, 422, 503))
async def list_documents(user: User, documents: Documents, limit: int = Query(100, ge=1, le=1000),
                         offset: int = Query(0, ge=0, le=INT32_MAX)) -> Any:
    return await documents.list_readable(user, limit=limit, offset=offset)


@router.get("/api/v1/documents/{document_id}", tags=["documents"], summary="One document you may read",
            response_model=DocumentOut, responses=error_responses(401, 404, 422, 503))
async def document(document_id: uuid.UUID, user: User, documents: Documents) -> Any:
    return document_json(await documents.get(user, document_id))


@router.get("/api/v1/documents/{document_id}/events", tags=["documents"],
            summary="Ingestion progress as Server-Sent Events, until ready or failed",
            response_class=EventSourceResponse,
            responses={200: {"description": "`status` events: {document_id, status, error}",
                             "content": {"text/event-stream": {"schema": DOCUMENT_EVENTS}}},
                       **error_responses(401, 404, 422, 503)})
async def document_events(document_id: uuid.UUID, user: User, documents: Documents) -> EventSourceResponse:
    return EventSourceResponse(await documents.events(user, document_id), headers=SSE_HEADERS, ping=15)


@router.delete("/api/v1/documents/{document_id}", tags=["documents"], summary="Delete a document you own",
               response_model=DeleteResponse, responses=error_responses(401, 403, 404, 422, 503))
async def delete_document(document_id: uuid.UUID, user: User, documents: Documents) -> Any:
    return await documents.delete(user, document_id)
