"""ragmesh answerer: input guardrails, grounded answers streamed from an LLM (Ollama's API or any
OpenAI-compatible server), citations attributed by lexical support."""
