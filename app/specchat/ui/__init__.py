"""Qt widgets."""
