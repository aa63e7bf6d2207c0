"""The MTP head and the Gemma 4 assistant: two drafters over one driver, the head that reads
the target's nextn hidden state (mtp_drafters.py; mtp_driver.py, loaded only with a model)."""

from specchat.engine.drafting.mtp.mtp_drafters import (
    ASSISTANT_ARCHITECTURE,
    AssistantDrafter,
    MtpDrafter,
    load_assistant,
)

__all__ = ["ASSISTANT_ARCHITECTURE", "AssistantDrafter", "MtpDrafter", "load_assistant"]
