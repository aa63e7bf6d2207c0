"""Exporting a conversation to a Markdown or JSON file the user picks."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from specchat.store.conversations import ConversationStore


def ask_export_path(parent: QWidget, title: str, *, kind: str) -> Path | None:
    """The file to export to, proposed from the conversation's title; None when cancelled."""
    safe = "".join(c if c.isalnum() or c in " -_" else "_" for c in title).strip() or "chat"
    suffix = ".md" if kind == "md" else ".json"
    path, _ = QFileDialog.getSaveFileName(
        parent,
        "Export conversation",
        str(Path.home() / f"{safe}{suffix}"),
        "Markdown (*.md)" if kind == "md" else "JSON (*.json)",
    )
    return Path(path) if path else None


def write_export(store: ConversationStore, conversation_id: int, path: Path, *, kind: str) -> str:
    """Write the conversation as Markdown ("md") or JSON; returns an error for people, or ""."""
    text = (
        store.export_markdown(conversation_id)
        if kind == "md"
        else store.export_json(conversation_id)
    )
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        return f"Could not write {path}: {error.strerror or error}"
    return ""
