"""The engine host: the one thread that calls the engine, and the order of its work."""
