"""Language-aware lexical analysis for the PostgreSQL BM25 leg.

PostgreSQL analyses chunk text with `to_tsvector(<regconfig>, text)`: the snowball configurations stem
and drop stop words for one language each, and the default parser does not segment Chinese, Japanese or
Korean (a run of Han characters becomes one token). This module decides which configuration to use and
prepares the text so that `to_tsvector` produces useful lexemes:

- `detect_language`: Unicode script ranges for CJK, Hangul, Kana and other non-Latin scripts; for Latin and
  Cyrillic text, overlap with small built-in stop-word lists (the most frequent function words of each
  language), the classic cheap heuristic for language identification.
- `prepare_lexical_text`: CJK runs become overlapping character bigrams (Lucene's CJKAnalyzer /
  CJKBigramFilter scheme: "信息检索" → "信息 息检 检索", a lone character stays a unigram), separated by spaces
  so the parser sees each bigram as a token; other text is left as it is.
- `query_analyses`: the (regconfig, prepared text) pairs a query is analysed with; the caller unions the
  lexemes of `to_tsvector(cfg, text)` over the pairs.
"""
from __future__ import annotations

import re
import unicodedata

SIMPLE = "simple"
CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})

# ISO 639-1 → the PostgreSQL text search configuration shipped with PostgreSQL 18 (pg_ts_config).
REGCONFIGS: dict[str, str] = {
    "ar": "arabic", "ca": "catalan", "da": "danish", "de": "german", "el": "greek", "en": "english",
    "es": "spanish", "et": "estonian", "eu": "basque", "fi": "finnish", "fr": "french", "ga": "irish",
    "hi": "hindi", "hu": "hungarian", "hy": "armenian", "id": "indonesian", "it": "italian",
    "lt": "lithuanian", "ne": "nepali", "nl": "dutch", "no": "norwegian", "nb": "norwegian", "nn": "norwegian",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "sv": "swedish", "ta": "tamil",
    "tr": "turkish", "yi": "yiddish",
    "zh": SIMPLE, "ja": SIMPLE, "ko": SIMPLE,
}

# Small stop lists: frequent function words, chosen so that each language keeps a few words of its own
# (Scandinavian "af"/"av"/"å", Romance articles and contractions split at the apostrophe: "l'", "d'").
_STOPWORDS: dict[str, frozenset[str]] = {lang: frozenset(words.split()) for lang, words in {
    "en": "the and of to a in is it that for on with as was are be by this from or an not at have has but "
          "which they you we can what how do does there their will would should i my our if been were who "
          "when where why about into these those than then",
    "de": "der die das und ist nicht ein eine einen einem dem den des zu mit sich auf für von im auch es "
          "an als wie bei oder aus wird werden sind noch nach nur ich sie wir er kann hat haben über um "
          "aber wenn zum zur dass diese dieser dieses welche gibt wo",
    "fr": "le la les de des du un une et est en que qui dans pour pas sur au aux avec ce cette il elle "
          "nous vous ils sont par plus ne se ou mais comme être été à leur ses son sa je on y comment où "
          "l d qu j n s c lui",
    "es": "el la los las de del y en que un una es por con no para se lo al como más pero sus su le ya "
          "o este esta son también fue ha muy cómo qué dónde cuando hay entre sin sobre todos puede",
    "it": "il lo la i gli le di del della dei delle e è che un una uno in per con non si da al alla come "
          "ma sono anche più questo questa nel nella ci l o ha hanno essere dove quando perché cosa",
    "pt": "o a os as de do da dos das e é que um uma em no na nos nas para com não por se ao como mas "
          "mais foi são também seu sua ou ser está isso este esta pelo pela muito quando onde",
    "nl": "de het een en van in is dat op te zijn voor met niet die aan er maar om ook als bij dan of "
          "wat worden wordt deze naar door hoe kan nog uit over wij ik je hij zij",
    "sv": "och i att är som på det en för med av inte jag har de ett om var så men från vi kan eller "
          "hur när också bara sig mycket efter vid under vad detta ska blir vara",
    "no": "og i er som på det en til for med av ikke jeg har de et om var men fra vi kan eller hvordan "
          "når også bare seg mye etter ved under hva dette skal blir være ble å",
    "da": "og i at er som på det en til for med af ikke jeg har de et om var men fra vi kan eller "
          "hvordan når også bare sig meget efter ved under hvad dette skal bliver være blev",
    "fi": "ja on ei se että oli ovat mutta kun tai myös joka hän ole olla kuin niin nyt jos sekä tämä "
          "siitä mitä voi vain ne me te he minä sinä jo sen kanssa",
    "hu": "a az és hogy nem is egy meg el ez de van csak már mint vagy még ki be volt kell lesz fel után "
          "között nagyon minden hanem mert pedig amely ami azt ezt",
    "ro": "și în de la cu nu pe care este un o din pentru se mai sunt ca că sau dar fost acest această "
          "ce au fi prin când despre după cum foarte",
    "tr": "ve bir bu da de için ile çok ne mi ama gibi daha olarak kadar sonra her şey o en var yok ben "
          "sen biz nasıl neden değil",
    "ca": "i el la els les de del que per amb un una és en no als dels però com més aquest aquesta "
          "també hi ho seu seva són ha han molt quan",
    "id": "dan yang di ke dari ini itu untuk dengan tidak ada adalah dalam akan pada juga atau saya kami "
          "mereka oleh sebagai bisa karena telah sudah lebih bagaimana apa",
    "ru": "и в не на что с по как это а к из у за от о для то так же но мы вы он она они я был была "
          "были быть есть все при или если уже только еще ещё бы до чтобы какой где когда почему",
    "sr": "и у је да се на за са не од су то као из што али или био била који која које ће ли по до",
    "hi": "है के में की और को से का हैं पर यह एक कि भी नहीं था थे लिए",
    "ne": "छ र को मा पनि हो गर्न भएको गरेको यो त्यो लागि थियो छन्",
}.items()}

