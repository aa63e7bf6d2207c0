"""Model pairs: the picker, its list, details, downloads and target files, and loading a pair."""
