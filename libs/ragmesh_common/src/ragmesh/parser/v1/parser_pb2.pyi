from ragmesh.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ParseRequest(_message.Message):
    __slots__ = ("filename", "content", "mime_type", "document_id", "max_chunk_tokens")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_TOKENS_FIELD_NUMBER: _ClassVar[int]
    filename: str
    content: bytes
    mime_type: str
    document_id: str
    max_chunk_tokens: int
    def __init__(self, filename: _Optional[str] = ..., content: _Optional[bytes] = ..., mime_type: _Optional[str] = ..., document_id: _Optional[str] = ..., max_chunk_tokens: _Optional[int] = ...) -> None: ...

class BoundingBox(_message.Message):
    __slots__ = ("left", "top", "right", "bottom", "unit")
    LEFT_FIELD_NUMBER: _ClassVar[int]
    TOP_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    BOTTOM_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    left: float
    top: float
    right: float
    bottom: float
    unit: str
    def __init__(self, left: _Optional[float] = ..., top: _Optional[float] = ..., right: _Optional[float] = ..., bottom: _Optional[float] = ..., unit: _Optional[str] = ...) -> None: ...

class Heading(_message.Message):
    __slots__ = ("text", "level", "page")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    text: str
    level: int
    page: int
    def __init__(self, text: _Optional[str] = ..., level: _Optional[int] = ..., page: _Optional[int] = ...) -> None: ...

class TableRow(_message.Message):
    __slots__ = ("cells",)
    CELLS_FIELD_NUMBER: _ClassVar[int]
    cells: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cells: _Optional[_Iterable[str]] = ...) -> None: ...

class Table(_message.Message):
    __slots__ = ("num_rows", "num_cols", "rows")
    NUM_ROWS_FIELD_NUMBER: _ClassVar[int]
    NUM_COLS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    num_rows: int
    num_cols: int
    rows: _containers.RepeatedCompositeFieldContainer[TableRow]
    def __init__(self, num_rows: _Optional[int] = ..., num_cols: _Optional[int] = ..., rows: _Optional[_Iterable[_Union[TableRow, _Mapping]]] = ...) -> None: ...

class Block(_message.Message):
    __slots__ = ("kind", "text", "section_path", "page", "bbox", "table", "heading_level")
    KIND_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SECTION_PATH_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    BBOX_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    HEADING_LEVEL_FIELD_NUMBER: _ClassVar[int]
    kind: str
    text: str
    section_path: _containers.RepeatedScalarFieldContainer[str]
    page: int
    bbox: BoundingBox
    table: Table
    heading_level: int
    def __init__(self, kind: _Optional[str] = ..., text: _Optional[str] = ..., section_path: _Optional[_Iterable[str]] = ..., page: _Optional[int] = ..., bbox: _Optional[_Union[BoundingBox, _Mapping]] = ..., table: _Optional[_Union[Table, _Mapping]] = ..., heading_level: _Optional[int] = ...) -> None: ...

class ParseResponse(_message.Message):
    __slots__ = ("title", "format", "page_count", "headings", "blocks", "chunks")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    PAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    HEADINGS_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    title: str
    format: str
    page_count: int
    headings: _containers.RepeatedCompositeFieldContainer[Heading]
    blocks: _containers.RepeatedCompositeFieldContainer[Block]
    chunks: _containers.RepeatedCompositeFieldContainer[_common_pb2.Chunk]
    def __init__(self, title: _Optional[str] = ..., format: _Optional[str] = ..., page_count: _Optional[int] = ..., headings: _Optional[_Iterable[_Union[Heading, _Mapping]]] = ..., blocks: _Optional[_Iterable[_Union[Block, _Mapping]]] = ..., chunks: _Optional[_Iterable[_Union[_common_pb2.Chunk, _Mapping]]] = ...) -> None: ...

class ListFormatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListFormatsResponse(_message.Message):
    __slots__ = ("extensions",)
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    extensions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, extensions: _Optional[_Iterable[str]] = ...) -> None: ...
