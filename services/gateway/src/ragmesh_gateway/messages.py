"""The one catalogue of the messages a user reads, in English, German and French, and the choice of language.

The language of a message is the question's own when it is clearly written in one of the catalogue's languages
(counted by its most frequent function words: a short or mixed question is not guessed at), else the first
language of the request's `Accept-Language` the catalogue has, else English. `RequestLanguageMiddleware` keeps
the request's Accept-Language for the steps and handlers that phrase a message.

Keys: the outcomes that are not an answer (no_permission, no_sources, no_match_in_filter, ingesting), withheld
(the answerer could not verify an answer), guardrail_refused, and the validation errors' summary.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

LANGUAGES = ("en", "de", "fr")
DEFAULT = "en"

CATALOGUE: dict[str, dict[str, str]] = {
    "no_permission": {
        "en": "You do not have access to any documents yet, so I cannot answer from company knowledge. "
        "Upload a document or ask an administrator for access.",
        "de": "Sie haben noch keinen Zugriff auf Dokumente, daher kann ich nicht aus dem Unternehmenswissen "
        "antworten. Laden Sie ein Dokument hoch oder bitten Sie einen Administrator um Zugriff.",
        "fr": "Vous n'avez encore accès à aucun document, je ne peux donc pas répondre à partir des connaissances "
        "de l'entreprise. Téléversez un document ou demandez un accès à un administrateur.",
    },
    "no_sources": {
        "en": "I could not find anything relevant to your question in the documents you can access, "
        "so I will not guess. Try rephrasing or naming the document.",
        "de": "In den Dokumenten, auf die Sie zugreifen können, habe ich nichts Passendes zu Ihrer Frage gefunden, "
        "deshalb rate ich nicht. Formulieren Sie die Frage um oder nennen Sie das Dokument.",
        "fr": "Je n'ai rien trouvé de pertinent pour votre question dans les documents auxquels vous avez accès, "
        "je ne vais donc pas deviner. Reformulez la question ou nommez le document.",
    },
    "no_match_in_filter": {
        "en": "None of the documents you selected is one you can read, so there is nothing to search. "
        "Check the selection, or ask without choosing documents to search all of yours.",
        "de": "Keines der ausgewählten Dokumente dürfen Sie lesen, daher gibt es nichts zu durchsuchen. "
        "Prüfen Sie die Auswahl oder fragen Sie ohne Auswahl, um alle Ihre Dokumente zu durchsuchen.",
        "fr": "Aucun des documents sélectionnés ne vous est accessible en lecture, il n'y a donc rien à chercher. "
        "Vérifiez la sélection, ou posez la question sans choisir de documents pour chercher dans tous les vôtres.",
    },
    "ingesting": {
        "en": "Your documents are still being processed (parsing, embedding, indexing) and cannot be searched yet. "
        "Ask again once they are ready; the documents list shows their status.",
        "de": "Ihre Dokumente werden noch verarbeitet (Analyse, Einbettung, Indexierung) und sind noch nicht "
        "durchsuchbar. Fragen Sie erneut, sobald sie bereit sind; die Dokumentliste zeigt ihren Status.",
        "fr": "Vos documents sont encore en cours de traitement (analyse, vectorisation, indexation) et ne peuvent "
        "pas encore être interrogés. Reposez la question quand ils seront prêts ; la liste des documents indique "
        "leur état.",
    },
    "withheld": {
        "en": "I could not verify an answer in your documents. What they say (unverified, check the sources):",
        "de": "Ich konnte in Ihren Dokumenten keine Antwort bestätigen. Was sie sagen (unbestätigt, prüfen Sie die "
        "Quellen):",
        "fr": "Je n'ai pas pu vérifier de réponse dans vos documents. Ce qu'ils disent (non vérifié, consultez les "
        "sources) :",
    },
    "guardrail_refused": {
        "en": "Your question was not accepted: {reason}",
        "de": "Ihre Frage wurde nicht angenommen: {reason}",
        "fr": "Votre question n'a pas été acceptée : {reason}",
    },
    "guardrail_injection": {
        "en": "the question looks like an attempt to override the assistant's instructions or extract secrets "
        "({rules}); please rephrase it as a question about your documents",
        "de": "die Frage sieht wie ein Versuch aus, die Anweisungen des Assistenten zu umgehen oder Geheimnisse "
        "abzufragen ({rules}); bitte formulieren Sie sie als Frage zu Ihren Dokumenten",
        "fr": "la question ressemble à une tentative de contourner les instructions de l'assistant ou d'extraire "
        "des secrets ({rules}) ; reformulez-la comme une question sur vos documents",
    },
    "guardrail_history": {
        "en": "the chat history looks like an attempt to override the assistant's instructions or extract secrets "
        "({rules}); start a new chat",
        "de": "der Chatverlauf sieht wie ein Versuch aus, die Anweisungen des Assistenten zu umgehen oder "
        "Geheimnisse abzufragen ({rules}); beginnen Sie einen neuen Chat",
        "fr": "l'historique de la conversation ressemble à une tentative de contourner les instructions de "
        "l'assistant ou d'extraire des secrets ({rules}) ; commencez une nouvelle conversation",
    },
    "invalid_request": {
        "en": "The request is not valid: {fields}",
        "de": "Die Anfrage ist ungültig: {fields}",
        "fr": "La requête n'est pas valide : {fields}",
    },
    "field_missing": {"en": "{field} is missing", "de": "{field} fehlt", "fr": "{field} est manquant"},
    "field_invalid": {"en": "{field} is not valid", "de": "{field} ist ungültig", "fr": "{field} n'est pas valide"},
}

# The most frequent function words of each language (none shared between them); a question is in a language
# when at least two of its words are among that language's and no other language has as many.
_FUNCTION_WORDS = {
    "en": frozenset(
        [
            "the",
            "is",
            "are",
            "were",
            "what",
            "who",
            "when",
            "where",
            "which",
            "how",
            "why",
            "does",
            "do",
            "did",
            "of",
            "to",
            "in",
            "and",
            "for",
            "with",
            "our",
            "my",
            "your",
            "this",
            "that",
            "can",
            "i",
        ]
    ),
    "de": frozenset(
        [
            "der",
            "die",
            "das",
            "ist",
            "sind",
            "war",
            "wer",
            "wann",
            "wo",
            "welche",
            "welcher",
            "welches",
            "wie",
            "warum",
            "und",
            "für",
            "mit",
            "unser",
            "unsere",
            "mein",
            "meine",
            "ich",
            "nicht",
            "ein",
            "eine",
            "einen",
            "im",
            "den",
            "dem",
            "zu",
            "von",
            "auf",
            "kann",
            "können",
            "gibt",
            "es",
        ]
    ),
    "fr": frozenset(
        [
            "le",
            "la",
            "les",
            "est",
            "sont",
            "était",
            "qui",
            "quand",
            "où",
            "quel",
            "quelle",
            "quels",
            "quelles",
            "comment",
            "pourquoi",
            "que",
            "quoi",
            "et",
            "pour",
            "avec",
            "notre",
            "nos",
            "mon",
            "ma",
            "mes",
            "je",
            "ne",
            "pas",
            "un",
            "une",
            "du",
            "au",
            "aux",
            "dans",
            "sur",
            "peut",
            "peuvent",
            "il",
            "y",
            "a",
        ]
    ),
}
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)

_LANGUAGE_TAG = re.compile("[a-z]{2,3}")
ACCEPT_LANGUAGE: ContextVar[str] = ContextVar("accept_language", default="")


def question_language(text: str) -> str | None:
    """The catalogue language `text` is clearly written in, or None."""
    words = [w.split("'")[-1] for w in _WORD.findall(text.lower())]
    scores = {lang: sum(w in vocabulary for w in words) for lang, vocabulary in _FUNCTION_WORDS.items()}
    ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)
    (best, top), (_, second) = ranked[0], ranked[1]
    return best if top >= 2 and top > second else None


def accepted_language(header: str, languages: Collection[str] | None = LANGUAGES) -> str | None:
    """The first catalogue language of an Accept-Language header, by its q-values ("de-CH, fr;q=0.8" -> de);
    with `languages` None, the first language of any two- or three-letter code (the search's language hint)."""
    choices: list[tuple[float, int, str]] = []
    for position, part in enumerate(header.split(",")[:32]):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                continue
        language = tag.strip().lower().split("-")[0]
        known = language in languages if languages is not None else _LANGUAGE_TAG.fullmatch(language) is not None
        if known and quality > 0:
            choices.append((-quality, position, language))
    return min(choices)[2] if choices else None


def language(question: str = "", header: str | None = None) -> str:
    """The language of a message for this question and Accept-Language (the request's, by default)."""
    found = question_language(question) if question else None
    if found is None:
        found = accepted_language(ACCEPT_LANGUAGE.get() if header is None else header)
    return found or DEFAULT


def message(key: str, lang: str, **values: str) -> str:
    texts = CATALOGUE[key]
    return texts.get(lang, texts[DEFAULT]).format(**values)


def for_question(key: str, question: str = "", **values: str) -> str:
    """The message `key` in the language of `question` or, failing that, of the request's Accept-Language."""
    return message(key, language(question), **values)


HISTORY_RULE = "history:"  # the answerer's prefix of a rule that fired on the chat history (guardrails.py)
FORM_RULES = frozenset({"control_characters", "empty", "too_long"})  # refusals of form, not of content


def guardrail_reason(reason: str, rules: list[str], question: str) -> str:
    """The answerer's refusal in the question's language: an injection rule (on the question or on the history)
    gets the catalogue's sentence naming the rules; a refusal of form keeps the answerer's own reason."""
    names = [rule.removeprefix(HISTORY_RULE) for rule in rules]
    if not rules or any(name in FORM_RULES for name in names):
        return for_question("guardrail_refused", question, reason=reason)
    key = "guardrail_history" if all(rule.startswith(HISTORY_RULE) for rule in rules) else "guardrail_injection"
    lang = language(question)
    return message("guardrail_refused", lang, reason=message(key, lang, rules=", ".join(names)))


def localize_withheld(answer: str, lang: str) -> str:
    """The answerer's withheld answer (English lead-in, then the documents' quotes) with its lead-in in `lang`."""
    english = CATALOGUE["withheld"][DEFAULT]
    if lang == DEFAULT or not answer.startswith(english):
        return answer
    return message("withheld", lang) + answer[len(english) :]


class RequestLanguageMiddleware:
    """Keeps each request's Accept-Language header in ACCEPT_LANGUAGE for the messages phrased while it runs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"accept-language"), "")
        token = ACCEPT_LANGUAGE.set(header[:512])
        try:
            await self.app(scope, receive, send)
        finally:
            ACCEPT_LANGUAGE.reset(token)
