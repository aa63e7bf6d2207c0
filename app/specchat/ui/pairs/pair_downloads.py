"""The model picker's download part: what is being fetched, what failed, and the questions."""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtWidgets import QMessageBox, QWidget

from specchat.models.transfer import format_bytes
from specchat.workers.download_payloads import (
    FetchCancelled,
    FileProgress,
    PairFetched,
    PairStatus,
)


def describe_status(status: PairStatus, *, failed: bool) -> str:
    """The list's status column for a surveyed pair."""
    if failed and not status.ready:
        return "Failed"
    if status.present:
        if status.damaged:
            return "Damaged"
        if status.compatible is False:
            return "Incompatible"
        return "Ready ✓" if status.verified else "Ready"
    if status.partial:
        sizes = [f.size for f in status.files if not f.present]
        known = [size for size in sizes if size is not None]
        total = sum(known)
        if len(known) == len(sizes) and total > 0:
            return f"Paused at {status.partial / total * 100:.0f} %"
        return f"Paused ({format_bytes(status.partial)} kept)"
    present = [f.role for f in status.files if f.present]
    if present:
        return f"{present[0].capitalize()} present"
    return "Not downloaded"


def checksum_summary(fetched: PairFetched) -> str:
    """One line saying how each fetched file's sha256 compared."""
    lines = []
    for check in fetched.checks:
        if check.sha256:
            lines.append(f"{check.role}: sha256 {check.sha256[:16]}… ✓ matches")
        else:
            lines.append(f"{check.role}: NOT verified (no sha256 known to check against)")
    return "Checksums — " + "; ".join(lines)


def progress_status(event: FileProgress) -> str | None:
    """The list's status column during a fetch, or None to leave it as it is."""
    if event.stage == "download" and event.fraction is not None:
        return f"downloading {event.role} {event.fraction * 100:.0f} %"
    if event.stage == "verify":
        return f"checking {event.role}"
    return None


def ask_keep_partial(parent: QWidget) -> bool | None:
    """Ask how to cancel: True keeps the partial file for a resume, False deletes it, None
    goes on downloading."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Cancel download")
    box.setText("Keep what has been downloaded so far?")
    box.setInformativeText(
        "Kept, the download resumes where it stopped the next time you start it. "
        "Deleted, it starts over."
    )
    keep = box.addButton("Keep for resume", QMessageBox.ButtonRole.AcceptRole)
    delete = box.addButton("Delete partial file", QMessageBox.ButtonRole.DestructiveRole)
    go_on = box.addButton("Continue downloading", QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(keep)
    box.setEscapeButton(go_on)
    box.exec()
    clicked = box.clickedButton()
    if clicked is keep:
        return True
    if clicked is delete:
        confirm = QMessageBox.question(
            parent,
            "Delete partial file",
            "Delete the partial download? It cannot be resumed afterwards.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        return confirm != QMessageBox.StandardButton.Yes
    return None


@dataclass
class Downloads:
    """What the picker knows about fetches; one runs at a time.

    Attributes:
        fetching: the pair being fetched, or None.
        failed: the failure message of each pair whose last fetch failed.
        checks: the checksum summary of each pair fetched in this dialog.
        live: the running fetch's latest progress per role.
        discard_after_cancel: delete the partial file once the cancel arrives.
        asking: the cancel question is open (the transfer is paused meanwhile).
        paused: the cancel that arrived while asking, until the answer says what follows.
        finished_while_asking: a fetch that completed before the pause took hold.
        resume_after_cancel: "Continue downloading" was answered before the pause arrived.
        tries: fetches started per pair in this dialog (a retry says which try failed).
    """

    fetching: str | None = None
    failed: dict[str, str] = field(default_factory=dict)
    checks: dict[str, str] = field(default_factory=dict)
    live: dict[str, FileProgress] = field(default_factory=dict)
    discard_after_cancel: bool = False
    asking: bool = False
    paused: FetchCancelled | None = None
    finished_while_asking: str | None = None
    resume_after_cancel: bool = False
    tries: dict[str, int] = field(default_factory=dict)

    def after_question(self, keep: bool | None) -> str:
        """What to do once "Keep what has been downloaded?" is answered (the transfer was
        paused when it opened): "finished" (it completed before the pause took hold: nothing
        to cancel), "resume", "discard", "kept" (act now: the pause has arrived), or "wait"
        (the pause is still on its way; the flags set here finish the job when it arrives).
        """
        self.asking = False
        if self.finished_while_asking is not None:
            self.finished_while_asking = None
            self.paused = None
            return "finished"
        arrived = self.paused is not None
        if keep is None:
            self.resume_after_cancel = not arrived
            return "resume" if arrived else "wait"
        if keep is False:
            self.discard_after_cancel = not arrived
            return "discard" if arrived else "wait"
        return "kept" if arrived else "wait"

    def begin(self, pair_id: str) -> None:
        """A fetch of `pair_id` starts: forget its last failure and checks."""
        self.fetching = pair_id
        self.tries[pair_id] = self.tries.get(pair_id, 0) + 1
        self.failed.pop(pair_id, None)
        self.checks.pop(pair_id, None)
        self.live = {}
        self.discard_after_cancel = False
