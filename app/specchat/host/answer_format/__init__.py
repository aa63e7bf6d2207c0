"""Reading an answer back as its chat format writes it: thinking, text, tool calls."""
