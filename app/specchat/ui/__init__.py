"""Qt widgets."""

from specchat import qtcompat

qtcompat.install()
