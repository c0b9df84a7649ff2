"""Input guardrails: empty or over-long questions, control characters and prompt-injection patterns.

Every injection rule is one named pattern in `RULES` (English, German and French phrasings under the same name);
a question is refused when any fires, and the response lists which. The user turns of the chat history are
checked with the same rules, because an injection planted in an earlier turn reaches the model through the
history; a rule that fires there is reported as `history:<rule>`. Control characters (other than tab, line feed,
carriage return), NUL bytes and lone surrogates are refused anywhere (`control_characters`). Span `guardrail`
carries the rule names only, never the text.

Rephrasing does not get past the rules, because they read the text in several views (`views`): folded (NFKC,
case-folded, accents and zero-width characters dropped, look-alike Cyrillic and Greek letters mapped to Latin,
whitespace collapsed), leetspeak read as letters ("1gn0r3" → "ignore"), ROT13, squeezed to letters only
("i-g-n-o-r-e" → "ignore"), and base64 or hex runs decoded (`encoded:<rule>` when a rule fires only there).

Bounded by construction, because a request is untrusted text: every pattern runs on RE2 (linear time; a
backtracking `\\s+ … \\w+` over newline-heavy history cost 8.6-11 s a request), the question is read whole (it is
at most ANSWERER_MAX_QUESTION_CHARS) and of the history the first `MAX_EXAMINED_TURN_CHARS` of the latest
`MAX_EXAMINED_TURNS` turns (more than the prompt and the rewriter ever show the model),
and decoding is capped (`MAX_DECODED_RUNS` runs of at most `MAX_DECODED_CHARS`, one level deep). The work per
request is a few milliseconds, so it stays on the event loop.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import re2
from opentelemetry import trace

from ragmesh_common import attributes as attr

tracer = trace.get_tracer(__name__)

# What is examined of one text (the question, one history turn): the prompt shows the model 500 characters of a
# turn and the question is capped at ANSWERER_MAX_QUESTION_CHARS (2000 by default).
MAX_EXAMINED_CHARS = 4000
MAX_EXAMINED_TURN_CHARS = 2000  # of a history turn: the prompt and the rewriter show the model 500
MAX_EXAMINED_TURNS = 20  # the latest turns; the prompt shows 4, the rewriter 6
MAX_DECODED_RUNS = 8  # base64/hex runs decoded per text
MAX_DECODED_CHARS = 2000  # of each run

# English, folded (lower case, no accents). Qualifiers that may stand between the verb and its object.
_Q = (
    r"(?:previous|prior|above|earlier|preceding|foregoing|all|any|every|the|your|my|these|those|this|that|system"
    r"|initial|original|old|existing|current|given|hidden|secret|safety|developer|default|of|above-mentioned"
    r"|aforementioned|other|such|its|their|our)"
)
_OBJ = (
    r"(?:instructions?|prompts?|rules?|directions?|guidelines?|guidance|context|messages?|orders?|commands?|directives?"
    r"|programming|guardrails?|constraints?|restrictions?|policies|polic(?:y)|limitations?|safeguards?"
    r"|system\s+message|training|configuration)"
)
_ABOVE = (
    r"(?:(?:everything|all|anything|what(?:ever)?)(?:\s+(?:that|which|else|you(?:'ve|\s+have|\s+were|\s+was)?))?"
    r"(?:\s+(?:was|is|has\s+been|been|were|i|we))?(?:\s+(?:said|written|stated|given|told|typed|sent|shown|instructed))?"
    r"(?:\s+(?:to\s+you|you))?\s+(?:above|before|earlier|previously|prior|so\s+far|until\s+now|up\s+to\s+now)"
    r"|(?:the|all\s+(?:of\s+)?the)\s+(?:above|foregoing|preceding)(?:\s+(?:text|content|lines?|part|section))?"
    r"|what\s+(?:came|comes|was|is)\s+(?:before|above|earlier)|everything|all\s+(?:of\s+)?that"
    r"|what\s+you(?:'ve|\s+have|\s+were|\s+had\s+been)?\s+(?:been\s+)?(?:told|given|instructed|taught))"
)
_EN_VERB = (
    r"(?:ignore|ignoring|disregard|disregarding|forget|forgetting|override|overriding|bypass|bypassing|skip"
    r"|drop|discard|dismiss|abandon|neglect|overlook|nevermind|never\s+mind|scrap|ditch|circumvent|unlearn"
    r"|throw\s+(?:out|away)|set\s+aside|put\s+aside|pay\s+no\s+(?:attention|heed|mind)\s+to"
    r"|take\s+no\s+notice\s+of|stop\s+(?:following|obeying|applying|using)|cease\s+(?:following|obeying)"
    r"|(?:do\s+not|don't|dont|no\s+longer|never)\s+(?:follow|obey|heed|apply|respect|listen\s+to)"
    r"|let\s+go\s+of|get\s+rid\s+of|move\s+past|look\s+past)"
)
# a weaker verb (an ordinary IT question removes restrictions) counts only aimed at the assistant's own rules
_EN_WEAK = r"(?:remove|disable|lift|turn\s+off|deactivate|reset|clear|delete|erase|wipe|suspend|break|escape|unlock)"
_EN_OWN = (
    r"(?:your|the\s+assistant's|the\s+model's|the\s+ai's)\s+(?:\w+\s+){0,2}"
    r"(?:instructions|rules|guidelines|restrictions|filters|guardrails|safeguards|programming|limitations"
    r"|constraints|system\s+prompt|prompt|safety)"
)
# German, folded: ü → u (and the ue spelling); verbs, qualifiers, objects
_DE_VERB = (
    r"(?:ignorier(?:e|en|t)?|vergiss|vergessen|vergesst|missachte[nt]?|u(?:e)?bergehe[nt]?|verwirf|verwerfen"
    r"|setze?\s+(?:\w+\s+){0,3}ausser\s+kraft)"
)
_DE_NOT_VERB = r"(?:beachte|beachten|befolge|befolgen|folge|respektiere)"
_DE_Q = (
    r"(?:alle|alles|jegliche|samtliche|saemtliche|vorherigen?|vorigen?|bisherigen?|obigen?|fruheren?|frueheren?"
    r"|deine[nrs]?|ihre[nrs]?|die|der|den|das|diese[nrs]?|system|gegebenen|ursprunglichen|urspruenglichen"
    r"|anfanglichen|anfaenglichen|sie|bitte|einfach|jetzt|nun|mal)"
)
_DE_OBJ = (
    r"(?:anweisungen|anweisung|instruktionen|regeln|vorgaben|befehle|richtlinien|prompts?|systemprompt"
    r"|system-prompt|einschrankungen|einschraenkungen|beschrankungen|beschraenkungen|vorschriften|auftrage"
    r"|auftraege|oben\s+stehende|obige|vorherige|bisherige|gesagte)"
)
_DE_ABOVE = (
    r"(?:alles|das)\s+(?:oben|obige|bisherige|vorherige|davor|zuvor|vorher|bisher\s+gesagte|gesagte)"
    r"|(?:alles|das),?\s+was\s+(?:oben|vorher|davor|zuvor|bisher)\s+(?:steht|stand|gesagt\s+wurde|kam)"
)
# French, folded: é → e
_FR_VERB = (
    r"(?:ignore[rz]?|oublie[rz]?|neglige[rz]?|fai(?:s|tes)\s+abstraction\s+d[eu']s?|passe[rz]?\s+outre"
    r"|outrepasse[rz]?|contourne[rz]?|mets\s+de\s+cote|mettez\s+de\s+cote|laisse[rz]?\s+tomber|efface[rz]?"
    r"|ne\s+tien[st]?\s+(?:plus\s+|pas\s+)?compte\s+d[eu']s?|ne\s+tenez\s+(?:plus\s+|pas\s+)?compte\s+d[eu']s?"
    r"|ne\s+(?:suis|suivez|respecte|respectez|applique|appliquez|obeis|obeissez)\s+(?:plus|pas))"
)
_FR_Q = (
    r"(?:toutes|tous|les|tes|vos|ces|la|le|l'|precedentes?|anterieures?|initiales?|originales?|d'origine"
    r"|systeme|de|des|du|d'|donnees|recues)"
)
_FR_OBJ = r"(?:instructions?|consignes?|regles?|directives?|prompts?|ordres?|restrictions|limites|commandes)"
_FR_ABOVE = (
    r"(?:tout\s+)?ce\s+qui\s+(?:precede|est\s+(?:ecrit\s+)?(?:au-dessus|ci-dessus|plus\s+haut))"
    r"|le\s+texte\s+(?:ci-dessus|precedent)|tout\s+ce\s+qu[e']\s*(?:l'on|on)\s+t'a\s+dit"
)
# Spanish and Italian, the common override only
_ES_IT = (
    r"\b(?:ignora|ignore|olvida|olvidate\s+de|dimentica|ignorate|olvidad)\s+(?:(?:todas|todos|las|los|tus|sus|le"
    r"|tutte|tutti|gli|i|tue|anteriores|previas|precedenti|de|delle|di)\s+){1,4}"
    r"(?:instrucciones|reglas|indicaciones|istruzioni|regole|indicazioni)\b"
)
_REVEAL_EN = (
    r"\b(?:reveal|show|print|display|repeat|output|tell\s+me|what\s+(?:is|are|was|were)|leak|dump|share|give\s+me"
    r"|disclose|recite|write\s+out|list|copy|paste|spell\s+out|translate|summari[sz]e|expose)\b[^.?!\n]{0,60}"
    r"(?:\b(?:system|hidden|initial|original|secret|internal|developer|pre-?)\s*(?:prompt|instructions?|message"
    r"|rules|guidelines)|\byour\s+(?:\w+\s+)?(?:prompt|instructions)|\b(?:instructions|prompt)\s+(?:you\s+were|"
    r"you've\s+been|that\s+you\s+were)\s+given|\bwhat\s+you\s+were\s+told\b|\bthe\s+(?:text|words)\s+above\b)"
)
_REVEAL_DE = (
    r"\b(?:zeige?|nenne|verrate|enthulle|enthuelle|wiederhole|gib|drucke|schreibe?|teile|kopiere)\b[^.?!\n]{0,60}"
    r"(?:system-?\s?prompt|system-?\s?anweisungen?|systemnachricht|(?:versteckten?|geheimen?|ursprunglichen"
    r"|urspruenglichen|internen?)\s+(?:anweisungen|prompt|regeln)|deine[nr]?\s+(?:\w+\s+)?(?:anweisungen|prompt))"
)
_REVEAL_FR = (
    r"\b(?:revele|montre|affiche|donne|repete|devoile|imprime|ecris|recite|dis-moi|dis\s+moi|communique"
    r"|quel(?:le)?s?\s+(?:sont|est))[sz]?\b[^.?!\n]{0,60}"
    r"(?:\b(?:prompt|instructions?|consignes?|message)\s+(?:systeme|cachee?s?|initiale?s?|secrete?s?|d'origine)"
    r"|\b(?:tes|vos|ton|votre)\s+(?:\w+\s+)?(?:instructions|consignes|prompt))"
)


@dataclass(frozen=True)
class Rule:
    """A named pattern; `raw` rules read the text as sent (markup, case), the others its folded views. A match
    whose group `unless` took part does not count (RE2 has no look-behind: "j'ignore les règles" is "I do not
    know the rules")."""

    name: str
    pattern: str
    raw: bool = False
    compiled: re2._Regexp = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "compiled", re2.compile(self.pattern))

    def fires(self, text: str) -> bool:
        for match in self.compiled.finditer(text):
            if "unless" not in self.compiled.groupindex or match.group("unless") is None:
                return True
        return False


