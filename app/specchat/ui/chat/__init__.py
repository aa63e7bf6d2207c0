"""The conversation being had: the centre pane, the composer's attachments and the answer
streaming into it."""
