"""Text analysis shared by the services (rules, no model):

- `stopwords`: one stop-word list per language (`STOP_WORDS["en" | "de" | "fr"]`, `stop_words(*langs)`);
- `entities`: the rule-based named-entity spotter, one for questions and documents (`spot(text, for_question=)`,
  `extract_entities` for questions, `is_name`; the graph service reads documents with `for_question=False`);
- `language`: language identification (`detect_language`: Unicode scripts, then py3langid with a minimum
  length and confidence).

The retriever's index analysis (stemming, CJK bigrams) stays in the retriever: PostgreSQL produces the
index tokens, and they must not change when this module does.
"""
