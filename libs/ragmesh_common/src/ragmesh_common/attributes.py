"""The registry of span attributes ragmesh sets by hand. Declare here before use.

Domain attributes are prefixed `rag.`; model calls follow the OpenTelemetry GenAI
semantic conventions (`gen_ai.*`). Never put prompt text or document content here.
"""

from __future__ import annotations

# who and what
RAG_USER = "rag.user.id"
RAG_DEPARTMENT = "rag.user.department"
RAG_DOCUMENT_ID = "rag.document.id"
RAG_DOCUMENT_VERSION = "rag.document.version"  # the version an ingestion call is for (0 = pending or visible)
RAG_DOCUMENT_DEDUPLICATED = "rag.document.deduplicated"  # CreateOrGetDocument returned the existing document
RAG_DOCUMENT_FORMAT = "rag.document.format"
RAG_INGEST_REFUSED = "rag.ingest.refused"  # why the worker refused a task (forged, stale, outside the store)
RAG_STAGE = "rag.stage"
RAG_DEGRADED = "rag.degraded"
RAG_DEGRADED_REASON = "rag.degraded.reason"
# parse / chunk
RAG_PARSE_PIPELINE = "rag.parse.pipeline"
RAG_PARSE_PAGES = "rag.parse.pages"
RAG_PARSE_BLOCKS = "rag.parse.blocks"
RAG_PARSE_OCR_PAGES = "rag.parse.ocr_pages"
RAG_CHUNK_COUNT = "rag.chunk.count"
# embed
RAG_EMBED_TEXTS = "rag.embed.texts"
RAG_EMBED_BATCH = "rag.embed.batch_size"
# retrieval
RAG_SEARCH_BACKEND = "rag.search.backend"
RAG_SEARCH_TOP_K = "rag.search.top_k"
RAG_SEARCH_ALPHA = "rag.search.alpha"
RAG_SEARCH_FUSION = "rag.search.fusion"
RAG_SEARCH_RESULTS = "rag.search.results"
RAG_SEARCH_ACCESSIBLE_DOCS = "rag.search.accessible_documents"
RAG_SEARCH_LEXICAL_HITS = "rag.search.lexical_hits"
RAG_SEARCH_LEXICAL_PLAN = "rag.search.lexical_plan"  # term_first | document_first
RAG_SEARCH_VECTOR_PLAN = "rag.search.vector_plan"  # listed | exact | hnsw_in_scopes
RAG_SEARCH_READABLE_CHUNKS = (
    "rag.search.readable_chunks"  # ready chunks an ACL-scope search may read (exact plan check)
)
RAG_SEARCH_LANGUAGES = "rag.search.languages"  # the languages the lexical leg searched, the query's first
RAG_SEARCH_LANGUAGE_CHOICE = "rag.search.language_choice"  # detected | hint | default | close
RAG_SEARCH_LANGUAGE_HINT = "rag.search.language_hint"  # the user's language (request field or Accept-Language)
RAG_SEARCH_VECTOR_HITS = "rag.search.vector_hits"
# query understanding
RAG_QUERY_KIND = "rag.query.kind"
RAG_QUERY_MULTI_HOP = "rag.query.multi_hop"
RAG_QUERY_REWRITTEN = "rag.query.rewritten"
RAG_QUERY_STRATEGY = "rag.query.strategy"
RAG_QUERY_SUB_QUERIES = "rag.query.sub_queries"
# rerank
RAG_RERANK_CANDIDATES = "rag.rerank.candidates"
RAG_RERANK_FALLBACK = "rag.rerank.fallback"
RAG_RERANK_CONFIGURED = "rag.rerank.configured"
RAG_SEARCH_READABLE_DOCS = "rag.search.readable_documents"
RAG_SEARCH_INGESTING_DOCS = "rag.search.ingesting_documents"
RAG_SEARCH_FILTER_MATCHED_DOCS = "rag.search.filter_matched_documents"
RAG_RELEVANCE_GRADE = "rag.relevance.grade"
RAG_RELEVANCE_REASONS = "rag.relevance.reasons"
RAG_RELEVANCE_KEPT = "rag.relevance.kept"
RAG_RELEVANCE_CORRECTIVE = "rag.relevance.corrective"
RAG_QUERY_REWRITE_METHOD = "rag.query.rewrite_method"
# graph
RAG_GRAPH_ENTITIES = "rag.graph.entities"
RAG_GRAPH_RELATIONS = "rag.graph.relations"
RAG_GRAPH_DEPTH = "rag.graph.depth"
RAG_GRAPH_COMMUNITIES = "rag.graph.communities"  # community reports a collection-level question is answered from
RAG_GRAPH_SEARCHED_SOURCES = "rag.graph.searched_sources"  # search passages on the topic in place of off-topic reports
RAG_GRAPH_UNREADABLE_DOCS = "rag.graph.unreadable_documents"  # asked for, but the catalogue says not readable
RAG_GRAPH_SEEDS = "rag.graph.seeds"  # question entities found in the readable graph (PageRank seeds)
RAG_GRAPH_MERGES = "rag.graph.merges"  # entity-resolution merges of an ingested document
RAG_SEARCH_GRAPH_HITS = "rag.search.graph_hits"  # chunks the graph leg scored
RAG_SEARCH_LINKED = "rag.search.linked"  # documents the top passages name, placed after them (gateway `link`)
# answer and guardrails
RAG_GUARDRAIL_RULES = "rag.guardrail.rules"
RAG_GUARDRAIL_ALLOWED = "rag.guardrail.allowed"
RAG_GROUNDING_SCORE = "rag.answer.grounding_score"
RAG_CITATIONS = "rag.answer.citations"
RAG_SOURCES = "rag.answer.sources"
RAG_ANSWER_EVIDENCE = "rag.answer.evidence_quotes"
RAG_ANSWER_VERIFIED = "rag.answer.verified"
RAG_ANSWER_WITHHELD = "rag.answer.withheld"
RAG_QUESTION_RESPELLED = (
    "rag.answer.respelled"  # the question's words read with the sources' spelling ("fonded -> founded")
)
RAG_OUTCOME = "rag.chat.outcome"
RAG_QUEUE_POSITION = "rag.answer.queue_position"  # place taken in the answerer's queue (0 = started at once)
RAG_QUEUE_WAIT_MS = "rag.answer.queue_wait_ms"
RAG_QUEUE_REFUSED = "rag.answer.queue_refused"  # RESOURCE_EXHAUSTED: queue full or wait over budget
RAG_RETRY_AFTER = "rag.answer.retry_after_seconds"
RAG_CACHE_HIT = "rag.cache.hit"  # the chat was answered from the semantic cache
RAG_CACHE_TRACE_ID = "rag.cache.trace_id"  # the trace of the request whose answer was cached
RAG_CACHE_SIMILARITY = "rag.cache.similarity"  # cosine of the question to the best cached one
RAG_CACHE_CANDIDATES = "rag.cache.candidates"  # cached questions compared (the option bucket's size)
RAG_CACHE_REFUSED = "rag.cache.refused"  # close entries not served: a source unreadable or changed
RAG_CACHE_STORED = "rag.cache.stored"
RAG_AGENT_TOOL = "rag.agent.tool"  # an agent tool call: fetch_section or graph_neighbours
RAG_AGENT_LLM_TOKENS = "rag.agent.llm_tokens"  # LLM tokens of the request so far (estimated), against the bound
# GenAI semantic conventions
GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"  # only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"  # likewise
# OpenInference (Arize Phoenix, Langfuse): how those tools recognise and render retrieval and model spans
OI_SPAN_KIND = "openinference.span.kind"  # LLM | RETRIEVER | RERANKER | CHAIN | GUARDRAIL
OI_INPUT_VALUE = "input.value"  # the question or prompt: only with content capture on (above)
OI_INPUT_MIME_TYPE = "input.mime_type"
OI_OUTPUT_VALUE = "output.value"  # the answer: only with content capture on
OI_LLM_MODEL = "llm.model_name"
OI_LLM_TOKENS_PROMPT = "llm.token_count.prompt"
OI_LLM_TOKENS_COMPLETION = "llm.token_count.completion"
OI_LLM_TOKENS_TOTAL = "llm.token_count.total"
OI_RETRIEVAL_DOCUMENTS = "retrieval.documents"  # prefix: retrieval.documents.<i>.document.{id,score,content}

REGISTRY: frozenset[str] = frozenset(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
)


def retrieval_document(index: int, field: str) -> str:
    """`retrieval.documents.<index>.document.<field>` (OpenInference's flattened list of retrieved documents)."""
    return f"{OI_RETRIEVAL_DOCUMENTS}.{index}.document.{field}"
