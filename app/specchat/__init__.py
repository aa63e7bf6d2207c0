"""SpecChat: chat with local language models faster, through speculative decoding."""

__version__ = "0.1.0"