_TABLE: list[Rule] = [
    Rule(
        "ignore_instructions",
        rf"(?i)\b{_EN_VERB}\s+(?:{_Q}\s+){{0,4}}{_OBJ}\b|\b{_EN_VERB}\s+(?:{_ABOVE})"
        rf"|\b{_EN_WEAK}\s+(?:all\s+(?:of\s+)?)?{_EN_OWN}\b"
        rf"|\b{_DE_VERB}\s+(?:{_DE_Q}\s+){{0,4}}(?:{_DE_OBJ}|{_DE_ABOVE})\b"
        rf"|\b{_DE_NOT_VERB}\s+(?:{_DE_Q}\s+){{0,4}}{_DE_OBJ}\s+(?:\w+\s+){{0,2}}(?:nicht|nie|keinesfalls)\b"
        rf"|\bhalte?\s+dich\s+(?:\w+\s+){{0,2}}nicht\s+(?:mehr\s+)?an\s+(?:{_DE_Q}\s+){{0,4}}{_DE_OBJ}\b"
        rf"|(?P<unless>\bj'|\bje\s+)?\b{_FR_VERB}\s*(?:{_FR_Q}\s*){{1,4}}{_FR_OBJ}\b"
        rf"|\b{_FR_VERB}\s+(?:{_FR_ABOVE})|{_ES_IT}",
    ),
    Rule(
        "reveal_system_prompt",
        rf"(?i){_REVEAL_EN}|{_REVEAL_DE}|{_REVEAL_FR}",
    ),
    Rule(
        "role_override",
        r"(?i)\byou\s+are\s+now\b|\byou're\s+now\b|\bfrom\s+now\s+on,?\s+you\s+(?:are|will|must|shall|should|only)\b"
        r"|\bact\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|evil|jailbroken|rogue|different)"
        r"|\bpretend\s+(?:to\s+be|you\s+are|you're|that\s+you)\b|\brole-?\s?play\s+as\b"
        r"|\b(?:imagine|suppose)\s+you\s+(?:are|were)\s+(?:an?\s+)?(?:\w+\s+)?(?:ai|assistant|model|chatbot|bot)"
        r"\s+(?:without|with\s+no)\b"
        r"|\byou\s+(?:are|re)\s+(?:no\s+longer|not)\s+(?:bound|restricted|limited|constrained)\b"
        r"|\b(?:answer|respond|reply|act|behave|operate|speak|talk)\s+without\s+(?:any\s+)?(?:restrictions|filters"
        r"|rules|limits|limitations|censorship|guidelines|guardrails)\b"
        r"|\bdu\s+bist\s+(?:jetzt|nun|ab\s+(?:jetzt|sofort)|ab\s+heute)\b|\bab\s+(?:jetzt|sofort)\s+bist\s+du\b"
        r"|\btu\s+so,?\s+als\s+(?:ob\s+du|warst\s+du|waerst\s+du)\b|\bspiele?\s+die\s+rolle\b"
        r"|\bverhalte\s+dich\s+(?:ab\s+jetzt\s+)?wie\b"
        r"|\btu\s+es\s+(?:maintenant|desormais|dorenavant)\b|\bvous\s+etes\s+(?:maintenant|desormais)\b"
        r"|\bfai(?:s|tes)\s+comme\s+si\s+(?:tu\s+etais|vous\s+etiez)\b|\bjouez?\s+le\s+role\b"
        r"|\ba\s+partir\s+de\s+maintenant,?\s+(?:tu|vous)\b",
    ),
    Rule(
        "new_instructions",
        r"(?i)\b(?:your|the)\s+(?:new|real|actual|true|only)\s+(?:instructions?|task|job|role|goal|objective"
        r"|purpose|directive|orders?|mission)\s*(?:is|are|:|now)"
        r"|\bnew\s+(?:instructions?|rules|directives?|system\s+prompt|task)\s*:"
        r"|\b(?:ignore|disregard|forget|skip)\s+(?:the|this|my|that|any|their)\s+(?:user'?s?\s+)?(?:question|query)\b"
        r"|\b(?:reply|respond|say|output|print|write)\s+(?:with\s+)?[\"']?\w+[\"']?\s+only\b"
        r"|\binstead,?\s+(?:just\s+|only\s+)?(?:say|reply|respond|answer|output|print|write|type)\b"
        r"|\b(?:do\s+not|don't|dont|never)\s+(?:answer|respond\s+to|reply\s+to|address)\s+(?:the|my|this|that|any)"
        r"\s+(?:question|user|query)\b"
        r"|\b(?:reply|respond|answer|say|output|print)\s+(?:only|just|nothing\s+but|exclusively)\s+(?:with\s+)?"
        r"(?:the\s+word\s+)?[\"']?(?:pwned|hacked|owned|lol|yes\s+master|i\s+have\s+been)\b"
        r"|\bdeine\s+neue\s+(?:aufgabe|anweisung|rolle)\s+(?:ist|lautet)\b|\bneue\s+(?:anweisungen?|regeln)\s*:"
        r"|\bab\s+(?:jetzt|sofort)\s+(?:antwortest|sagst|schreibst|gibst)\s+du\b"
        r"|\b(?:ta|votre)\s+nouvelle\s+(?:tache|mission|consigne|instruction)\b"
        r"|\bnouvelles?\s+(?:instructions|consignes|regles)\s*:"
        r"|\bdesormais,?\s+(?:tu|vous)\s+(?:reponds|repondez|dois|devez|vas|allez|diras|direz)\b",
    ),
    Rule(
        "jailbreak",
        r"\bDAN\b|(?i:\bjail\s*-?\s*br(?:ea|oke)k(?:s|ing|ed|en)?\b|\bdo\s+anything\s+now\b|\bdeveloper\s+mode\b"
        r"|\bgod\s+mode\b|\bunfiltered\s+mode\b|\bno\s+restrictions\s+mode\b)",
        raw=True,
    ),
    Rule(
        "role_tags",
        r"(?im)<\|\s*(?:system|user|assistant|im_start|im_end|begin_of_text|start_header_id|end_header_id|eot_id)"
        r"\s*\|>|^\s*#{2,}\s*(?:system|assistant|instruction)s?\b|\[/?(?:INST|SYS)\]|<</?SYS>>",
        raw=True,
    ),
    Rule(
        "secret_exfiltration",
        r"(?i)\b(?:print|show|reveal|give|tell|list|dump|output|leak|send|expose|display)\b"
        r"(?P<between>(?:\s+\w+){0,4}?)\s+(?:the\s+|all\s+|your\s+|any\s+)?(?:secrets?|passwords?|api[\s_-]?keys?"
        r"|credentials?|access\s+tokens?|private\s+keys?|env(?:ironment)?\s+variables?)\b",
    ),
]
# Squeezed view (letters only): the core override without its spaces, for "i g n o r e" and "ig-nore".
_SQUEEZED = re2.compile(
    r"(?:ignore|disregard|forget|override|bypass)(?:all|any|the|your|my|previous|prior|above|earlier|preceding"
    r"|system|of|these|those|initial|original){1,4}(?:instructions?|prompts?|rules|directions|guidelines"
    r"|directives)|(?:ignore|disregard|forget)(?:everything|all)?(?:theabove|above|before)"
    r"|(?:ignoriere|vergiss)(?:alle|deine|die|vorherigen|obigen){1,3}(?:anweisungen|regeln)"
    r"|oublie(?:toutes|tes|les|vos|precedentes){1,3}(?:instructions|consignes|regles)"
)  # not "ignore les consignes" squeezed: "j'ignore les consignes" is "I do not know the rules"
# Verbs of asking about how to handle a secret are no exfiltration ("tell me how to reset my password").
_HOW_TO = frozenset({"how", "to", "reset", "change", "rotate", "update", "set", "create", "choose"})
RULES: dict[str, Rule] = {rule.name: rule for rule in _TABLE}
CONTROL_RULE = "control_characters"
HISTORY_PREFIX = "history:"
ENCODED_PREFIX = "encoded:"
# C0 and C1 controls except tab, LF, CR (Unicode category Cc), and surrogates (Cs): one character class, so the
# stdlib engine is linear here (and RE2 cannot read a str holding a lone surrogate).
_BAD_CHAR = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")

