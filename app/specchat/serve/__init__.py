"""`specchat serve`: an OpenAI-compatible HTTP API over the engine's one thread."""