# Letters only one of the candidate languages uses, as a tie-breaker between languages with equal
# stop-word hits ("ß" German, "ñ" Spanish, ...); a word carrying one counts half a stop-word hit.
_SIGNATURE_CHARS: dict[str, str] = {
    "de": "ß", "es": "ñ¿¡", "pt": "ãõ", "ro": "ășțşţ", "tr": "ğış", "hu": "őű", "da": "æø", "no": "æø",
    "sv": "å", "fr": "œêèù", "ca": "ŀ",
}

_LATIN_LANGS = ("en", "de", "fr", "es", "it", "pt", "nl", "sv", "no", "da", "fi", "hu", "ro", "tr", "ca", "id")
_CYRILLIC_LANGS = ("ru", "sr")
_DEVANAGARI_LANGS = ("hi", "ne")

# Han (CJK Unified Ideographs + Extension A + compatibility + extensions B..), 々 and 〇.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005\u3007\U00020000-\U0002fa1f"
_KANA = "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\ud7b0-\ud7ff"
_CJK_RUN = re.compile(f"[{_HAN}{_KANA}{_HANGUL}]+")
# CJK symbols and punctuation (、。「」…), minus 々 and 〇 which are letters; they separate runs.
_CJK_PUNCT = re.compile("[\u3000-\u3004\u3006\u3008-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]")
_HAN_CHAR = re.compile(f"[{_HAN}]")
_KANA_CHAR = re.compile(f"[{_KANA}]")
_HANGUL_CHAR = re.compile(f"[{_HANGUL}]")
_HANGUL_WORD = re.compile(f"[{_HANGUL}]+")
_WORD = re.compile(r"[^\W\d_]+")

# Other scripts with exactly one configuration (Hebrew is left to "simple": Yiddish is the only
# Hebrew-script configuration and would mis-stem Hebrew).
_SCRIPT_LANGS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("el", re.compile("[\u0370-\u03ff\u1f00-\u1fff]")),
    ("ar", re.compile("[\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff]")),
    ("hy", re.compile("[\u0530-\u058f]")),
    ("ta", re.compile("[\u0b80-\u0bff]")),
)
_CYRILLIC = re.compile("[\u0400-\u04ff]")
_DEVANAGARI = re.compile("[\u0900-\u097f]")
_LATIN = re.compile("[A-Za-z\u00c0-\u024f\u1e00-\u1eff]")

# An average Chinese/Japanese word is about 1.5 characters, so a run of n Han/Kana characters weighs
# n / 1.5 words against the space-separated words around it.
_CHARS_PER_CJK_WORD = 1.5
MIN_WORDS = 3
_MIN_STOPWORD_RATIO = 0.1


def _cjk_language(han: int, kana: int, hangul: int) -> str:
    if hangul >= han + kana:
        return "ko"
    # Japanese prose always carries kana; Chinese never does.
    return "ja" if kana > 0 else "zh"


