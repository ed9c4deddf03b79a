"""infersight.bench"""

__all__: list[str] = []
