"""The GPU check: libllama built for the GPU found, real-shape costs, replays and exactness."""