def detect_language(text: str, default: str = SIMPLE) -> str:
    """The ISO 639-1 code of `text`'s language, `default` when unknown or too short to tell.

    CJK, Hangul, Kana, Greek, Arabic, Armenian and Tamil are decided by script alone (any length).
    Latin, Cyrillic and Devanagari text with at least `MIN_WORDS` words goes to the language whose stop
    list covers the largest share of its words (at least 10%); otherwise `default`.
    """
    han = len(_HAN_CHAR.findall(text))
    kana = len(_KANA_CHAR.findall(text))
    hangul_words = len(_HANGUL_WORD.findall(text))
    words = [w.lower().replace("ş", "ș").replace("ţ", "ț") for w in _WORD.findall(_CJK_RUN.sub(" ", text))]
    cjk_units = (han + kana) / _CHARS_PER_CJK_WORD + hangul_words
    if cjk_units > 0 and cjk_units >= len(words):
        return _cjk_language(han, kana, len(_HANGUL_CHAR.findall(text)))
    letters = "".join(words)
    if not letters:
        return default
    scripts = {
        "latin": len(_LATIN.findall(letters)),
        "cyrillic": len(_CYRILLIC.findall(letters)),
        "devanagari": len(_DEVANAGARI.findall(letters)),
    }
    for lang, pattern in _SCRIPT_LANGS:
        scripts[lang] = len(pattern.findall(letters))
    script = max(scripts, key=lambda s: scripts[s])
    if scripts[script] == 0:
        return default
    if script not in ("latin", "cyrillic", "devanagari"):
        return script
    if len(words) + cjk_units < MIN_WORDS:
        return default
    candidates = {"latin": _LATIN_LANGS, "cyrillic": _CYRILLIC_LANGS, "devanagari": _DEVANAGARI_LANGS}[script]
    best, best_score = default, 0.0
    for lang in candidates:
        stop = _STOPWORDS[lang]
        signature = _SIGNATURE_CHARS.get(lang, "")
        hits = sum(1 for w in words if w in stop)
        bonus = 0.5 * sum(1 for w in words if signature and any(ch in signature for ch in w))
        score = hits + bonus
        if hits and score > best_score:  # strict: ties keep the earlier (more common) language
            best, best_score = lang, score
    if best_score / len(words) < _MIN_STOPWORD_RATIO:
        return default
    return best


def regconfig_for(lang: str) -> str:
    """The PostgreSQL text search configuration for an ISO 639-1 code ("en", "en-US", or a config name).

    CJK languages and unknown codes map to "simple" (lower-casing, no stemming, no stop words).
    """
    code = lang.strip().lower().replace("_", "-")
    if code in REGCONFIGS.values():
        return code
    return REGCONFIGS.get(code.split("-", 1)[0], SIMPLE)


def cjk_bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of a CJK run; a single character is kept as a unigram."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i:i + 2] for i in range(len(run) - 1)]


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


def prepare_lexical_text(text: str, lang: str) -> str:
    """Text for `to_tsvector(regconfig_for(lang), ...)`: CJK runs as space-separated bigrams.

    For a CJK language the text is NFKC-normalised first (full-width Latin letters and digits become
    ASCII, half-width katakana full-width), and CJK punctuation becomes spaces. Latin words are kept as
    they are. Text of other languages is returned unchanged unless it contains CJK runs, which are
    bigrammed too, so a Chinese term quoted in an English document still matches a Chinese query.
    """
    if lang in CJK_LANGUAGES:
        text = unicodedata.normalize("NFKC", text)
    elif not has_cjk(text):
        return text
    text = _CJK_PUNCT.sub(" ", text)
    out = _CJK_RUN.sub(lambda m: " " + " ".join(cjk_bigrams(m.group(0))) + " ", text)
    return re.sub(r"[ \t]{2,}", " ", out).strip()


def query_analyses(query: str, corpus_langs: list[str], language: str | None = None) -> list[tuple[str, str]]:
    """(regconfig, prepared text) pairs to analyse `query` with; the caller unions the lexemes.

    In order, deduplicated: the query's language (`language` when given, else detected, "simple" when
    unknown), each corpus language (a short query cannot be detected, and the corpus stems its documents
    with these), and, when the query contains CJK characters, ("simple", CJK bigram form).
    """
    lang = language or detect_language(query)
    pairs: list[tuple[str, str]] = []

    def add(cfg: str, text: str) -> None:
        if text.strip() and (cfg, text) not in pairs:
            pairs.append((cfg, text))

    add(regconfig_for(lang), prepare_lexical_text(query, lang))
    for corpus_lang in corpus_langs:
        add(regconfig_for(corpus_lang), prepare_lexical_text(query, corpus_lang))
    if has_cjk(query):
        add(SIMPLE, prepare_lexical_text(query, "zh"))
    return pairs
