"""infersight.batch"""

__all__: list[str] = []
