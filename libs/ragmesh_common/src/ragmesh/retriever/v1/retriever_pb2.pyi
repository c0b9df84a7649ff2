import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from ragmesh.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FusionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FUSION_TYPE_UNSPECIFIED: _ClassVar[FusionType]
    FUSION_TYPE_RELATIVE_SCORE: _ClassVar[FusionType]
    FUSION_TYPE_RANKED: _ClassVar[FusionType]
    FUSION_TYPE_DISTRIBUTION_BASED: _ClassVar[FusionType]

class Strategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STRATEGY_UNSPECIFIED: _ClassVar[Strategy]
    STRATEGY_DIRECT: _ClassVar[Strategy]
    STRATEGY_SUMMARY_FIRST: _ClassVar[Strategy]
FUSION_TYPE_UNSPECIFIED: FusionType
FUSION_TYPE_RELATIVE_SCORE: FusionType
FUSION_TYPE_RANKED: FusionType
FUSION_TYPE_DISTRIBUTION_BASED: FusionType
STRATEGY_UNSPECIFIED: Strategy
STRATEGY_DIRECT: Strategy
STRATEGY_SUMMARY_FIRST: Strategy

class CreateDocumentRequest(_message.Message):
    __slots__ = ("title", "filename", "mime_type", "acl", "size_bytes", "content_sha256")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    ACL_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    title: str
    filename: str
    mime_type: str
    acl: _common_pb2.Acl
    size_bytes: int
    content_sha256: str
    def __init__(self, title: _Optional[str] = ..., filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., acl: _Optional[_Union[_common_pb2.Acl, _Mapping]] = ..., size_bytes: _Optional[int] = ..., content_sha256: _Optional[str] = ...) -> None: ...

class CreateOrGetDocumentRequest(_message.Message):
    __slots__ = ("title", "filename", "mime_type", "acl", "size_bytes", "content_sha256")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    ACL_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    title: str
    filename: str
    mime_type: str
    acl: _common_pb2.Acl
    size_bytes: int
    content_sha256: str
    def __init__(self, title: _Optional[str] = ..., filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., acl: _Optional[_Union[_common_pb2.Acl, _Mapping]] = ..., size_bytes: _Optional[int] = ..., content_sha256: _Optional[str] = ...) -> None: ...

class CreateOrGetDocumentResponse(_message.Message):
    __slots__ = ("document", "existing")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    EXISTING_FIELD_NUMBER: _ClassVar[int]
    document: _common_pb2.Document
    existing: bool
    def __init__(self, document: _Optional[_Union[_common_pb2.Document, _Mapping]] = ..., existing: bool = ...) -> None: ...

class GetDocumentRequest(_message.Message):
    __slots__ = ("document_id",)
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    def __init__(self, document_id: _Optional[str] = ...) -> None: ...

class ListDocumentsRequest(_message.Message):
    __slots__ = ("limit", "offset", "statuses", "owner_user", "mime_type", "extension", "updated_since", "cursor")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    OWNER_USER_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    EXTENSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_SINCE_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    limit: int
    offset: int
    statuses: _containers.RepeatedScalarFieldContainer[_common_pb2.DocumentStatus]
    owner_user: str
    mime_type: str
    extension: str
    updated_since: _timestamp_pb2.Timestamp
    cursor: str
    def __init__(self, limit: _Optional[int] = ..., offset: _Optional[int] = ..., statuses: _Optional[_Iterable[_Union[_common_pb2.DocumentStatus, str]]] = ..., owner_user: _Optional[str] = ..., mime_type: _Optional[str] = ..., extension: _Optional[str] = ..., updated_since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cursor: _Optional[str] = ...) -> None: ...

class ListDocumentsResponse(_message.Message):
    __slots__ = ("documents", "total", "next_cursor")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[_common_pb2.Document]
    total: int
    next_cursor: str
    def __init__(self, documents: _Optional[_Iterable[_Union[_common_pb2.Document, _Mapping]]] = ..., total: _Optional[int] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class UpdateDocumentStatusRequest(_message.Message):
    __slots__ = ("document_id", "status", "error", "page_count", "title", "summary", "version", "warnings")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    status: _common_pb2.DocumentStatus
    error: str
    page_count: int
    title: str
    summary: str
    version: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, document_id: _Optional[str] = ..., status: _Optional[_Union[_common_pb2.DocumentStatus, str]] = ..., error: _Optional[str] = ..., page_count: _Optional[int] = ..., title: _Optional[str] = ..., summary: _Optional[str] = ..., version: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteDocumentRequest(_message.Message):
    __slots__ = ("document_id",)
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    def __init__(self, document_id: _Optional[str] = ...) -> None: ...

class DeleteDocumentResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: bool = ...) -> None: ...

