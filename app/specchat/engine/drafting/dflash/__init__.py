"""The DFlash drafter: its drafter (dflash_drafter.py), its llama.cpp driver
(dflash_driver.py, loaded only with a model) and its tiny test model (dflash_tiny.py)."""

from specchat.engine.drafting.dflash.dflash_drafter import (
    DFLASH_ARCHITECTURE,
    DSPARK_TENSOR,
    DFlashDrafter,
    load_dflash,
)

__all__ = ["DFLASH_ARCHITECTURE", "DSPARK_TENSOR", "DFlashDrafter", "load_dflash"]