# Look-alike letters (Cyrillic, Greek) that NFKC keeps, to the Latin letters they pass for.
_CONFUSABLES = str.maketrans("аеорсухіјѕԁһкмтвнӏɡαεοριτυνκχϲ", "aeopcyxijsdhkmtbhlgaeopitvvkxc")
_LEET_I = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s",
                         "!": "i", "|": "i", "€": "e", "8": "b", "9": "g", "+": "t"})  # fmt: skip
_LEET_L = str.maketrans({"1": "l", "|": "l", "!": "l"})
_NOT_LETTERS = bytes(b for b in range(256) if not 97 <= b <= 122)  # deleted by bytes.translate: C speed
_BASE64_RUN = re2.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX_RUN = re2.compile(r"(?:[0-9A-Fa-f]{2}){12,}")


@dataclass(frozen=True)
class GuardrailResult:
    allowed: bool
    reason: str = ""
    rules: list[str] = field(default_factory=list)


def check_input(question: str, max_chars: int, history: Sequence[tuple[str, str]] = ()) -> GuardrailResult:
    """Checks a user question and the chat history before it; the reason is written for the user."""
    with tracer.start_as_current_span("guardrail") as span:
        result = _check(question, max_chars, history)
        span.set_attribute(attr.RAG_GUARDRAIL_ALLOWED, result.allowed)
        span.set_attribute(attr.RAG_GUARDRAIL_RULES, result.rules)
        return result


