"""Predicted Outputs: copies the text a request says the answer will mostly repeat
(prediction_drafter.py)."""

from specchat.engine.drafting.prediction.prediction_drafter import PredictionDrafter

__all__ = ["PredictionDrafter"]
