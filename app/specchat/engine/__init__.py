"""Speculative decoding engine: plain Python over llama.cpp, no Qt."""
