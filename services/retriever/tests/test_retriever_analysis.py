"""Language detection, CJK bigram segmentation, and their effect on real PostgreSQL text search."""

from __future__ import annotations

import psycopg
import pytest

from ragmesh_retriever.analysis import (
    cjk_bigrams,
    detect_language,
    prepare_lexical_text,
    query_analyses,
    regconfig_for,
)

SAMPLES = {
    "en": "The retriever combines lexical and vector search to find the most relevant passages for a question.",
    "de": "Der Mitarbeiter kann seine Urlaubstage über das Portal beantragen, wenn der Vorgesetzte zustimmt.",
    "fr": "Les employés doivent soumettre leurs notes de frais dans le mois qui suit la fin de la mission.",
    "es": "Los empleados pueden solicitar sus vacaciones a través del portal con dos semanas de antelación.",
    "it": "Il dipendente deve presentare la richiesta di ferie al responsabile almeno due settimane prima.",
    "pt": "Os funcionários devem enviar o relatório de despesas até o final do mês seguinte à viagem.",
    "nl": "De medewerker kan zijn vakantiedagen aanvragen via het portaal als de leidinggevende akkoord is.",
    "sv": "Den anställde kan ansöka om semester via portalen och chefen måste godkänna ansökan.",
    "no": "Den ansatte kan søke om ferie via portalen, og lederen må godkjenne søknaden før den blir gyldig.",
    "da": "Medarbejderen kan søge om ferie via portalen, og lederen skal godkende ansøgningen, før den bliver gyldig.",
    "fi": "Työntekijä voi hakea lomaa portaalin kautta, ja esimiehen on hyväksyttävä hakemus ennen kuin se on "
    "voimassa.",
    "ru": "Сотрудник может подать заявление на отпуск через портал, если руководитель это одобрит.",
    "hu": "A munkavállaló a portálon keresztül kérhet szabadságot, ha a vezető ezt jóváhagyja.",
    "ro": "Angajatul poate solicita concediul prin portal, iar managerul trebuie să aprobe cererea în cel mult o "
    "săptămână.",
    "tr": "Çalışan izin talebini portal üzerinden yapabilir ve yönetici bu talebi bir hafta içinde onaylar.",
    "zh": "员工可以通过门户网站申请年假，经理需要在一周内批准。",
    "ja": "従業員はポータルから休暇を申請でき、上司は一週間以内に承認する必要があります。",
    "ko": "직원은 포털을 통해 휴가를 신청할 수 있으며 관리자는 일주일 이내에 승인해야 합니다.",
    "el": "Ο υπάλληλος μπορεί να ζητήσει άδεια μέσω της πύλης.",
}


@pytest.mark.parametrize("lang", sorted(SAMPLES))
def test_detects_the_language_of_a_sentence(lang: str) -> None:
    assert detect_language(SAMPLES[lang]) == lang


def test_mixed_english_and_chinese_goes_to_the_majority() -> None:
    assert detect_language("The 检索增强生成 approach retrieves documents from the index before answering.") == "en"
    assert detect_language("请问如何配置RAG系统的检索模块和向量索引？") == "zh"


def test_short_or_unknown_text_gets_the_default() -> None:
    assert detect_language("Häuser Berlin") == "simple"
    assert detect_language("Häuser Berlin", default="de") == "de"
    assert detect_language("pgvector hnsw ef_search 100 m=16") == "simple"
    assert detect_language("") == "simple"
    # scripts decide alone, whatever the length
    assert detect_language("检索") == "zh"
    assert detect_language("검색") == "ko"


def test_regconfig_for_codes_regions_and_config_names() -> None:
    assert regconfig_for("en") == "english"
    assert regconfig_for("de-AT") == "german"
    assert regconfig_for("pt_BR") == "portuguese"
    assert regconfig_for("french") == "french"
    assert [regconfig_for(x) for x in ("zh", "ja", "ko", "xx", "")] == ["simple"] * 5


def test_cjk_bigrams_like_lucene_cjk_analyzer() -> None:
    assert cjk_bigrams("信息检索") == ["信息", "息检", "检索"]
    assert cjk_bigrams("中") == ["中"]
    assert cjk_bigrams("") == []


def test_prepare_segments_cjk_runs_and_keeps_latin_words() -> None:
    assert prepare_lexical_text("请问如何配置RAG系统？", "zh") == "请问 问如 如何 何配 配置 RAG 系统 ?"
    # NFKC: full-width Latin becomes ASCII; CJK punctuation separates runs; a lone character stays a unigram
    assert prepare_lexical_text("ＲＡＧシステム。検", "ja") == "RAG シス ステ テム 検"
    assert prepare_lexical_text("한국어 검색", "ko") == "한국 국어 검색"


def test_prepare_is_identity_without_cjk_and_bigrams_cjk_quoted_elsewhere() -> None:
    text = "Die Häuser in Berlin (siehe Anhang)."
    assert prepare_lexical_text(text, "de") is text
    assert prepare_lexical_text("The term 检索 means retrieval.", "en") == "The term 检索 means retrieval."
    assert (
        prepare_lexical_text("The term 信息检索 means retrieval.", "en") == "The term 信息 息检 检索 means retrieval."
    )


