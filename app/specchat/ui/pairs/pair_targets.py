"""The model picker's target files: which one runs, and "Optimise for this CPU"."""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QButtonGroup,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from specchat.ui import palette
from specchat.workers.optimise_worker import OptimiseProgress, TargetChoices, TargetOption

#: The progress bar counts in thousandths.
BAR_MAX = 1000
_NAMES = {"target": "as shipped", "cpu": "CPU format (hub)", "optimised": "optimised here"}


def describe_option(option: TargetOption) -> str:
    """One radio button's text: format, file, where it comes from and whether it is here."""
    state = "" if option.path is not None else " — not downloaded"
    return f"{option.quantisation} · {option.filename} ({_NAMES.get(option.variant, '')}){state}"


class TargetChooser(QGroupBox):
    """A pair's target files as radio buttons (the checked one runs), and the optimiser.

    Attributes:
        options: the radio button of each variant shown.
        runs: says which file runs.
        reasons: why the other files exist, and the optimised copy's measured quality.
        optimise_button, cancel_button: start and stop "Optimise for this CPU".
        bar: the conversion's progress.

    Signals:
        chosen(str): the user chose the variant to run ("target", "cpu", "optimised").
        optimise_clicked(): "Optimise for this CPU" was pressed.
        cancel_clicked(): its Cancel was pressed.
    """

    chosen = Signal(str)
    optimise_clicked = Signal()
    cancel_clicked = Signal()

    def __init__(self, *, pal: palette.Palette, parent: QWidget | None = None) -> None:
        super().__init__("Target file", parent)
        self.setObjectName("targetChooser")
        self._group = QButtonGroup(self)
        self._group.setExclusive(True)
        self._group.buttonToggled.connect(self._on_toggled)
        self.options: dict[str, QRadioButton] = {}
        self._choices: TargetChoices | None = None
        self._buttons = QVBoxLayout()
        self._buttons.setSpacing(2)
        self.runs = QLabel()
        self.runs.setWordWrap(True)
        self.reasons = QLabel()
        self.reasons.setWordWrap(True)
        self.reasons.setStyleSheet(f"color: {pal.muted_text.name()};")
        self.optimise_button = QPushButton("Optimise for this CPU")
        self.optimise_button.setToolTip(
            "Convert the target into Q4_0, the format a CPU checks drafts cheapest in "
            "(a few seconds to a minute), then measure what it costs in quality"
        )
        self.cancel_button = QPushButton("Cancel")
        for button in (self.optimise_button, self.cancel_button):
            button.setAutoDefault(False)
        self.optimise_button.clicked.connect(self.optimise_clicked)
        self.cancel_button.clicked.connect(self.cancel_clicked)
        self.bar = QProgressBar()
        self.bar.setRange(0, BAR_MAX)
        self.bar.setObjectName("optimiseBar")
        actions = QHBoxLayout()
        actions.addWidget(self.optimise_button)
        actions.addWidget(self.cancel_button)
        actions.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(self._buttons)
        layout.addWidget(self.runs)
        layout.addWidget(self.reasons)
        layout.addWidget(self.bar)
        layout.addLayout(actions)
        self.set_busy(False)

    def shown_pair(self) -> str | None:
        """The pair whose files are shown (None before any)."""
        return self._choices.pair_id if self._choices is not None else None

    def show_choices(self, choices: TargetChoices, *, current: str, busy: bool) -> None:
        """Show a pair's target files with `current` checked (the shipped file if absent)."""
        self._choices = choices
        for button in self.options.values():
            self._group.removeButton(button)
            button.deleteLater()
        self.options = {}
        present = {o.variant for o in choices.options if o.path is not None}
        runs = current if current in present else "target"
        self._group.blockSignals(True)
        for option in choices.options:
            button = QRadioButton(describe_option(option))
            button.setObjectName(f"target_{option.variant}")
            button.setEnabled(option.path is not None and not busy)
            if option.path is None and option.variant == "cpu":
                button.setToolTip(
                    f"Not downloaded: `specchat models fetch {choices.pair_id} --cpu-target`"
                )
            button.setChecked(option.variant == runs)
            self._group.addButton(button)
            self._buttons.addWidget(button)
            self.options[option.variant] = button
        self._group.blockSignals(False)
        self._show_runs(runs)
        # The optimised copy's label says where it comes from; its quality says the rest.
        notes = [
            f"{_NAMES.get(o.variant, o.variant)}: {o.reason}"
            for o in choices.options
            if o.reason and o.variant != "optimised"
        ]
        notes += list(choices.quality)
        self.reasons.setText("\n".join(notes))
        self.reasons.setVisible(bool(notes))
        shipped_here = "target" in present
        self.optimise_button.setEnabled(shipped_here and not busy)
        self.optimise_button.setText(
            "Optimise again" if "optimised" in present else "Optimise for this CPU"
        )
        self.setVisible(bool(choices.options))

    def _show_runs(self, variant: str) -> None:
        option = next(
            (o for o in (self._choices.options if self._choices else ()) if o.variant == variant),
            None,
        )
        self.runs.setText("" if option is None else f"Runs: <b>{option.filename}</b>")

    def set_busy(self, busy: bool) -> None:
        """While converting: Cancel instead of Optimise, the bar shown, choices frozen."""
        self.cancel_button.setVisible(busy)
        self.cancel_button.setEnabled(busy)
        self.bar.setVisible(busy)
        if busy:
            self.bar.setValue(0)
            self.bar.setFormat("starting…")
        self.optimise_button.setEnabled(not busy and self.optimise_button.isEnabled())
        for button in self.options.values():
            button.setEnabled(not busy and button.isEnabled())

    def show_progress(self, event: OptimiseProgress) -> None:
        if event.fraction is None:
            self.bar.setRange(0, 0)
        else:
            self.bar.setRange(0, BAR_MAX)
            self.bar.setValue(round(event.fraction * BAR_MAX))
        self.bar.setFormat(event.text)

    @Slot(object, bool)
    def _on_toggled(self, button: object, checked: bool) -> None:
        if not checked:
            return
        for variant, candidate in self.options.items():
            if candidate is button:
                self._show_runs(variant)
                self.chosen.emit(variant)
