"""Qt workers that run the engine and downloads off the UI thread."""

from specchat import qtcompat

qtcompat.install()
