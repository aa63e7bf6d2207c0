"""`specchat bench`: measure every drafting mode side by side against plain and llama.cpp."""
