"""ragmesh answerer: input guardrails, grounded answers streamed from an LLM through the Ollama API,
citations attributed by lexical support; plus `local_ollama`, an embedded llama.cpp stand-in for Ollama."""
