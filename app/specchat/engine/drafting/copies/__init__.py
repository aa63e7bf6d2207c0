"""What the copying drafters (lookup/, suffix/, prediction/) share: where the text's ending
occurred before (matching.py), how far a copy is kept (copy_acceptance.py), edits a copy
carries through (substitutions.py) and the copying drafter's base with its one search per
position (copying.py)."""
