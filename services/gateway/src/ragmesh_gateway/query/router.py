"""Question routing by rules: kind, entities, multi-hop, search strategy and per-entity sub-queries.

`route(question)` is pure and cheap (regexes over at most 2,000 characters, no model), so the gateway can
call it on every request. Each rule that fires is named in `Route.reasons` for tracing.

Kind priority when several kinds match (first wins), from the answer's shape down to a mere time filter:
comparative > aggregative > relational > procedural > temporal > factual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import re2

from ragmesh_common.text.entities import MAX_CHARS, extract_entities, is_name
from ragmesh_common.text.stopwords import ENGLISH
from ragmesh_common.text.words import WH_WORDS

KINDS = ("factual", "comparative", "procedural", "relational", "aggregative", "temporal")
PRIORITY = ("comparative", "aggregative", "relational", "procedural", "temporal")


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_COMPARATIVES = (
    "more|less|fewer|greater|bigger|larger|smaller|higher|lower|older|younger|faster|slower|cheaper|"
    "better|worse|longer|shorter|earlier|later|newer|taller|heavier|lighter|safer|stronger|weaker"
)
KIND_RULES: dict[str, list[tuple[str, re.Pattern[str]]]] = {
    "comparative": [
        ("compare", _rx(r"\bcompar(e|es|ed|ing|ison)\b")),
        ("versus", _rx(r"\b(versus|vs\.?)(?=\s|$)")),
        ("difference", _rx(r"\bdiffer(ence|ences|s|ent)? (between|from)\b|\bhow (is|are|does|do) .+ differ\b")),
        ("comparative than", _rx(rf"\b({_COMPARATIVES}|more \w+|less \w+) than\b")),
        ("both", _rx(r"\bboth\b")),
        (
            "in common",
            _rx(
                r"\bin common\b|\bthe same (\w+ )?as\b|\bthe same (state|country|city|band|province|"
                r"genre|team|year|company|nationality|profession|university)\b|"
                r"\bsimilar(ities)? (to|between)\b"
            ),
        ),
        (
            "which of two",
            _rx(
                r"^(which|who|what)\b.*\b(first|older|oldest|younger|youngest|larger|largest|smaller|"
                r"smallest|more|most|less|fewest|higher|highest|earlier|earliest|later|longer|better)\b"
                r".*,?\s.+\bor\b.+\??$"
            ),
        ),
    ],
    "aggregative": [
        ("how many", _rx(r"\bhow many\b")),
        ("list all", _rx(r"\b(list|name|enumerate)( all| every| each)?( of)? (the )?\w+s\b|\blist (all|every)\b")),
        ("all the", _rx(r"\ball (of )?the\b")),
        ("count", _rx(r"\b(count|number of|total|totals|in total|altogether)\b")),
        (
            "summarize",
            _rx(
                r"\bsummar(y|ize|ise|ies|izing)\b|\boverview\b|\bmain (points|findings|topics|ideas)\b|"
                r"\bkey (points|takeaways|findings)\b|\bgist\b|\btl;?dr\b"
            ),
        ),
        ("every", _rx(r"\b(every|each)\b")),
    ],
    "relational": [
        ("relationship", _rx(r"\brelation(ship)?s? (between|to|with|of)\b|\brelated to\b|\brelate[sd]? to\b")),
        ("connected", _rx(r"\bconnect(ed|ion|ions)?\b|\blink(s|ed)? (between|to|with)\b|\blinks?\b.*\bbetween\b")),
        (
            "works with",
            _rx(
                r"\bwho (works|worked|collaborates|collaborated|reports|reported) (with|to|for)\b|"
                r"\bwork(s|ed)? (together|with)\b"
            ),
        ),
        (
            "part of",
            _rx(
                r"\b(is|are|was|were)\s+(?:[\w-]+\s+){0,4}?(a\s+)?part of\b|\bbelongs? to\b|"
                r"\baffiliated with\b|\bsubsidiar(y|ies) of\b"
            ),
        ),
    ],
    "procedural": [
        ("how to", _rx(r"\bhow (do|does|can|should|would|could) (i|we|you|one|a user|users|someone)\b|\bhow to\b")),
        ("steps", _rx(r"\bsteps?\b|\bprocedure\b|\bprocess (for|to|of)\b|\bstep-by-step\b|\binstructions?\b")),
        (
            "setup",
            _rx(
                r"\b(configure|configuring|configuration|install|installing|installation|set up|setup|"
                r"deploy|upgrade|troubleshoot|enable|disable|reset)\b"
            ),
        ),
    ],
    "temporal": [
        ("when", _rx(r"^\s*when\b|[,;]\s*when\b|\bwhen (did|was|were|is|are|does|do|will|has|had|can)\b")),
        ("what year", _rx(r"\b(what|which|in what|in which) (year|date|day|month|century|decade|time|era|period)\b")),
        ("date", _rx(r"\bdates?\b|\btimeline\b|\bhistory of\b|\bchronolog")),
        ("before/after", _rx(r"\b(before|after|since|until|till|prior to)\b")),
        ("recent", _rx(r"\b(latest|most recent|recently|recent|newest|current|currently|nowadays)\b")),
    ],
}

# --- multi-hop cues -------------------------------------------------------------------------------------------
_REL = r"(?-i:that|who|whom|which|whose|where)"  # lower case only: "the Doctor Who episodes" is no clause
# The described noun: a lower-case word that is not a preposition or a verb form ("the team in which")
_NOUN = (
    r"(?!(?:in|on|at|of|for|from|to|by|with|into|through|under|over|about|is|are|was|were|be|been|has|have|"
    r"had|and|or)\b)[a-z][\w-]*"
)
# A described noun: "the film that was shot", "a German musician whose godfather", "the city where X was born".
_DESCRIBED = _rx(rf"\b(the|a|an|one of the)\s+(?:[\w'-]+\s+){{0,4}}?{_NOUN}\s+{_REL}\s+\w+")
# A relative clause behind a preposition, mid-question: "the project in which X took part".
_PREP_REL = re.compile(
    r"(?<=\w\s)(in|for|of|on|at|by|with|from|to|under|during|through)\s+(which|whom|whose)\s+"
    r"(?:[\w'-]+\s+){2,}"
)
# Reduced relative on an indefinite/definite noun: "a tool developed by", "a man born in".
_PARTICIPLE = _rx(
    r"\b(the|a|an|this|that|^(?:what|which)(?!\s+(?:is|are|was|were|has|have|had|did|do|does)\b))"
    r"\s+(?:[\w'-]+\s+){0,4}?(?!(?:is|are|was|were|be|been|being|has|have|had)\b)[a-z][\w-]*\s+"
    r"(?:[a-z]+ly\s+)?(?-i:developed|founded|directed|written|produced|created|based|known|born|"
    r"located|released|published|owned|featuring|starring|headquartered|designed|named|formed|"
    r"composed|hosted|sponsored|performed|recorded|made|built|used|shot|featured|starred|associated)"
    r"\s+(by|in|for|as|on|with|from|at)\b"
)
# A role/attribute of a described entity: "the director of the film", "the founder of Acme Corp".
_ROLE = _rx(
    r"\b(the|a|an)\s+(?:[\w'-]+\s+){0,2}?(director|author|writer|founder|founders|father|mother|wife|husband|"
    r"son|daughter|brother|sister|creator|owner|producer|composer|singer|player|members?|president|"
    r"ceo|chairman|capital|headquarters|population|star|stars|host|coach|publisher|manufacturer|"
    r"parent|successor|predecessor|leader|editor|designer|developer|inventor|spouse|child|children|"
    r"birthplace|hometown|label|receiver|winner|runner-up|subject|basis|soundtrack|mayor|voice)"
    r"(?:\s+and\s+(?:[\w-]+\s+){0,2}?[\w-]+)?\s+"
    r"(of|to|from|behind|for)\s+"
    # …of a description ("of the film that…"), or of a name that an appositive describes further.
    r"(?:(?:the|a|an|one of the|his|her|their)\s+(?-i:[a-z0-9])|(?-i:[A-Z\"“])[^,?]*,)"
)
_POSSESSIVE_CHAIN = re.compile(r"\b\w+['’]s\s+(?:\w+\s+){0,2}?\w+['’]s\s+\w")
# RE2 (linear time): on the backtracking engine these two were quadratic in the question's length
_WHICH_OF_THAT = re2.compile(r"(?i)\b(which|what)\b.+\bof the\b.+\b(?-i:that|who|which|where)\b")
_IN_SITU_WH = re2.compile(r"(?i)\s(?-i:what|which|who|whom|when|where|how many|how much)\b[^,]*\?\s*$")
_LEADING_WH = _rx(
    r"^\s*(what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could|"
    r"should|would|will|has|have|had|name|list|tell|give|describe|explain|in|on|at|for|from|to|by|"
    r"during|of|with|after|before|since|under|about|besides|between|if)\b"
)
_APPOSITIVE = _rx(
    r",\s*(?-i:who|whom|which|whose|that)\b|,\s*(?-i:known|born|based|released|located|founded|"
    r"directed|written|produced|created|published|formed|named|famous|best known)\s+"
    r"(for|in|as|by|on|from)\b|,\s*(a|an|the)\s+[\w'-]+(\s+[\w'-]+){0,5},"
)
_BOTH_AND = _rx(
    r"\bboth\b.+\band\b|\band\b.+\bboth\b|\brespective\b|\bwhich of the (two|2)\b|"
    r"\beach other\b"
)
# Sentence ends, not initials, titles or "v." ("Mary J. Smith", "Smith v. Jones", "Dr. Lee").
_SENTENCES = re.compile(
    r"(?<!\b[A-Za-z])(?<!\bSt)(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bDr)(?<!\bRev)(?<!\bJr)(?<!\bSr)"
    r"(?<!\bMt)(?<!\bNo)(?<!\bvs)(?<!\bCo)(?<!\bInc)(?<!\bLtd)(?<!\bProf)[.!?]\s+(?=[A-Z\"“])"
)
# The asked-for thing hangs off an unnamed entity: "the first product of a company from what country?"
_INDEFINITE_WH = _rx(
    r"\b(a|an)\s+(?:[\w'-]+\s+){0,3}?[\w'-]+\s+(from|by|of|in|at|for|on|with)\s+"
    r"(?-i:what|which)\s+(?:[\w'-]+\s+){0,2}[\w'-]+\s*\?\s*$"
)
# An event anchored on another entity: "during the reign of the King of Spain".
_ANCHOR = _rx(
    r"\b(during|after|before|since|at the time of|following)\s+the\s+(?:[\w-]+\s+){0,2}?[\w-]+\s+of\s+"
    r"(the\s+)?[A-Z\"“]"
)
# Questions opening with a subordinate clause: "When X left, who replaced him?" (the comma is no apposition).
_INTRO = _rx(
    r"^(when|if|in|on|at|after|before|since|although|while|during|as|once|until|because|according|given|"
    r"besides|other than|along with|apart from)\b[^,]*,\s*(?-i:who|whom|which|whose|what|where|when|how)\b"
)
_MAIN_VERB_AUX = _rx(r"^\s*(?:[\w'-]+\s+){1,2}(is|are|was|were|has|have|had|been)\s*$")

# Words left out of a sub-query: stop words and the vocabulary of comparing.
_STOP = ENGLISH | frozenset(
    [
        "one",
        "two",
        "first",
        "compare",
        "versus",
        "vs",
        "difference",
        "differ",
        "similar",
        "common",
        "respective",
        "respectively",
        "rather",
    ]
)
_TIME_CUES = _rx(
    r"\b(when|what year|which year|first|earlier|earliest|older|oldest|younger|youngest|founded|formed|"
    r"born|established|released|published)\b"
)
_DOCUMENT = _rx(
    r"\b(document|report|policy|policies|handbook|manual|guide|guideline|guidelines|contract|paper|"
    r"whitepaper|spec|specification|presentation|deck|memo|agreement|playbook|standard|plan|faq)\b"
)
_WHOLE = _rx(
    r"\b(summar\w*|overview|gist|main (points|ideas|topics|findings)|key (points|takeaways|findings)|"
    r"whole|entire|in general|tl;?dr)\b|"
    r"\bwhat (is|are|does|do) (the|this|our|that) [^?]{0,60}\b(about|say|cover|contain|include)\s*\??\s*$"
)


# A question about a whole collection (GraphRAG's global questions): its themes, or what it says about a topic
# as a whole, rather than one fact. Phrasings only; never a topic word. RE2: linear in the question's length.
_COLLECTION = re2.compile(
    r"(?i)\b(main|key|major|common|recurring|overall|central|top)\s+(themes?|topics?|ideas?|issues?|subjects?|"
    r"trends?|points?)\b|"
    r"\bthemes?\b.*\b(in|across|of)\s+(my|our|the|these|all)\s+(documents?|files?|collection|corpus|data)\b|"
    r"\bsummari[sz]e\s+(what|everything|all)\s+(we|i|you|the documents?|my documents?)\b|"
    r"\bwhat\s+(do|does)\s+(we|i)\s+know\s+about\b|"
    r"\b(overview|summary)\s+of\s+(what|everything|all)\b|"
    r"\b(summari[sz]e|overview of|summary of)\s+(the|my|our|these|all)\s+(documents?|files?|collection|corpus)\b|"
    r"\bwhat\s+do\s+(my|our|the|these|all)\s+(documents?|files?|sources)\s+say\s+about\b|"
    r"\b(across|throughout)\s+(my|our|the|all)\s+(documents?|files?|collection|corpus)\b"
)


def is_collection_question(question: str) -> bool:
    """A question about a whole collection or a topic across it, answered from community reports."""
    return bool(_COLLECTION.search(" ".join(question[:MAX_CHARS].split())))


@dataclass(frozen=True)
class Route:
    """How to answer one question; consumed by the orchestrator."""

    kind: str
    entities: list[str] = field(default_factory=list)
    multi_hop: bool = False
    strategy: str = "direct"  # "direct" | "summary_first"
    levels: list[str] = field(default_factory=lambda: ["paragraph"])
    use_graph: bool = False
    sub_queries: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    collection: bool = False  # about the whole collection: answered from community reports (pipeline/communities)


def classify(question: str) -> tuple[str, list[str]]:
    """The question kind and the names of the rules that matched (all kinds, for tracing)."""
    matched: dict[str, list[str]] = {}
    for kind, rules in KIND_RULES.items():
        for name, pattern in rules:
            if pattern.search(question):
                matched.setdefault(kind, []).append(name)
    for kind in PRIORITY:
        if kind in matched:
            return kind, [f"{k}:{name}" for k, names in matched.items() for name in names]
    return "factual", []


def _two_sided(question: str, names: list[str]) -> bool:
    """`…, X or Y?`: a name just before "or" and another one after it, ending the question."""
    at = question.rfind(" or ")
    if at < 0 or len(names) < 2:
        return False
    left, right = question[:at].rstrip(" ,"), question[at + 4 :]
    return any(left.endswith(n) for n in names) and any(n in right for n in names)


def _reduced_relative(question: str) -> bool:
    # "What was the hymn based on?": the participle is the main verb, not a clause about the noun.
    return any(not _MAIN_VERB_AUX.match(question[: m.start()]) for m in _PARTICIPLE.finditer(question))


def multi_hop_cues(question: str, kind: str, names: list[str]) -> list[str]:
    """Names of the multi-hop cues found in `question` (empty: looks single-hop)."""
    q = " ".join(question.split())
    cues: list[str] = []
    if kind == "comparative" and (len(names) >= 2 or _two_sided(q, names)):
        cues.append("comparison of entities")
    elif _two_sided(q, names) and re.match(r"^which\b", q, re.IGNORECASE):
        cues.append("choice between entities")
    if _BOTH_AND.search(q) and (names or "which of the" in q.lower()) and "comparison of entities" not in cues:
        cues.append("both/respective")
    if kind == "relational" and len(names) >= 2:
        cues.append("relation between entities")
    if _DESCRIBED.search(q) or _PREP_REL.search(q):
        cues.append("relative clause")
    if _reduced_relative(q):
        cues.append("reduced relative clause")
    if _ROLE.search(q):
        cues.append("role of described entity")
    if len(re.findall(r"\w['’]s\b", q)) >= 2 and _POSSESSIVE_CHAIN.search(q):
        cues.append("possessive chain")
    if _WHICH_OF_THAT.search(q):
        cues.append("which … of the … that")
    if _APPOSITIVE.search(q) and not _INTRO.match(q):
        cues.append("appositive description")
    if _INDEFINITE_WH.search(q):
        cues.append("described entity asked about")
    if _ANCHOR.search(q):
        cues.append("event anchored on entity")
    if len(_SENTENCES.split(q)) >= 2 and q.rstrip().endswith("?"):
        cues.append("context sentence before question")
    weak = not _LEADING_WH.match(q) and _IN_SITU_WH.search(q) and len(names) >= 1
    if weak:
        # A statement ending in "... what X?" is common in single-hop questions too: it needs a second cue.
        cues.append("statement with trailing question")
        if len(cues) == 1:
            return []
    return cues


def _attribute_terms(question: str, entities: list[str], kind: str) -> str:
    rest = question
    for entity in sorted(entities, key=len, reverse=True):
        # whole words only: the name "War" leaves "awarded" as it is
        rest = re.sub(r"(?<!\w)" + re.escape(entity) + r"(['’]s?)?(?!\w)", " ", rest, flags=re.IGNORECASE)
    words = [w for w in re.findall(r"[A-Za-z][\w-]*", rest) if w.lower() not in _STOP and w.lower() not in WH_WORDS]
    words = [
        w
        for w in words
        if not re.fullmatch(
            _COMPARATIVES + r"|oldest|youngest|largest|smallest|first|"
            r"earliest|latest|highest|lowest|best|worst",
            w,
            re.IGNORECASE,
        )
    ]
    terms = " ".join(dict.fromkeys(w.lower() for w in words))
    if _TIME_CUES.search(question) and not re.search(r"\b(year|date)\b", terms):
        terms = f"{terms} year".strip()
    return " ".join(terms.split()[:8])


def sub_queries_for(question: str, entities: list[str], kind: str) -> list[str]:
    """One focused query per named entity: "<entity> <what is asked about it>"."""
    names = [e for e in entities if is_name(e)]
    if len(names) < 2:
        return []
    terms = _attribute_terms(question, entities, kind)
    return [f"{name} {terms}".strip() for name in names[:4]]


def route(question: str) -> Route:
    """Route one question. Never raises; an empty or odd question routes as a plain factual lookup."""
    if not isinstance(question, str) or not question.strip():
        return Route(kind="factual", reasons=["empty question"])
    q = " ".join(question[:MAX_CHARS].split())
    kind, reasons = classify(q)
    entities = extract_entities(q)
    names = [e for e in entities if is_name(e)]
    cues = multi_hop_cues(q, kind, names)
    multi_hop = bool(cues)
    reasons += [f"multi_hop:{c}" for c in cues]
    whole_document = bool(_DOCUMENT.search(q) and _WHOLE.search(q))
    summary_first = (kind == "aggregative" and bool(_WHOLE.search(q))) or whole_document
    if summary_first:
        reasons.append("strategy:summary_first" + (" (whole document)" if whole_document else ""))
    levels = ["document", "section"] if summary_first or kind == "aggregative" else ["paragraph"]
    use_graph = kind == "relational" or multi_hop
    subs = sub_queries_for(q, entities, kind) if kind == "comparative" or multi_hop else []
    collection = is_collection_question(q)
    if collection:
        reasons.append("collection")
    return Route(
        collection=collection,
        kind=kind,
        entities=entities,
        multi_hop=multi_hop,
        strategy="summary_first" if summary_first else "direct",
        levels=levels,
        use_graph=use_graph,
        sub_queries=subs,
        reasons=reasons,
    )
