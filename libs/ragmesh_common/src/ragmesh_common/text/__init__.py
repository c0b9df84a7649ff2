"""Text analysis shared by the services (rules, no model):

- `stopwords`: one stop-word list per language (`STOP_WORDS["en" | "de" | "fr"]`, `stop_words(*langs)`);
- `entities`: the rule-based named-entity spotter, one for questions and documents (`spot(text, for_question=)`,
  `extract_entities` for questions, `is_name`; the graph service reads documents with `for_question=False`);
- `words`: the tokeniser (`words`, `terms`), the stemmer (`stem`), the content-word filter (`STOP_WORDS`,
  `QUESTION_WORDS`, `content_words`, `content_stems`);
- `sentences`: the sentence splitter with offsets (`sentence_spans`);
- `numbers`: numbers, amounts, percentages and dates as a claim states them (`numbers`, `number_supported`);
- `names`: the names a sentence states and whether evidence states them (`names`, `name_supported`);
- `questions`: what a question asks (`question_type`, `AnswerType`, `Question` with its key terms);
- `language`: language identification (`detect_language`: Unicode scripts, then py3langid with a minimum
  length and confidence).

The retriever's index analysis (stemming, CJK bigrams) stays in the retriever: PostgreSQL produces the
index tokens, and they must not change when this module does.
"""
