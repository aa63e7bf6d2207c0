"""The suffix index over what was already said: a suffix automaton per document, and the
index that finds the longest earlier continuation of the text being written (fed by
engine/history.py)."""
