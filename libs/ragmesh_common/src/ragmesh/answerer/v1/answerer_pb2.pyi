from ragmesh.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Verdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERDICT_UNSPECIFIED: _ClassVar[Verdict]
    VERDICT_SUPPORTED: _ClassVar[Verdict]
    VERDICT_NOT_CHECKABLE: _ClassVar[Verdict]
    VERDICT_LOW_SUPPORT: _ClassVar[Verdict]
    VERDICT_MISSING_TOKEN: _ClassVar[Verdict]
    VERDICT_OFF_QUESTION: _ClassVar[Verdict]
    VERDICT_WRONG_ANSWER_TYPE: _ClassVar[Verdict]
    VERDICT_RESTATES_QUESTION: _ClassVar[Verdict]
VERDICT_UNSPECIFIED: Verdict
VERDICT_SUPPORTED: Verdict
VERDICT_NOT_CHECKABLE: Verdict
VERDICT_LOW_SUPPORT: Verdict
VERDICT_MISSING_TOKEN: Verdict
VERDICT_OFF_QUESTION: Verdict
VERDICT_WRONG_ANSWER_TYPE: Verdict
VERDICT_RESTATES_QUESTION: Verdict

class CheckInputRequest(_message.Message):
    __slots__ = ("question", "history")
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    question: str
    history: _containers.RepeatedCompositeFieldContainer[ChatTurn]
    def __init__(self, question: _Optional[str] = ..., history: _Optional[_Iterable[_Union[ChatTurn, _Mapping]]] = ...) -> None: ...

class CheckInputResponse(_message.Message):
    __slots__ = ("allowed", "reason", "rules")
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    allowed: bool
    reason: str
    rules: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, allowed: bool = ..., reason: _Optional[str] = ..., rules: _Optional[_Iterable[str]] = ...) -> None: ...

class ChatTurn(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class AnswerRequest(_message.Message):
    __slots__ = ("question", "sources", "graph_facts", "history", "max_tokens", "temperature")
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FACTS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    question: str
    sources: _containers.RepeatedCompositeFieldContainer[_common_pb2.ScoredChunk]
    graph_facts: _containers.RepeatedScalarFieldContainer[str]
    history: _containers.RepeatedCompositeFieldContainer[ChatTurn]
    max_tokens: int
    temperature: float
    def __init__(self, question: _Optional[str] = ..., sources: _Optional[_Iterable[_Union[_common_pb2.ScoredChunk, _Mapping]]] = ..., graph_facts: _Optional[_Iterable[str]] = ..., history: _Optional[_Iterable[_Union[ChatTurn, _Mapping]]] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ...) -> None: ...

class Citation(_message.Message):
    __slots__ = ("source_index", "chunk_id", "support")
    SOURCE_INDEX_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    SUPPORT_FIELD_NUMBER: _ClassVar[int]
    source_index: int
    chunk_id: str
    support: float
    def __init__(self, source_index: _Optional[int] = ..., chunk_id: _Optional[str] = ..., support: _Optional[float] = ...) -> None: ...

class AnswerFinal(_message.Message):
    __slots__ = ("answer", "citations", "grounding_score", "grounded", "warnings", "model", "short_answer", "evidence", "sentences", "verified", "withheld", "draft")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CITATIONS_FIELD_NUMBER: _ClassVar[int]
    GROUNDING_SCORE_FIELD_NUMBER: _ClassVar[int]
    GROUNDED_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SHORT_ANSWER_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    SENTENCES_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    WITHHELD_FIELD_NUMBER: _ClassVar[int]
    DRAFT_FIELD_NUMBER: _ClassVar[int]
    answer: str
    citations: _containers.RepeatedCompositeFieldContainer[Citation]
    grounding_score: float
    grounded: bool
    warnings: _containers.RepeatedScalarFieldContainer[str]
    model: str
    short_answer: str
    evidence: _containers.RepeatedCompositeFieldContainer[EvidenceQuote]
    sentences: _containers.RepeatedCompositeFieldContainer[SentenceVerdict]
    verified: bool
    withheld: bool
    draft: str
    def __init__(self, answer: _Optional[str] = ..., citations: _Optional[_Iterable[_Union[Citation, _Mapping]]] = ..., grounding_score: _Optional[float] = ..., grounded: bool = ..., warnings: _Optional[_Iterable[str]] = ..., model: _Optional[str] = ..., short_answer: _Optional[str] = ..., evidence: _Optional[_Iterable[_Union[EvidenceQuote, _Mapping]]] = ..., sentences: _Optional[_Iterable[_Union[SentenceVerdict, _Mapping]]] = ..., verified: bool = ..., withheld: bool = ..., draft: _Optional[str] = ...) -> None: ...

class EvidenceQuote(_message.Message):
    __slots__ = ("source_index", "chunk_id", "text", "start", "end")
    SOURCE_INDEX_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    source_index: int
    chunk_id: str
    text: str
    start: int
    end: int
    def __init__(self, source_index: _Optional[int] = ..., chunk_id: _Optional[str] = ..., text: _Optional[str] = ..., start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class SentenceVerdict(_message.Message):
    __slots__ = ("text", "supported", "source_indexes", "unsupported_tokens", "reason", "verdict", "short_answer")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_FIELD_NUMBER: _ClassVar[int]
    SOURCE_INDEXES_FIELD_NUMBER: _ClassVar[int]
    UNSUPPORTED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    SHORT_ANSWER_FIELD_NUMBER: _ClassVar[int]
    text: str
    supported: bool
    source_indexes: _containers.RepeatedScalarFieldContainer[int]
    unsupported_tokens: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    verdict: Verdict
    short_answer: bool
    def __init__(self, text: _Optional[str] = ..., supported: bool = ..., source_indexes: _Optional[_Iterable[int]] = ..., unsupported_tokens: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ..., verdict: _Optional[_Union[Verdict, str]] = ..., short_answer: bool = ...) -> None: ...

class AnswerEvent(_message.Message):
    __slots__ = ("token", "final", "queued")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    token: str
    final: AnswerFinal
    queued: QueueStatus
    def __init__(self, token: _Optional[str] = ..., final: _Optional[_Union[AnswerFinal, _Mapping]] = ..., queued: _Optional[_Union[QueueStatus, _Mapping]] = ...) -> None: ...

class QueueStatus(_message.Message):
    __slots__ = ("position", "estimated_wait_seconds")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    position: int
    estimated_wait_seconds: float
    def __init__(self, position: _Optional[int] = ..., estimated_wait_seconds: _Optional[float] = ...) -> None: ...

class RewriteRequest(_message.Message):
    __slots__ = ("question", "history")
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    question: str
    history: _containers.RepeatedCompositeFieldContainer[ChatTurn]
    def __init__(self, question: _Optional[str] = ..., history: _Optional[_Iterable[_Union[ChatTurn, _Mapping]]] = ...) -> None: ...

class RewriteResponse(_message.Message):
    __slots__ = ("question",)
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    question: str
    def __init__(self, question: _Optional[str] = ...) -> None: ...
