"""The bench through `specchat serve`: each prompt direct and through the HTTP API side by
side (via_api.py), and a chat's follow-ups through the API (follow_up.py)."""
