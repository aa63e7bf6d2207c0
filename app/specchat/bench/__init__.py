"""`specchat bench`: measure every drafting mode side by side against plain and llama.cpp.

Rooms, each importing only those before it: live/ (the timed runs and the traces they
record), hindsight/ (recorded answers replayed and bounded), api/ (the bench through
`specchat serve`), agent/ (a scripted agent's tasks through it), reports/ (report.json,
report.md). prompts.py, with the prompt sets and the shipped traces beside it, serves them
all."""
