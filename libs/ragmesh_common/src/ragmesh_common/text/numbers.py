"""Numbers and dates as a claim states them, normalised so that a sentence and its evidence compare equal.

`numbers(text)` finds digits with thousands separators or decimals (`1,000` = `1000`, German `1.000.000`,
decimal comma `3,5`), ordinal or plural suffixes (`3rd`, `1990s`), a scale word (`$5 million` = `5m` =
`5,000,000`, also German/French scales), percentages (`15%` = `15 percent`) and number words up to
ninety-nine; `number_supported` matches a claimed number to the evidence by value (scaled or as written).
`MONTHS` (and `MONTH_NUMBER`: name → 1..12) holds English, German and French month names; `YEAR` finds a year;
`names_month` / `has_date` say whether a text names a month / states a year or month.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "tausend": 1e3,
    "million": 1e6,
    "millions": 1e6,
    "mn": 1e6,
    "m": 1e6,
    "mio": 1e6,
    "million(s)": 1e6,
    "millionen": 1e6,
    "billion": 1e9,
    "billions": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "mrd": 1e9,
    "milliarde": 1e9,
    "milliarden": 1e9,
    "milliard": 1e9,
    "milliards": 1e9,
    "trillion": 1e12,
}
# A number with thousands separators or decimals, an ordinal/plural suffix, then a scale word or a percent.
NUMBER = re.compile(
    r"(?<![\w.,])(?P<cur>[$€£¥])?\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d{1,3}(?:\.\d{3}){2,}|\d+(?:[.,]\d+)?)(?:st|nd|rd|th|s)?"
    r"(?:\s?(?P<scale>thousand|tausend|millions?|millionen|mio|mn|billions?|milliarden?|milliards?|mrd|bn"
    r"|trillion|[kmb])\b)?"
    r"(?:\s?(?P<pct>%|percent\b|per\s+cent\b|prozent\b|pour\s?cent\b))?",
    re.IGNORECASE,
)
_UNITS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
}
_TENS = {
    w: 10 * (i + 2)
    for i, w in enumerate(["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"])
}
_NUMBER_WORD = re.compile(
    rf"\b(?P<tens>{'|'.join(_TENS)})(?:[-\s](?P<unit>{'|'.join(list(_UNITS)[1:10])}))?\b"
    rf"|\b(?P<single>{'|'.join(_UNITS)})\b",
    re.IGNORECASE,
)
# Month names (English, German, French, with abbreviations) and their numbers.
MONTH_NUMBER: dict[str, int] = {
    name: i + 1
    for i, group in enumerate(
        [
            ("january", "jan", "januar", "janvier"),
            ("february", "feb", "februar", "février"),
            ("march", "mar", "märz", "mars"),
            ("april", "apr", "avril"),
            ("may", "mai"),
            ("june", "jun", "juni", "juin"),
            ("july", "jul", "juli", "juillet"),
            ("august", "aug", "août"),
            ("september", "sep", "sept", "septembre"),
            ("october", "oct", "oktober", "octobre"),
            ("november", "nov", "novembre"),
            ("december", "dec", "dezember", "décembre"),
        ]
    )
    for name in group
}
MONTHS = frozenset(MONTH_NUMBER)


@dataclass(frozen=True)
class NumberToken:
    text: str  # as written
    value: float  # scaled: "$5 million" -> 5e6
    raw: float  # unscaled: "$5 million" -> 5
    percent: bool


def _parse_number(num: str) -> float:
    if re.fullmatch(r"\d{1,3}(?:\.\d{3}){2,}", num):
        return float(num.replace(".", ""))  # 1.000.000 (German thousands)
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", num):
        return float(num.replace(",", ""))
    return float(num.replace(",", "."))  # 3,5 (decimal comma) or 3.5


def numbers(text: str, *, number_words: bool = True, include_one: bool = True) -> list[NumberToken]:
    """Numbers, years, amounts and percentages stated in `text`, normalised (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text)
    found: list[NumberToken] = []
    for m in NUMBER.finditer(text):
        raw = _parse_number(m.group("num"))
        scale = _SCALES.get((m.group("scale") or "").lower().rstrip("."), 1.0)
        found.append(NumberToken(m.group(0).strip(), raw * scale, raw, bool(m.group("pct"))))
    if number_words:
        for m in _NUMBER_WORD.finditer(text):
            if m.group("single"):
                if m.group("single").lower() == "one" and not include_one:
                    continue  # "one of the founders": too often not a quantity in an answer
                value = float(_UNITS[m.group("single").lower()])
            else:
                value = float(
                    _TENS[m.group("tens").lower()] + (_UNITS[m.group("unit").lower()] if m.group("unit") else 0)
                )
            found.append(NumberToken(m.group(0), value, value, False))
    return found


def spelled_alike(text: str) -> list[str]:
    """A small whole number written the other way: "5" → ["five"], "21" → ["twenty-one", "twenty one"],
    "Twenty-one" → ["21"]; [] for anything else (larger numbers, amounts, phrases)."""
    stripped = text.strip()
    if re.fullmatch(r"\d{1,2}", stripped):
        value = int(stripped)
        if value < 20:
            return [list(_UNITS)[value]]
        tens = next(w for w, v in _TENS.items() if v == value - value % 10)
        if value % 10 == 0:
            return [tens]
        unit = list(_UNITS)[value % 10]
        return [f"{tens}-{unit}", f"{tens} {unit}"]
    m = _NUMBER_WORD.fullmatch(stripped)
    if m is None:
        return []
    if m.group("single"):
        return [str(_UNITS[m.group("single").lower()])]
    return [str(_TENS[m.group("tens").lower()] + (_UNITS[m.group("unit").lower()] if m.group("unit") else 0))]


def number_supported(claim: NumberToken, evidence: Sequence[NumberToken]) -> bool:
    for e in evidence:
        if claim.percent and not e.percent:
            continue
        if any(math.isclose(claim.value, v, rel_tol=1e-9, abs_tol=1e-9) for v in (e.value, e.raw)):
            return True
    return False


# A year from 1000 to 2099 standing alone (its digits are the one group).
YEAR = re.compile(r"(?<!\d)(1[0-9]\d\d|20\d\d)(?!\d)")


def names_month(text: str) -> bool:
    """A word of `text` is a month's name ("2 June 1961", "im März")."""
    return any(w in MONTHS for w in re.findall(r"[^\W\d_]+", unicodedata.normalize("NFKC", text).lower()))


def has_date(text: str) -> bool:
    """`text` states a year or names a month."""
    return bool(YEAR.search(unicodedata.normalize("NFKC", text))) or names_month(text)


def strip_numbers(text: str) -> str:
    """`text` with its numbers (and their scale words and percent signs) blanked out."""
    return NUMBER.sub(" ", unicodedata.normalize("NFKC", text))
