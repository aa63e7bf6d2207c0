"""The EAGLE-3 drafter: its drafter (eagle3_drafter.py), its llama.cpp driver
(eagle3_driver.py, loaded only with a model) and its tiny test model (eagle3_tiny.py)."""

from specchat.engine.drafting.eagle3.eagle3_drafter import (
    EAGLE3_ARCHITECTURE,
    Eagle3Drafter,
    load_eagle3,
)

__all__ = ["EAGLE3_ARCHITECTURE", "Eagle3Drafter", "load_eagle3"]
