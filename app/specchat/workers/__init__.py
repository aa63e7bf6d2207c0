"""Qt workers that run the engine and downloads off the UI thread."""