def bad_character(text: str) -> str | None:
    """A description of the first control character, NUL or lone surrogate in `text`, or None."""
    match = _BAD_CHAR.search(text)
    if match is None:
        return None
    ch, i = match.group(), match.start()
    kind = "a NUL byte" if ch == "\0" else "a lone surrogate" if 0xD800 <= ord(ch) <= 0xDFFF else "a control character"
    return f"{kind} (U+{ord(ch):04X}) at position {i}"


def fold(text: str) -> str:
    """Lower case, no accents or zero-width characters, Latin look-alikes as Latin, single spaces."""
    text = " ".join(text.split())  # first: a whitespace-heavy text shrinks before the per-character work
    if text.isascii():
        return " ".join(text.casefold().split())
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Mn", "Cf"))
    text = text.translate(_CONFUSABLES).replace("’", "'").replace("‘", "'").replace("ß", "ss")
    return " ".join(text.split())


def _decoded_runs(text: str) -> Iterator[str]:
    """Text hidden in base64 or hex runs of `text` (at most MAX_DECODED_RUNS runs, each cut to
    MAX_DECODED_CHARS), when it decodes to mostly printable UTF-8."""
    found = 0
    for pattern, decode in ((_BASE64_RUN, _from_base64), (_HEX_RUN, binascii.unhexlify)):
        for match in pattern.finditer(text):
            if found >= MAX_DECODED_RUNS:
                return
            run = match.group()[: MAX_DECODED_CHARS * 2]
            try:
                decoded = decode(run).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                continue
            if len(decoded) >= 8 and sum(ch.isprintable() or ch.isspace() for ch in decoded) >= 0.9 * len(decoded):
                found += 1
                yield decoded[:MAX_DECODED_CHARS]