class IndexChunksRequest(_message.Message):
    __slots__ = ("document_id", "chunks", "version")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    chunks: _containers.RepeatedCompositeFieldContainer[_common_pb2.Chunk]
    version: int
    def __init__(self, document_id: _Optional[str] = ..., chunks: _Optional[_Iterable[_Union[_common_pb2.Chunk, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...

class IndexChunksResponse(_message.Message):
    __slots__ = ("indexed",)
    INDEXED_FIELD_NUMBER: _ClassVar[int]
    indexed: int
    def __init__(self, indexed: _Optional[int] = ...) -> None: ...

class ContextOptions(_message.Message):
    __slots__ = ("enabled", "document_expansion_threshold", "max_chunks_per_document", "sibling_expansion", "thin_chunk_tokens", "coverage_boost", "coverage_weight", "mmr", "mmr_lambda", "token_budget")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_EXPANSION_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNKS_PER_DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    SIBLING_EXPANSION_FIELD_NUMBER: _ClassVar[int]
    THIN_CHUNK_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_BOOST_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MMR_FIELD_NUMBER: _ClassVar[int]
    MMR_LAMBDA_FIELD_NUMBER: _ClassVar[int]
    TOKEN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    document_expansion_threshold: float
    max_chunks_per_document: int
    sibling_expansion: bool
    thin_chunk_tokens: int
    coverage_boost: bool
    coverage_weight: float
    mmr: bool
    mmr_lambda: float
    token_budget: int
    def __init__(self, enabled: bool = ..., document_expansion_threshold: _Optional[float] = ..., max_chunks_per_document: _Optional[int] = ..., sibling_expansion: bool = ..., thin_chunk_tokens: _Optional[int] = ..., coverage_boost: bool = ..., coverage_weight: _Optional[float] = ..., mmr: bool = ..., mmr_lambda: _Optional[float] = ..., token_budget: _Optional[int] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("query", "query_vector", "top_k", "alpha", "fusion", "levels", "document_ids", "strategy", "context", "language", "feedback_docs", "feedback_weight", "embed_query", "sub_queries")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    QUERY_VECTOR_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    LEVELS_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_DOCS_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    EMBED_QUERY_FIELD_NUMBER: _ClassVar[int]
    SUB_QUERIES_FIELD_NUMBER: _ClassVar[int]
    query: str
    query_vector: _containers.RepeatedScalarFieldContainer[float]
    top_k: int
    alpha: float
    fusion: FusionType
    levels: _containers.RepeatedScalarFieldContainer[_common_pb2.ChunkLevel]
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    strategy: Strategy
    context: ContextOptions
    language: str
    feedback_docs: int
    feedback_weight: float
    embed_query: bool
    sub_queries: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, query: _Optional[str] = ..., query_vector: _Optional[_Iterable[float]] = ..., top_k: _Optional[int] = ..., alpha: _Optional[float] = ..., fusion: _Optional[_Union[FusionType, str]] = ..., levels: _Optional[_Iterable[_Union[_common_pb2.ChunkLevel, str]]] = ..., document_ids: _Optional[_Iterable[str]] = ..., strategy: _Optional[_Union[Strategy, str]] = ..., context: _Optional[_Union[ContextOptions, _Mapping]] = ..., language: _Optional[str] = ..., feedback_docs: _Optional[int] = ..., feedback_weight: _Optional[float] = ..., embed_query: bool = ..., sub_queries: _Optional[_Iterable[str]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("results", "accessible_documents", "backend", "strategy", "vector_unavailable", "embed_ms", "readable_documents", "ingesting_documents", "filter_matched_documents")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ACCESSIBLE_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    VECTOR_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    EMBED_MS_FIELD_NUMBER: _ClassVar[int]
    READABLE_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    INGESTING_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    FILTER_MATCHED_DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_common_pb2.ScoredChunk]
    accessible_documents: int
    backend: str
    strategy: Strategy
    vector_unavailable: str
    embed_ms: float
    readable_documents: int
    ingesting_documents: int
    filter_matched_documents: int
    def __init__(self, results: _Optional[_Iterable[_Union[_common_pb2.ScoredChunk, _Mapping]]] = ..., accessible_documents: _Optional[int] = ..., backend: _Optional[str] = ..., strategy: _Optional[_Union[Strategy, str]] = ..., vector_unavailable: _Optional[str] = ..., embed_ms: _Optional[float] = ..., readable_documents: _Optional[int] = ..., ingesting_documents: _Optional[int] = ..., filter_matched_documents: _Optional[int] = ...) -> None: ...

class CheckDocumentAccessRequest(_message.Message):
    __slots__ = ("document_ids",)
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, document_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class CheckDocumentAccessResponse(_message.Message):
    __slots__ = ("readable_ids", "owned_ids")
    READABLE_IDS_FIELD_NUMBER: _ClassVar[int]
    OWNED_IDS_FIELD_NUMBER: _ClassVar[int]
    readable_ids: _containers.RepeatedScalarFieldContainer[str]
    owned_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, readable_ids: _Optional[_Iterable[str]] = ..., owned_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class BeginNewVersionRequest(_message.Message):
    __slots__ = ("document_id", "reingest", "filename", "mime_type", "size_bytes", "content_sha256")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    REINGEST_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    reingest: bool
    filename: str
    mime_type: str
    size_bytes: int
    content_sha256: str
    def __init__(self, document_id: _Optional[str] = ..., reingest: bool = ..., filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., size_bytes: _Optional[int] = ..., content_sha256: _Optional[str] = ...) -> None: ...

class BeginNewVersionResponse(_message.Message):
    __slots__ = ("document", "version", "unchanged")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    document: _common_pb2.Document
    version: int
    unchanged: bool
    def __init__(self, document: _Optional[_Union[_common_pb2.Document, _Mapping]] = ..., version: _Optional[int] = ..., unchanged: bool = ...) -> None: ...

class UpdateDocumentRequest(_message.Message):
    __slots__ = ("document_id", "title", "acl")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    ACL_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    title: str
    acl: _common_pb2.Acl
    def __init__(self, document_id: _Optional[str] = ..., title: _Optional[str] = ..., acl: _Optional[_Union[_common_pb2.Acl, _Mapping]] = ...) -> None: ...

class UpdateDocumentResponse(_message.Message):
    __slots__ = ("document",)
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    document: _common_pb2.Document
    def __init__(self, document: _Optional[_Union[_common_pb2.Document, _Mapping]] = ...) -> None: ...

class DocumentAuditEntry(_message.Message):
    __slots__ = ("audit_id", "document_id", "actor", "time", "action", "before_json", "after_json")
    AUDIT_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    BEFORE_JSON_FIELD_NUMBER: _ClassVar[int]
    AFTER_JSON_FIELD_NUMBER: _ClassVar[int]
    audit_id: str
    document_id: str
    actor: str
    time: _timestamp_pb2.Timestamp
    action: str
    before_json: str
    after_json: str
    def __init__(self, audit_id: _Optional[str] = ..., document_id: _Optional[str] = ..., actor: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., action: _Optional[str] = ..., before_json: _Optional[str] = ..., after_json: _Optional[str] = ...) -> None: ...

class ListDocumentAuditRequest(_message.Message):
    __slots__ = ("document_id", "limit", "cursor")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    limit: int
    cursor: str
    def __init__(self, document_id: _Optional[str] = ..., limit: _Optional[int] = ..., cursor: _Optional[str] = ...) -> None: ...

class ListDocumentAuditResponse(_message.Message):
    __slots__ = ("entries", "next_cursor")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[DocumentAuditEntry]
    next_cursor: str
    def __init__(self, entries: _Optional[_Iterable[_Union[DocumentAuditEntry, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class ListChunksRequest(_message.Message):
    __slots__ = ("document_id", "level", "limit", "cursor")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    level: _common_pb2.ChunkLevel
    limit: int
    cursor: str
    def __init__(self, document_id: _Optional[str] = ..., level: _Optional[_Union[_common_pb2.ChunkLevel, str]] = ..., limit: _Optional[int] = ..., cursor: _Optional[str] = ...) -> None: ...

class ListedChunk(_message.Message):
    __slots__ = ("chunk_id", "level", "section_path", "page", "text", "token_count", "ordinal", "kind", "parent_id")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    SECTION_PATH_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    level: _common_pb2.ChunkLevel
    section_path: _containers.RepeatedScalarFieldContainer[str]
    page: int
    text: str
    token_count: int
    ordinal: int
    kind: _common_pb2.ChunkKind
    parent_id: str
    def __init__(self, chunk_id: _Optional[str] = ..., level: _Optional[_Union[_common_pb2.ChunkLevel, str]] = ..., section_path: _Optional[_Iterable[str]] = ..., page: _Optional[int] = ..., text: _Optional[str] = ..., token_count: _Optional[int] = ..., ordinal: _Optional[int] = ..., kind: _Optional[_Union[_common_pb2.ChunkKind, str]] = ..., parent_id: _Optional[str] = ...) -> None: ...

class ListChunksResponse(_message.Message):
    __slots__ = ("chunks", "next_cursor")
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[ListedChunk]
    next_cursor: str
    def __init__(self, chunks: _Optional[_Iterable[_Union[ListedChunk, _Mapping]]] = ..., next_cursor: _Optional[str] = ...) -> None: ...

class ListProblemDocumentsRequest(_message.Message):
    __slots__ = ("limit", "stuck_after_seconds")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    STUCK_AFTER_SECONDS_FIELD_NUMBER: _ClassVar[int]
    limit: int
    stuck_after_seconds: float
    def __init__(self, limit: _Optional[int] = ..., stuck_after_seconds: _Optional[float] = ...) -> None: ...

class ProblemDocument(_message.Message):
    __slots__ = ("document", "problem", "reason", "idle_seconds")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    IDLE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    document: _common_pb2.Document
    problem: str
    reason: str
    idle_seconds: float
    def __init__(self, document: _Optional[_Union[_common_pb2.Document, _Mapping]] = ..., problem: _Optional[str] = ..., reason: _Optional[str] = ..., idle_seconds: _Optional[float] = ...) -> None: ...

class ListProblemDocumentsResponse(_message.Message):
    __slots__ = ("documents",)
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[ProblemDocument]
    def __init__(self, documents: _Optional[_Iterable[_Union[ProblemDocument, _Mapping]]] = ...) -> None: ...
