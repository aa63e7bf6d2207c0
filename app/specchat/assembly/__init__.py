"""Where the window's parts are assembled from the layers below: its API server and the
quality bench behind "Optimise for this CPU"."""