def _from_base64(run: str) -> bytes:
    run = run.rstrip("=")
    padded = run + "=" * (-len(run) % 4)
    altchars = b"-_" if ("-" in run or "_" in run) else None
    return base64.b64decode(padded, altchars=altchars, validate=True)


def views(text: str) -> list[str]:
    """The folded readings of `text` the case-insensitive rules read (see the module docstring)."""
    folded = fold(text)
    readings = [folded]
    leet = folded.translate(_LEET_I)
    if leet != folded:
        readings.append(leet)
        readings.append(folded.translate(_LEET_L).translate(_LEET_I))
    readings.append(codecs.encode(folded, "rot13"))
    return readings


def injection_rules(text: str, limit: int = MAX_EXAMINED_CHARS) -> list[str]:
    """The rules that fire on `text` (at most `limit` characters of it), in any of its views."""
    text = text[:limit]
    fired = _fired(text)
    if not fired:
        fired = [ENCODED_PREFIX + name for run in _decoded_runs(text) for name in _fired(run)]
    return list(dict.fromkeys(fired))


def _fired(text: str) -> list[str]:
    readings = views(text)
    fired: list[str] = []
    for rule in _TABLE:
        texts = [text] if rule.raw else readings
        if rule.name == "secret_exfiltration":
            hit = any(_exfiltration(reading) for reading in texts)
        else:
            hit = any(rule.fires(reading) for reading in texts)
        if hit:
            fired.append(rule.name)
    if "ignore_instructions" not in fired and any(
        _SQUEEZED.search(reading.encode("ascii", "ignore").translate(None, _NOT_LETTERS)) for reading in readings
    ):
        fired.insert(0, "ignore_instructions")
    return fired


