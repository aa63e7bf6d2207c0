"""The draft model's drafter: the drafter (draft_model_drafter.py), how far its drafts are
kept (model_acceptance.py) and how long they run (draft_length.py), its column in a recorded
answer (draft_model_column.py) and the draft model a replay plays back from it
(recorded_model.py)."""

from specchat.engine.drafting.draft_model.draft_model_drafter import DraftModelDrafter, ModelDraft

__all__ = ["DraftModelDrafter", "ModelDraft"]
