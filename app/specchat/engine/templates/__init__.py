"""Chat templates: a model's Jinja template compiled and rendered in a bounded sandbox (a
helper process under hard time and memory limits), which template family a model speaks,
and a chat made into prompt tokens with only the template's own markers read as special."""
