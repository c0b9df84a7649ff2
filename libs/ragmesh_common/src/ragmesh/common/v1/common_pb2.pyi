import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DocumentStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DOCUMENT_STATUS_UNSPECIFIED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_QUEUED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_PARSING: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_EMBEDDING: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_INDEXING: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_READY: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_FAILED: _ClassVar[DocumentStatus]

class ChunkLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHUNK_LEVEL_UNSPECIFIED: _ClassVar[ChunkLevel]
    CHUNK_LEVEL_DOCUMENT: _ClassVar[ChunkLevel]
    CHUNK_LEVEL_SECTION: _ClassVar[ChunkLevel]
    CHUNK_LEVEL_PARAGRAPH: _ClassVar[ChunkLevel]

class ChunkKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHUNK_KIND_UNSPECIFIED: _ClassVar[ChunkKind]
    CHUNK_KIND_PARAGRAPH: _ClassVar[ChunkKind]
    CHUNK_KIND_TABLE: _ClassVar[ChunkKind]
    CHUNK_KIND_LIST: _ClassVar[ChunkKind]
    CHUNK_KIND_CODE: _ClassVar[ChunkKind]
    CHUNK_KIND_SUMMARY: _ClassVar[ChunkKind]
    CHUNK_KIND_SECTION: _ClassVar[ChunkKind]