# Short English texts that a stop-word or n-gram heuristic takes for another language ("la", "de", "et", "en"
# and "des" are French or Danish words too); each must be analysed with the default configuration or English.
SHORT_ENGLISH = [
    "Summary.",
    "Preface 1.",
    "Abstract.",
    "The U.S.",
    "J. Agric.",
    "la vie en rose",
    "apple banana",
    "kubernetes cluster upgrade",
    "Des Moines",
    "de novo synthesis",
    "et al. 2019",
    "en route",
    "Salmonella enterica serovar Typhimurium (S.",
    "INTRODUCTION • • CELLULAR AND MOLECULAR REQUIREMENTS FOR T-CELL ACTIVATION . The",
]


@pytest.mark.parametrize("text", SHORT_ENGLISH)
def test_short_english_text_is_never_given_another_language(text: str) -> None:
    assert detect_language(text, default="en") == "en"
    assert detect_language(text) in ("en", "simple")


def test_plain_english_questions_and_sentences_are_english() -> None:
    for text in (
        "When was IBM founded?",
        "What is the role of IL-6 in inflammation?",
        "ALDH1 expression is associated with poorer prognosis for breast cancer primary tumors.",
        "salary review of the build farm",
    ):
        assert detect_language(text) == "en", text


def test_query_analyses_use_the_querys_own_language_or_the_default() -> None:
    assert query_analyses("vacation policy", "english") == [("english", "vacation policy")]
    assert query_analyses("vacation policy", "en") == [("english", "vacation policy")]
    assert query_analyses("the role of the", "english") == [("english", "the role of the")]
    german = "Wo gibt es günstige Häuser in der Stadt?"
    assert query_analyses(german, "english") == [("german", german)]
    mixed = query_analyses("How do I configure the 检索系统 for the index?", "english")
    assert mixed[0] == ("english", "How do I configure the 检索 索系 系统 for the index?")
    assert ("simple", "How do I configure the 检索 索系 系统 for the index?") in mixed
    # an explicit language hint replaces detection; pairs are never repeated
    assert query_analyses("Haus", "english", language="de") == [("german", "Haus")]
    assert query_analyses("检索", "english") == [("simple", "检索")]


def test_a_short_english_query_keeps_its_stop_words_out_in_postgres(postgres) -> None:
    """The failure this replaced: a corpus language (French, Danish) applied to every query kept "the" and "of"
    as lexemes, rare and so heavily weighted."""
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        for query in ("the role of the microbiome", "Summary of the effects", "state of the art"):
            lexemes = _lexemes(conn, query_analyses(query, "english"))
            assert not {"the", "of"} & lexemes, (query, lexemes)
        assert {"the", "of"} <= _lexemes(conn, [("french", "the role of the microbiome")])  # what it was


def _lexemes(conn: psycopg.Connection, pairs: list[tuple[str, str]]) -> set[str]:
    found: set[str] = set()
    for cfg, text in pairs:
        row = conn.execute(
            "SELECT array(SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, %s)))", (cfg, text)
        ).fetchone()
        assert row is not None
        found.update(row[0])
    return found


def test_chinese_query_bigrams_match_a_chinese_document_in_postgres(postgres) -> None:
    document = "检索增强生成系统先从向量索引中检索相关文档，再由大语言模型生成答案。"
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:

        def matches(query: str) -> bool:
            row = conn.execute(
                "SELECT to_tsvector('simple', %s) @@ plainto_tsquery('simple', %s)",
                (prepare_lexical_text(document, "zh"), prepare_lexical_text(query, "zh")),
            ).fetchone()
            assert row is not None
            return bool(row[0])

        assert matches("向量索引")
        assert matches("大语言模型")
        assert not matches("天气预报")
        # unsegmented, PostgreSQL's parser sees the whole run as one token and nothing matches
        row = conn.execute(
            "SELECT to_tsvector('simple', %s) @@ plainto_tsquery('simple', %s)", (document, "向量索引")
        ).fetchone()
        assert row is not None and row[0] is False
        # BM25 sums over query lexemes: 检索 and 文档 match though the query's bridging bigram 索文 does not
        doc_lexemes = _lexemes(conn, [("simple", prepare_lexical_text(document, "zh"))])
        query_lexemes = _lexemes(conn, query_analyses("如何检索相关文档", "english"))
        assert {"检索", "相关", "文档"} <= doc_lexemes & query_lexemes


def test_german_stemming_matches_plural_to_singular_in_postgres(postgres) -> None:
    document = "Das Haus am See wird im Sommer vermietet."
    query = "Wo gibt es Häuser am See?"
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT to_tsvector('german', %s) @@ plainto_tsquery('german', 'Häuser'), "
            "to_tsvector('english', %s) @@ plainto_tsquery('english', 'Häuser')",
            (document, document),
        ).fetchone()
        assert row == (True, False)
        doc_lexemes = _lexemes(conn, [(regconfig_for(detect_language(document)), document)])
        assert "haus" in doc_lexemes & _lexemes(conn, query_analyses(query, "english"))
