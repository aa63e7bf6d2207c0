"""Reading an answer back as the model's chat format writes it: its thinking, its text, its tool calls."""
