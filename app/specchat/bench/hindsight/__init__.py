"""The bench's recorded answers read in hindsight: replayed through the decoder's own round
loop on any machine's costs (replay.py over recorded_target.py), what any policy could reach
knowing them (bounds.py) and where auto's time went beyond that (ledger.py)."""
