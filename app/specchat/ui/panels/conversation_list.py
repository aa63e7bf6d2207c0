"""The conversation list: new, rename, delete with undo, and search."""

from __future__ import annotations

import time
from collections import Counter

from PySide6.QtCore import QPoint, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from specchat.store.conversations import Conversation, ConversationStore, StoreError

#: How long the "Deleted … Undo" bar stays.
UNDO_TIMEOUT_MS = 10_000


def when(stamp: float, *, now: float | None = None, seconds: bool = False) -> str:
    """A conversation's time for the list: "14:05" today, "22 Nov 14:05" before."""
    local, today = time.localtime(stamp), time.localtime(now if now is not None else time.time())
    clock = "%H:%M:%S" if seconds else "%H:%M"
    return time.strftime(clock if local[:3] == today[:3] else f"%d %b {clock}", local).lstrip("0")


def item_texts(conversations: list[Conversation]) -> list[str]:
    """The list's texts: titles, with the start time where titles repeat (to the second
    where the minute repeats too)."""
    titles = Counter(c.title or "Untitled" for c in conversations)
    minutes = Counter((c.title, when(c.created)) for c in conversations)
    texts = []
    for c in conversations:
        title = c.title or "Untitled"
        if titles[title] > 1:
            title += f" · {when(c.created, seconds=minutes[(c.title, when(c.created))] > 1)}"
        texts.append(title)
    return texts


class ConversationList(QWidget):
    """Lists the store's conversations, newest first, filtered by the search box.

    Attributes:
        store: the conversation store.
        list: the list widget (item data: conversation id).
        search: the search box.

    Signals:
        selected(int): the user picked a conversation.
        new_requested(): the "New chat" button.
        deleted(int): a conversation went to the bin.
        failed(str): a rename, delete or undo could not be written (the message to show).
    """

    selected = Signal(int)
    new_requested = Signal()
    deleted = Signal(int)
    failed = Signal(str)

    def __init__(self, store: ConversationStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self._undo_id: int | None = None
        #: The conversation shown in the transcript: the highlight stays on it (a right-click
        #: moves Qt's current item, and a list rebuilt from that would highlight another one).
        self._open: int | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        self.new_button = QPushButton("New chat")
        self.new_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_button.clicked.connect(self._on_new_clicked)
        top.addWidget(self.new_button)
        layout.addLayout(top)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search conversations")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(self._on_search_changed)
        layout.addWidget(self.search)
        self.list = QListWidget()
        self.list.setObjectName("conversations")
        # Long titles are elided, never scrolled sideways.
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._on_context_menu)
        self.list.itemActivated.connect(self._on_item_activated)
        self.list.itemClicked.connect(self._on_item_activated)
        self.list.currentItemChanged.connect(self._on_current_changed)
        layout.addWidget(self.list, 1)
        # The undo bar: appears after a delete, until undone or timed out.
        self.undo_bar = QWidget()
        undo_layout = QHBoxLayout(self.undo_bar)
        undo_layout.setContentsMargins(0, 0, 0, 0)
        self.undo_label = QLabel("")
        self.undo_label.setWordWrap(True)
        self.undo_button = QPushButton("Undo")
        self.undo_button.clicked.connect(self._on_undo_clicked)
        undo_layout.addWidget(self.undo_label, 1)
        undo_layout.addWidget(self.undo_button)
        self.undo_bar.hide()
        layout.addWidget(self.undo_bar)
        self._undo_timer = QTimer(self)
        self._undo_timer.setSingleShot(True)
        self._undo_timer.setInterval(UNDO_TIMEOUT_MS)
        self._undo_timer.timeout.connect(self._on_undo_expired)
        self.refresh()

    # --- public --------------------------------------------------------------------------
    def refresh(self, *, select: int | None = None) -> None:
        if select is not None:
            self._open = select
        current = self._open
        self.list.blockSignals(True)
        self.list.clear()
        conversations = list(self.store.conversations(self.search.text().strip()))
        for conversation, text in zip(conversations, item_texts(conversations), strict=True):
            item = QListWidgetItem(text)
            item.setData(Qt.ItemDataRole.UserRole, conversation.id)
            item.setToolTip(f"{conversation.title}\nstarted {when(conversation.created)}")
            self.list.addItem(item)
            if conversation.id == current:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return None if item is None else int(item.data(Qt.ItemDataRole.UserRole))

    def ids(self) -> list[int]:
        return [
            int(self.list.item(i).data(Qt.ItemDataRole.UserRole)) for i in range(self.list.count())
        ]

    def rename(self, conversation_id: int, title: str) -> None:
        title = title.strip()
        if title:
            try:
                self.store.rename(conversation_id, title)
            except StoreError as failure:
                self.failed.emit(f"The conversation was not renamed: {failure}.")
            self.refresh()

    def delete(self, conversation_id: int) -> None:
        """Move to the bin, offering Undo for a while."""
        title = self.store.get(conversation_id).title
        try:
            self.store.delete(conversation_id)
        except StoreError as failure:
            self.failed.emit(f"“{title}” was not deleted: {failure}.")
            return
        self._undo_id = conversation_id
        self.undo_label.setText(f"Deleted “{title}”.")
        self.undo_bar.show()
        self._undo_timer.start()
        self.refresh()
        self.deleted.emit(conversation_id)

    def undo_delete(self) -> int | None:
        restored = self._undo_id
        if restored is not None:
            try:
                self.store.restore(restored)
            except StoreError as failure:
                # The Undo bar stays, so the user can try again once the file is free.
                self.failed.emit(f"The conversation was not restored: {failure}.")
                return None
            self._undo_id = None
            self.undo_bar.hide()
            self.refresh(select=restored)
        return restored

    # --- slots ---------------------------------------------------------------------------
    @Slot()
    def _on_new_clicked(self) -> None:
        self.new_requested.emit()

    @Slot(str)
    def _on_search_changed(self, _text: str) -> None:
        self.refresh()

    @Slot(QListWidgetItem)
    def _on_item_activated(self, item: QListWidgetItem) -> None:
        self._open = int(item.data(Qt.ItemDataRole.UserRole))
        self.selected.emit(self._open)

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_current_changed(self, current: QListWidgetItem | None, _previous: object) -> None:
        if current is None:  # the window cleared it: a new chat, no conversation open
            self._open = None

    @Slot()
    def _on_undo_clicked(self) -> None:
        restored = self.undo_delete()
        if restored is not None:
            self.selected.emit(restored)

    @Slot()
    def _on_undo_expired(self) -> None:
        self._undo_id = None
        self.undo_bar.hide()

    @Slot(QPoint)
    def _on_context_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        conversation_id = int(item.data(Qt.ItemDataRole.UserRole))
        menu = QMenu(self)
        menu.addAction("Rename…", lambda: self._ask_rename(conversation_id))
        menu.addAction("Delete", lambda: self.delete(conversation_id))
        menu.exec(self.list.viewport().mapToGlobal(pos))
        self.refresh()  # the highlight goes back to the open conversation

    def _ask_rename(self, conversation_id: int) -> None:
        current = self.store.get(conversation_id).title
        title, ok = QInputDialog.getText(self, "Rename conversation", "Title", text=current)
        if ok:
            self.rename(conversation_id, title)
