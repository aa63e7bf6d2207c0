"""Model catalog, downloads and compatibility checks: plain Python, no Qt."""