def _exfiltration(text: str) -> bool:
    """A request verb aimed at a secret, unless the words between say how to handle one."""
    compiled = RULES["secret_exfiltration"].compiled
    return any(not _HOW_TO & set(match.group("between").split()) for match in compiled.finditer(text))


def _check(question: str, max_chars: int, history: Sequence[tuple[str, str]]) -> GuardrailResult:
    malformed = check_form(question, max_chars, history)
    if malformed is not None:
        return malformed
    return _check_injection(question, history)


def check_form(question: str, max_chars: int, history: Sequence[tuple[str, str]] = ()) -> GuardrailResult | None:
    """The refusal of a malformed question or history (control characters, empty, too long), or None. Not the
    guardrail (no span, no injection rules): `Answer` checks this much, `CheckInput` runs the guardrail."""
    found = bad_character(question)
    if found:
        return GuardrailResult(False, f"the question contains {found}; remove it and ask again", [CONTROL_RULE])
    for i, (_, content) in enumerate(history):
        found = bad_character(content)
        if found:
            return GuardrailResult(
                False,
                f"turn {i + 1} of the chat history contains {found}; start a new chat",
                [HISTORY_PREFIX + CONTROL_RULE],
            )
    if not question or not question.strip():
        return GuardrailResult(False, "the question is empty", ["empty"])
    if len(question) > max_chars:
        return GuardrailResult(
            False, f"the question is {len(question)} characters long; the limit is {max_chars}", ["too_long"]
        )
    return None


def _check_injection(question: str, history: Sequence[tuple[str, str]]) -> GuardrailResult:
    # all of the question (check_form bounded its length first); of the history, the latest turns' beginnings
    fired = injection_rules(question, max(len(question), MAX_EXAMINED_CHARS))
    if fired:
        return GuardrailResult(
            False,
            "the question looks like an attempt to override the assistant's instructions or extract secrets "
            f"({', '.join(fired)}); please rephrase it as a question about your documents",
            fired,
        )
    first = max(0, len(history) - MAX_EXAMINED_TURNS)
    for i, (role, content) in enumerate(history[first:], start=first):
        fired = injection_rules(content, MAX_EXAMINED_TURN_CHARS) if role == "user" else []
        if fired:
            return GuardrailResult(
                False,
                f"turn {i + 1} of the chat history looks like an attempt to override the assistant's "
                f"instructions or extract secrets ({', '.join(fired)}); start a new chat",
                [HISTORY_PREFIX + name for name in fired],
            )
    return GuardrailResult(True)
