from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GraphChunk(_message.Message):
    __slots__ = ("chunk_id", "document_id", "text")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    document_id: str
    text: str
    def __init__(self, chunk_id: _Optional[str] = ..., document_id: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class IngestChunksRequest(_message.Message):
    __slots__ = ("document_id", "chunks")
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    chunks: _containers.RepeatedCompositeFieldContainer[GraphChunk]
    def __init__(self, document_id: _Optional[str] = ..., chunks: _Optional[_Iterable[_Union[GraphChunk, _Mapping]]] = ...) -> None: ...

class IngestChunksResponse(_message.Message):
    __slots__ = ("entities", "relations")
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    entities: int
    relations: int
    def __init__(self, entities: _Optional[int] = ..., relations: _Optional[int] = ...) -> None: ...

class GetContextRequest(_message.Message):
    __slots__ = ("query", "document_ids", "max_depth", "limit")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    query: str
    document_ids: _containers.RepeatedScalarFieldContainer[str]
    max_depth: int
    limit: int
    def __init__(self, query: _Optional[str] = ..., document_ids: _Optional[_Iterable[str]] = ..., max_depth: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class Entity(_message.Message):
    __slots__ = ("name", "type", "mentions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MENTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    mentions: int
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., mentions: _Optional[int] = ...) -> None: ...

class Relation(_message.Message):
    __slots__ = ("source", "target", "type", "weight", "chunk_ids", "depth")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    source: str
    target: str
    type: str
    weight: float
    chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    depth: int
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ..., type: _Optional[str] = ..., weight: _Optional[float] = ..., chunk_ids: _Optional[_Iterable[str]] = ..., depth: _Optional[int] = ...) -> None: ...

class GetContextResponse(_message.Message):
    __slots__ = ("matched", "neighbours", "relations", "chunk_ids")
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOURS_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    matched: _containers.RepeatedCompositeFieldContainer[Entity]
    neighbours: _containers.RepeatedCompositeFieldContainer[Entity]
    relations: _containers.RepeatedCompositeFieldContainer[Relation]
    chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, matched: _Optional[_Iterable[_Union[Entity, _Mapping]]] = ..., neighbours: _Optional[_Iterable[_Union[Entity, _Mapping]]] = ..., relations: _Optional[_Iterable[_Union[Relation, _Mapping]]] = ..., chunk_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteDocumentRequest(_message.Message):
    __slots__ = ("document_id",)
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    document_id: str
    def __init__(self, document_id: _Optional[str] = ...) -> None: ...

class DeleteDocumentResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
