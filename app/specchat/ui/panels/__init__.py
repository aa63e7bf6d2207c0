"""The window's side panels: conversations and the API on the left; controls, memory and the
speculation statistics on the right."""