class ChunkOrigin(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHUNK_ORIGIN_UNSPECIFIED: _ClassVar[ChunkOrigin]
    CHUNK_ORIGIN_SEARCH: _ClassVar[ChunkOrigin]
    CHUNK_ORIGIN_SUMMARY: _ClassVar[ChunkOrigin]
    CHUNK_ORIGIN_DOCUMENT_EXPANSION: _ClassVar[ChunkOrigin]
    CHUNK_ORIGIN_SIBLING: _ClassVar[ChunkOrigin]
    CHUNK_ORIGIN_PARENT: _ClassVar[ChunkOrigin]
DOCUMENT_STATUS_UNSPECIFIED: DocumentStatus
DOCUMENT_STATUS_QUEUED: DocumentStatus
DOCUMENT_STATUS_PARSING: DocumentStatus
DOCUMENT_STATUS_EMBEDDING: DocumentStatus
DOCUMENT_STATUS_INDEXING: DocumentStatus
DOCUMENT_STATUS_READY: DocumentStatus
DOCUMENT_STATUS_FAILED: DocumentStatus
CHUNK_LEVEL_UNSPECIFIED: ChunkLevel
CHUNK_LEVEL_DOCUMENT: ChunkLevel
CHUNK_LEVEL_SECTION: ChunkLevel
CHUNK_LEVEL_PARAGRAPH: ChunkLevel
CHUNK_KIND_UNSPECIFIED: ChunkKind
CHUNK_KIND_PARAGRAPH: ChunkKind
CHUNK_KIND_TABLE: ChunkKind
CHUNK_KIND_LIST: ChunkKind
CHUNK_KIND_CODE: ChunkKind
CHUNK_KIND_SUMMARY: ChunkKind
CHUNK_KIND_SECTION: ChunkKind
CHUNK_ORIGIN_UNSPECIFIED: ChunkOrigin
CHUNK_ORIGIN_SEARCH: ChunkOrigin
CHUNK_ORIGIN_SUMMARY: ChunkOrigin
CHUNK_ORIGIN_DOCUMENT_EXPANSION: ChunkOrigin
CHUNK_ORIGIN_SIBLING: ChunkOrigin
CHUNK_ORIGIN_PARENT: ChunkOrigin

class UserContext(_message.Message):
    __slots__ = ("user_id", "roles", "department")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    DEPARTMENT_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    department: str
    def __init__(self, user_id: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., department: _Optional[str] = ...) -> None: ...

class Acl(_message.Message):
    __slots__ = ("public", "departments", "roles", "users")
    PUBLIC_FIELD_NUMBER: _ClassVar[int]
    DEPARTMENTS_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    public: bool
    departments: _containers.RepeatedScalarFieldContainer[str]
    roles: _containers.RepeatedScalarFieldContainer[str]
    users: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, public: bool = ..., departments: _Optional[_Iterable[str]] = ..., roles: _Optional[_Iterable[str]] = ..., users: _Optional[_Iterable[str]] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("document_id", "title", "filename", "mime_type", "owner_user", "owner_department", "acl", "status", "error", "chunk_count", "page_count", "created_at", "updated_at", "summary", "size_bytes", "content_sha256", "version", "warnings", "pending_version", "pending_status", "pending_error")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    OWNER_USER_FIELD_NUMBER: _ClassVar[int]
    OWNER_DEPARTMENT_FIELD_NUMBER: _ClassVar[int]
    ACL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CHUNK_COUNT_FIELD_NUMBER: _ClassVar[int]
    PAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    PENDING_VERSION_FIELD_NUMBER: _ClassVar[int]
    PENDING_STATUS_FIELD_NUMBER: _ClassVar[int]
    PENDING_ERROR_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    title: str
    filename: str
    mime_type: str
    owner_user: str
    owner_department: str
    acl: Acl
    status: DocumentStatus
    error: str
    chunk_count: int
    page_count: int
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    summary: str
    size_bytes: int
    content_sha256: str
    version: int
    warnings: _containers.RepeatedScalarFieldContainer[str]
    pending_version: int
    pending_status: DocumentStatus
    pending_error: str
    def __init__(self, document_id: _Optional[str] = ..., title: _Optional[str] = ..., filename: _Optional[str] = ..., mime_type: _Optional[str] = ..., owner_user: _Optional[str] = ..., owner_department: _Optional[str] = ..., acl: _Optional[_Union[Acl, _Mapping]] = ..., status: _Optional[_Union[DocumentStatus, str]] = ..., error: _Optional[str] = ..., chunk_count: _Optional[int] = ..., page_count: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., summary: _Optional[str] = ..., size_bytes: _Optional[int] = ..., content_sha256: _Optional[str] = ..., version: _Optional[int] = ..., warnings: _Optional[_Iterable[str]] = ..., pending_version: _Optional[int] = ..., pending_status: _Optional[_Union[DocumentStatus, str]] = ..., pending_error: _Optional[str] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("chunk_id", "document_id", "level", "parent_id", "ordinal", "section_path", "page", "text", "title", "kind", "embedding")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    SECTION_PATH_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    document_id: str
    level: ChunkLevel
    parent_id: str
    ordinal: int
    section_path: _containers.RepeatedScalarFieldContainer[str]
    page: int
    text: str
    title: str
    kind: ChunkKind
    embedding: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, chunk_id: _Optional[str] = ..., document_id: _Optional[str] = ..., level: _Optional[_Union[ChunkLevel, str]] = ..., parent_id: _Optional[str] = ..., ordinal: _Optional[int] = ..., section_path: _Optional[_Iterable[str]] = ..., page: _Optional[int] = ..., text: _Optional[str] = ..., title: _Optional[str] = ..., kind: _Optional[_Union[ChunkKind, str]] = ..., embedding: _Optional[_Iterable[float]] = ...) -> None: ...

class ScoredChunk(_message.Message):
    __slots__ = ("chunk", "score", "hybrid_score", "lexical_score", "vector_score", "rerank_score", "reranked", "origin")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    HYBRID_SCORE_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_SCORE_FIELD_NUMBER: _ClassVar[int]
    VECTOR_SCORE_FIELD_NUMBER: _ClassVar[int]
    RERANK_SCORE_FIELD_NUMBER: _ClassVar[int]
    RERANKED_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    chunk: Chunk
    score: float
    hybrid_score: float
    lexical_score: float
    vector_score: float
    rerank_score: float
    reranked: bool
    origin: ChunkOrigin
    def __init__(self, chunk: _Optional[_Union[Chunk, _Mapping]] = ..., score: _Optional[float] = ..., hybrid_score: _Optional[float] = ..., lexical_score: _Optional[float] = ..., vector_score: _Optional[float] = ..., rerank_score: _Optional[float] = ..., reranked: bool = ..., origin: _Optional[_Union[ChunkOrigin, str]] = ...) -> None: ...
