"""Query languages: which languages a query's BM25 leg searches (`choose_languages`), how their rankings merge
(`merge_languages`), the alpha of a language the embedder does not cover (`language_alpha`), and through the gRPC
contract: a short German query with the user's hint finds the German document English analysis misses."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the search tests' helpers (tests run in importlib mode)
from test_retriever_search import ALICE, add_document, app_dsn, retriever_on, unit  # noqa: F401

from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.config import ConfigError
from ragmesh_retriever.analysis import LanguagePolicy, choose_languages, language_code
from ragmesh_retriever.config import Settings
from ragmesh_retriever.ranking import language_alpha, merge_languages

CONFIGURED = ("en", "de", "fr")


def choose(query: str, hint: str = "", margin: float = 0.5, short_words: int = 6) -> tuple[tuple[str, ...], str]:
    choice = choose_languages(
        query, default="english", hint=hint, configured=CONFIGURED, margin=margin, short_words=short_words
    )
    return choice.languages, choice.reason


def test_a_clearly_detected_query_keeps_one_analysis_whatever_the_hint() -> None:
    assert choose("Wann wurde die Firma IBM in New York gegründet?") == (("de",), "detected")
    assert choose("When was the company IBM founded in New York City?", hint="de") == (("en",), "detected")
    assert choose("信息检索", hint="de") == (("zh",), "detected")  # by script


def test_a_short_query_is_searched_in_the_hint_and_the_close_languages() -> None:
    # py3langid over en/de/fr puts "Urlaubstage Beschäftigte" at de 0.99: German (the query's language, first)
    # and English (the default)
    assert choose("Urlaubstage Beschäftigte") == (("de", "en"), "close")
    # the user's language first, and nothing else is close
    assert choose("Urlaubstage Beschäftigte", hint="de-CH") == (("de",), "hint")
    # "vacation policy" is en 0.49 / fr 0.48 / de 0.03: a wide margin takes French too, a narrow one only English
    assert choose("vacation policy", margin=0.5)[0] == ("en", "fr", "de")
    assert choose("vacation policy", margin=0.05)[0] == ("en", "fr")
    assert choose("vacation policy", margin=0.0)[0] == ("en",)


def test_a_long_unclear_query_keeps_the_hint_or_the_default() -> None:
    mixed = "Urlaubstage vacation days Beschäftigte employees policy Regeln"  # no language clearly
    assert choose(mixed, short_words=6) == (("en",), "default")
    assert choose(mixed, hint="fr", short_words=6) == (("fr",), "hint")
    assert choose(mixed, short_words=20)[1] == "close"


def test_a_hint_without_a_configuration_is_ignored_and_reported() -> None:
    choice = choose_languages("Urlaubstage", default="english", hint="xx", configured=CONFIGURED, margin=0.0)
    assert choice.languages[0] == "en" and choice.ignored_hint == "xx"
    assert language_code("german") == "de" and language_code("de-AT") == "de"
    assert language_code("simple") is None and language_code("xx") is None


def test_without_configured_languages_a_short_query_gets_the_default_only() -> None:
    assert LanguagePolicy().choose("Urlaubstage Beschäftigte").languages == ("en",)


def test_one_ranking_merges_to_itself() -> None:
    scores = {"a": 7.5, "b": 2.0}
    assert merge_languages([(scores, 12.0)]) == scores


def test_merge_compares_languages_as_shares_of_their_bounds() -> None:
    english = ({"a": 3.0, "b": 1.0}, 10.0)  # a matched 30 % of the English analysis's best possible score
    german = ({"b": 16.0, "c": 4.0}, 20.0)  # b matched 80 % of the German one's
    merged = merge_languages([english, german])
    # on the first (English) scale: b's German share wins over its English one, c enters
    assert merged == pytest.approx({"a": 3.0, "b": 8.0, "c": 2.0})
    assert sorted(merged, key=lambda k: -merged[k]) == ["b", "a", "c"]


def test_merge_leaves_out_an_analysis_that_matched_nothing() -> None:
    assert merge_languages([({}, 0.0), ({"x": 5.0}, 10.0)]) == {"x": 5.0}
    assert merge_languages([]) == {}


def test_alpha_leans_on_bm25_for_a_language_the_embedder_does_not_cover() -> None:
    assert language_alpha(0.4, "en", ("en",), 0.2) == 0.4
    assert language_alpha(0.4, "de", ("en",), 0.2) == 0.2
    assert language_alpha(0.1, "de", ("en",), 0.2) == 0.1  # never raised
    assert language_alpha(0.4, "de", ("*",), 0.2) == 0.4  # a multilingual embedder
    with pytest.raises(ValueError, match="alpha"):
        language_alpha(1.5, "de", ("en",), 0.2)


def test_an_unknown_configured_language_fails_at_start(monkeypatch) -> None:
    with pytest.raises(ConfigError, match="RETRIEVER_QUERY_LANGUAGES names xx"):
        Settings.defaults("postgresql://x/y", rls_key="k" * 32, query_languages="en,xx")


GERMAN_DOC = "Beschäftigte erhalten jährlich dreißig Urlaubstage; die Anträge genehmigt die Personalabteilung."
ENGLISH_DOC = "Employees receive thirty days of paid leave each year; the HR department approves the requests."


async def _bm25(stub, query: str, language: str = "") -> list[str]:
    reply = await stub.Search(
        retriever_pb2.SearchRequest(query=query, top_k=5, alpha=0.0, language=language), metadata=ALICE.metadata()
    )
    return [r.chunk.text for r in reply.results]


async def test_a_short_german_query_with_the_hint_finds_what_english_analysis_misses(app_dsn) -> None:
    # only English configured: a short query is analysed as English (the behaviour before query languages)
    async with retriever_on(app_dsn, query_languages="en") as stub:
        await add_document(stub, ALICE, "urlaub", [(GERMAN_DOC, unit(0))])
        await add_document(stub, ALICE, "leave", [(ENGLISH_DOC, unit(1))])
        assert await _bm25(stub, "Beschäftigten Urlaubstagen") == []  # English stems miss the German lexemes
        assert await _bm25(stub, "Beschäftigten Urlaubstagen", language="de") == [GERMAN_DOC]
        assert await _bm25(stub, "Beschäftigten Urlaubstagen", language="xx") == []  # ignored: English
        # a clear English question keeps its English analysis whatever the hint
        assert await _bm25(stub, "Who approves the requests of the employees?", language="de") == [ENGLISH_DOC]


async def test_the_default_languages_search_a_short_german_query_in_german_too(app_dsn) -> None:
    async with retriever_on(app_dsn) as stub:  # en, de, fr
        await add_document(stub, ALICE, "urlaub", [(GERMAN_DOC, unit(0))])
        await add_document(stub, ALICE, "leave", [(ENGLISH_DOC, unit(1))])
        assert await _bm25(stub, "Beschäftigten Urlaubstagen") == [GERMAN_DOC]
        # merged with the English analysis, both documents found: each analysis's best share decides the order
        found = await _bm25(stub, "Urlaubstage employees")
        assert set(found) == {GERMAN_DOC, ENGLISH_DOC}


@pytest.mark.parametrize("stub_settings", [{"embedder_languages": "en", "uncovered_alpha": 0.0}])
async def test_a_query_in_a_language_the_embedder_does_not_cover_ranks_by_bm25(app_dsn, stub_settings) -> None:
    async with retriever_on(app_dsn, **stub_settings) as stub:
        # the vector says the English document, BM25 the German one: alpha 0 for German leaves BM25 alone
        await add_document(stub, ALICE, "urlaub", [(GERMAN_DOC, unit(0))])
        await add_document(stub, ALICE, "leave", [(ENGLISH_DOC, unit(1))])
        request = retriever_pb2.SearchRequest(query="Beschäftigten Urlaubstagen", top_k=5, query_vector=unit(1))
        german = await stub.Search(request, metadata=ALICE.metadata())
        assert [r.chunk.text for r in german.results] == [GERMAN_DOC]
        # an English query keeps the vector leg: the English document by its vector (BM25 matches neither)
        request.query = "holidays"
        english = await stub.Search(request, metadata=ALICE.metadata())
        assert english.results[0].chunk.text == ENGLISH_DOC and english.results[0].vector_score > 0.99


async def test_the_languages_searched_are_traced_and_an_unused_hint_logged(app_dsn, monkeypatch, caplog) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ragmesh_common import attributes as attr
    from ragmesh_retriever.backends import pgvector_backend

    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # local provider: the global one stays untouched
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(pgvector_backend, "tracer", provider.get_tracer("test"))
    async with retriever_on(app_dsn) as stub:
        await add_document(stub, ALICE, "urlaub", [(GERMAN_DOC, unit(0))])
        exporter.clear()
        assert await _bm25(stub, "Beschäftigten Urlaubstagen", language="xx") == [GERMAN_DOC]
    legs = [s for s in exporter.get_finished_spans() if s.name == "lexical leg"]
    assert [tuple(s.attributes[attr.RAG_SEARCH_LANGUAGES]) for s in legs] == [("de", "en")]
    assert "language hint 'xx' has no text search configuration; ignored" in caplog.text
