"""The transcript's document: messages painted as spans, thinking folds, attachments, Markdown
and code blocks."""
