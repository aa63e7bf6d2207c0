"""The model picker's list: catalog pairs and checked local pairs, with size and status."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

from specchat.models.catalog import UNCHECKED_ENTRY, Catalog, ModelFile, ModelPair
from specchat.models.drafter_kinds import DrafterKind
from specchat.models.transfer import format_bytes
from specchat.workers.download_payloads import LocalChecked, PairStatus

#: Keys of local pairs start with this; catalog pairs are keyed by their id.
LOCAL_PREFIX = "local:"
_ROLE_KEY = Qt.ItemDataRole.UserRole
_COLUMNS = ("Pair", "Models", "Drafter", "Size", "Status")
#: Where each fact stands in a row.
DRAFTER_COLUMN, SIZE_COLUMN, STATUS_COLUMN = 2, 3, 4
#: Shown for a size neither the catalog nor (yet) the hub has named.
UNKNOWN_SIZE = "size unknown"


def catalog_size(model: ModelFile) -> int | None:
    """The file's size as the catalog (or its mirror) names it, if it does."""
    if model.size is not None:
        return model.size
    return model.mirror.size if model.mirror is not None else None


def file_size(size: int | None, model: ModelFile) -> str:
    """One file's size: exact when known, else the publisher's rounded figure marked "≈"."""
    if size is not None:
        return format_bytes(size)
    return f"≈ {model.approx_size}" if model.approx_size is not None else UNKNOWN_SIZE


def pair_size(status: PairStatus | None, pair: ModelPair) -> str:
    """The pair's files together (target, and draft file if any), from the files' status
    once surveyed, else from the catalog.

    A file known only by its publisher's rounded figure makes the total approximate ("≈").
    """
    files = pair.files()
    if status is not None:
        surveyed = {file.role: file.size for file in status.files}
        exact = [surveyed.get(role) for role, _ in files]
    else:
        exact = [catalog_size(model) for _, model in files]
    sizes = [
        size if size is not None else model.approx_bytes
        for size, (_, model) in zip(exact, files, strict=True)
    ]
    if any(size is None for size in sizes):
        return UNKNOWN_SIZE
    total = format_bytes(sum(size for size in sizes if size is not None))
    return total if None not in exact else f"≈ {total}"


def pair_models(pair: ModelPair) -> str:
    """The parameter counts of the pair's models ("7.6B + 0.5B"; the target's alone when its
    MTP head drafts)."""
    target = pair.target.params or "?"
    return target if pair.draft is None else f"{target} + {pair.draft.params or '?'}"


def pair_tooltip(pair: ModelPair) -> str:
    """The pair's note, and what an unchecked catalog entry means."""
    lines = [pair.note or pair.name]
    if not pair.checked:
        lines.append(UNCHECKED_ENTRY[0].upper() + UNCHECKED_ENTRY[1:] + ".")
    return "\n".join(lines)


def local_key(checked: LocalChecked) -> str:
    """The list key of a local pair."""
    return f"{LOCAL_PREFIX}{checked.target}|{checked.draft or ''}"


class PairList(QTreeWidget):
    """One row per pair: name, model sizes, bytes on disk and what state it is in.

    Each row carries its key: the catalog id, or `local_key()` for files on disk.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setColumnCount(len(_COLUMNS))
        self.setHeaderLabels(list(_COLUMNS))
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(True)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for index in range(1, len(_COLUMNS)):
            header.setSectionResizeMode(index, QHeaderView.ResizeMode.ResizeToContents)
        # Room around each row; a layout rule only, the palette keeps every colour.
        self.setStyleSheet("QTreeWidget::item { padding: 3px 2px; }")
        self.setMinimumWidth(520)

    def fill(self, catalog: Catalog, *, current: str | None) -> None:
        """List the catalog's pairs and select `current` (else the first)."""
        chosen: QTreeWidgetItem | None = None
        for pair in catalog:
            item = QTreeWidgetItem(
                [
                    pair.name,
                    pair_models(pair),
                    pair.drafter.label,
                    pair_size(None, pair),
                    "checking…",
                ]
            )
            item.setData(0, _ROLE_KEY, pair.id)
            item.setToolTip(0, pair_tooltip(pair))
            item.setToolTip(DRAFTER_COLUMN, pair.drafter.description)
            item.setToolTip(SIZE_COLUMN, "the pair's files, as the catalog or the hub names them")
            self.addTopLevelItem(item)
            if pair.id == current:
                chosen = item
        if chosen is None and self.topLevelItemCount():
            chosen = self.topLevelItem(0)
        if chosen is not None:
            self.setCurrentItem(chosen)

    def add_local(self, checked: LocalChecked) -> QTreeWidgetItem:
        """The row of a checked local pair, added unless it is listed already."""
        key = local_key(checked)
        item = self.row(key)
        if item is None:
            name = checked.target.stem + (f" + {checked.draft.stem}" if checked.draft else "")
            size = checked.target.stat().st_size + (
                checked.draft.stat().st_size if checked.draft else 0
            )
            models = "target + draft" if checked.draft else "target only"
            drafter = DrafterKind.DRAFT_MODEL.label if checked.draft else "prompt lookup"
            item = QTreeWidgetItem([f"Local: {name}", models, drafter, format_bytes(size), "Ready"])
            item.setData(0, _ROLE_KEY, key)
            item.setToolTip(0, str(checked.target))
            self.addTopLevelItem(item)
        return item

    def selected_key(self) -> str | None:
        item = self.currentItem()
        return None if item is None else str(item.data(0, _ROLE_KEY))

    def select(self, key: str) -> None:
        item = self.row(key)
        if item is not None:
            self.setCurrentItem(item)

    def row(self, key: str) -> QTreeWidgetItem | None:
        for index in range(self.topLevelItemCount()):
            item = self.topLevelItem(index)
            if item is not None and item.data(0, _ROLE_KEY) == key:
                return item
        return None

    def status_text(self, key: str) -> str:
        item = self.row(key)
        return "" if item is None else item.text(STATUS_COLUMN)

    def set_status(self, key: str, text: str) -> None:
        item = self.row(key)
        if item is not None:
            item.setText(STATUS_COLUMN, text)

    def set_size(self, key: str, text: str) -> None:
        item = self.row(key)
        if item is not None:
            item.setText(SIZE_COLUMN, text)
