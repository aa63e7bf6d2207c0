"""What passes cost on this machine: the cost table (each batch size's cost as shape × scale,
corrected by real rounds), its store per model file, and the measurement between answers
that drops passes timed while the machine was busy."""
